package convert

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync/atomic"

	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/atomicfile"
	"github.com/ckpt-dev/ckpt/safetensors"
	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/ckpt-dev/ckpt/torchzip"
	"github.com/klauspost/compress/zstd"
)

// Keys ckpt writes in safetensors __metadata__ besides "format" and the
// alias entries.
const (
	// ObjectsKey holds a JSON object mapping each kept non-tensor value's
	// name to its value.
	ObjectsKey = "ckpt.objects"
)

// ctxReader fails reads once ctx is done, so a long copy stops promptly.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// progressWriter reports the bytes that pass through it.
type progressWriter struct {
	w  io.Writer
	fn func(int64)
}

func (p progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if p.fn != nil {
		p.fn(int64(n))
	}
	return n, err
}

// tempFile is an output being written: a local atomicfile.File, given its
// final name only when complete (commit), or for a Destination its Output,
// key its name there and final how messages name it.
type tempFile struct {
	file  *atomicfile.File
	final string

	out Output
	key string
}

// initWriteBack gives the conversion its page-cache budget, shared by all
// its outputs (atomicfile.WriteBackBudget; none with WithSync).
func (c *config) initWriteBack() {
	c.pageCache = nil
	if !c.sync {
		c.pageCache = atomicfile.NewBudget(atomicfile.WriteBackBudget())
	}
}

// synced reports whether the outputs are on the disk (or in their object
// store) when Convert returns.
func (c *config) synced() bool { return c.pageCache == nil || c.dest != nil }

// create starts the output final: a temporary file beside it, or an
// Output of the destination (head: the bytes rewritten at the end).
func (c *config) create(ctx context.Context, final string, head int64) (*tempFile, error) {
	if c.dest == nil {
		return createTemp(final, c.pageCache)
	}
	o, err := c.dest.Create(ctx, final, head)
	if err != nil {
		return nil, err
	}
	return &tempFile{out: o, key: final, final: c.dest.Name(final)}, nil
}

// createTemp starts the local output final (atomicfile.Create: budget nil
// writes it directly and syncs it).
func createTemp(final string, budget *atomic.Int64) (*tempFile, error) {
	f, err := atomicfile.Create(final, budget)
	if err != nil {
		return nil, err
	}
	return &tempFile{file: f, final: final}, nil
}

// writeAt rewrites bytes already written (the header).
func (t *tempFile) writeAt(p []byte, off int64) (int, error) {
	if t.out != nil {
		return t.out.WriteAt(p, off)
	}
	return t.file.WriteAt(p, off)
}

// discard takes back what is not committed.
func (t *tempFile) discard() {
	if t.out != nil {
		t.out.Abort()
		t.out = nil
		return
	}
	if t.file != nil {
		t.file.Discard()
	}
}

// finish writes out the output (and syncs a local one without a
// page-cache budget); commit gives it its final name.
func (t *tempFile) finish() error {
	if t.out != nil {
		if err := t.out.Finish(); err != nil {
			return fmt.Errorf("convert: write %s: %w", t.final, err)
		}
		return nil
	}
	return t.file.Finish()
}

// commit puts the finished local file in place of t.final
// (atomicfile.File.Commit); a file that appeared there since the checks
// is ErrExists without force.
func (t *tempFile) commit(force bool) error {
	err := t.file.Commit(force)
	if errors.Is(err, atomicfile.ErrExists) {
		return fmt.Errorf("%w: %s", ErrExists, t.final)
	}
	return err
}

// outWriter is an output being written; Flush writes out everything
// buffered, after which only tempFile.f may be written (to patch a
// header).
type outWriter interface {
	io.Writer
	Flush() error
}

// wrappedOutput is the caller's wrapper over the file's writer, behind a
// buffer.
type wrappedOutput struct {
	*bufio.Writer
	fw interface{ Flush() error }
}

func (w wrappedOutput) Flush() error {
	if err := w.Writer.Flush(); err != nil {
		return err
	}
	return w.fw.Flush()
}

// output returns the writer for a temporary file: its atomicfile.Writer, or the
// caller's wrapper over it behind a buffer.
func (c *config) output(t *tempFile) outWriter {
	var w outWriter
	if t.out != nil {
		w = remoteWriter{t.out}
	} else {
		w = t.file.Writer()
	}
	if c.wrap == nil {
		return w
	}
	return wrappedOutput{bufio.NewWriterSize(c.wrap(w), c.bufSize), w}
}

func writeErr(final string, err error) error {
	return fmt.Errorf("convert: write %s: %w", final, err)
}

// itemReader returns the item's bytes as they go to a safetensors file:
// logical elements, little-endian, cast when asked; the checkedReader
// verifies the input's checksums once they are read.
func (c *config) itemReader(ctx context.Context, it *item) (io.ReadCloser, *checkedReader, error) {
	if t := c.transformed[it.src.Storage]; t != nil && t == it.src {
		return c.transformedReader(ctx, t, it.dtype)
	}
	rc, cr, err := c.checks.tensorReader(ctx, it.src, it.dtype != it.src.DType)
	if err != nil {
		return nil, nil, err
	}
	var r io.Reader = ctxReader{ctx, rc}
	r = io.TeeReader(r, progressWriter{io.Discard, c.progress})
	if it.dtype != it.src.DType {
		r = newCastReader(r, it.src.DType, it.dtype)
	}
	return struct {
		io.Reader
		io.Closer
	}{r, rc}, cr, nil
}

// writeSafetensors writes one safetensors file holding items to tmp,
// then patches the recorded digests into the header.
func (c *config) writeSafetensors(ctx context.Context, tmp *tempFile, items []*item, meta map[string]string) (int64, error) {
	decl, byName, digests, md := safetensorsDecl(items, meta)
	setDigests := func() error {
		b, err := json.Marshal(digests)
		md[digest.MetadataKey] = string(b)
		return err
	}
	if err := setDigests(); err != nil {
		return 0, err
	}
	bw := c.output(tmp)
	// The header is padded so that the data starts on a page
	// (out_safetensors.go).
	hopts := headerOpts(dataLen(items))
	sw, err := safetensors.NewWriter(bw, decl, md, hopts...)
	if err != nil {
		return 0, writeErr(tmp.final, err)
	}
	var total int64
	order := sw.Order()
	defer c.aheadOrder(orderedSources(order, byName))()
	// A tensor copied in the kernel is checked (read back and hashed) on
	// its own goroutine while the next tensor is written: its checks are
	// collected (pending) after the next WriteTensor, so that copying and
	// checking overlap across tensors, which are mostly smaller than one
	// piece of the copy. A failure still fails the conversion, naming its
	// tensor, before anything is committed.
	var pending func() error
	defer func() {
		if pending != nil {
			pending() // an earlier error returned: only end the checker
		}
	}()
	collect := func() error {
		if pending == nil {
			return nil
		}
		f := pending
		pending = nil
		return f()
	}
	for _, wt := range order {
		it := byName[wt.Name]
		dg, err := digest.New(it.nbytes())
		if err != nil {
			return 0, err
		}
		// Bytes copied unchanged from a local file are copied by the
		// kernel and hashed as read back (copyrange.go); others are
		// read straight into the output's write buffers (ReadFrom),
		// hashing on the way; its own goroutine does the writing.
		var src io.Reader
		var rc io.ReadCloser
		sum := dg.Sum
		rcopy, cr, err := c.rangeSource(ctx, tmp, it, dg)
		if err == nil && rcopy != nil {
			src, rc = rcopy, rcopy
		} else if err == nil {
			// A dequantized weight's digest may come from its decode
			// workers (dequant_digest.go).
			wsum := c.workerDigest(it)
			rc, cr, err = c.streamedItemReader(ctx, it) // streamrange.go
			src = io.TeeReader(rc, dg)
			if wsum != nil {
				src, sum = rc, wsum
			}
		}
		if err != nil {
			return 0, err
		}
		n, err := sw.WriteTensor(wt.Name, src)
		total += n
		name := wt.Name
		finish := func() error {
			if cerr := rc.Close(); err == nil && rcopy != nil && cerr != nil {
				err = cerr // reading the output back failed
			}
			if err != nil {
				if d := damagedInput(err); d != nil {
					return d
				}
				return writeErr(tmp.final, err)
			}
			v, err := sum()
			if err != nil {
				return &TensorError{Name: name, Err: err}
			}
			if err := cr.verify(v); err != nil {
				return err
			}
			digests[name] = v.String()
			return nil
		}
		if perr := collect(); perr != nil {
			rc.Close()
			return 0, perr
		}
		if rcopy != nil && err == nil {
			pending = finish
			continue
		}
		if err := finish(); err != nil {
			return 0, err
		}
	}
	if err := collect(); err != nil {
		return 0, err
	}
	if err := sw.Close(); err != nil {
		return 0, writeErr(tmp.final, err)
	}
	if err := bw.Flush(); err != nil {
		return 0, writeErr(tmp.final, err)
	}
	if err := setDigests(); err != nil {
		return 0, err
	}
	hdr, _, err := safetensors.HeaderBytes(decl, md, hopts...)
	if err != nil {
		return 0, writeErr(tmp.final, err)
	}
	if _, err := tmp.writeAt(hdr, 0); err != nil {
		return 0, writeErr(tmp.final, err)
	}
	return total, nil
}

// safetensorsDecl returns the declarations of a safetensors file holding
// items, the items by name, placeholder digests (as long as the real
// ones) and the metadata.
func safetensorsDecl(items []*item, meta map[string]string) ([]safetensors.WriterTensor, map[string]*item, map[string]string, map[string]string) {
	byName := make(map[string]*item, len(items))
	decl := make([]safetensors.WriterTensor, len(items))
	digests := make(map[string]string, len(items))
	for i, it := range items {
		code, _ := it.dtype.Safetensors()
		shape, _ := dtype.SafetensorsShape(it.dtype, it.src.Shape) // checked by unsupported
		decl[i] = safetensors.WriterTensor{Name: it.name, DType: code, Shape: shape}
		byName[it.name] = it
		digests[it.name] = digest.Value(0).String() // same length as the real one
	}
	md := make(map[string]string, len(meta)+1)
	for k, v := range meta {
		md[k] = v
	}
	return decl, byName, digests, md
}

// safetensorsHeadLen returns the length of the header writeSafetensors
// writes, and later rewrites with the digests, for items.
func safetensorsHeadLen(items []*item, meta map[string]string) (int64, error) {
	decl, _, digests, md := safetensorsDecl(items, meta)
	b, err := json.Marshal(digests)
	if err != nil {
		return 0, err
	}
	md[digest.MetadataKey] = string(b)
	hdr, _, err := safetensors.HeaderBytes(decl, md, headerOpts(dataLen(items))...)
	return int64(len(hdr)), err
}

// pthStorage is one storage of a .pth output.
type pthStorage struct {
	key   string
	src   *statedict.Storage
	dtype dtype.DType
}

func (s *pthStorage) nbytes() int64 {
	return s.src.NBytes / int64(s.src.DType.Size()) * int64(s.dtype.Size())
}

// storageReader returns a storage's bytes as they go to a .pth file:
// little-endian, cast when asked; the checkedReader verifies the input's
// CRC32 once they are read.
func (c *config) storageReader(ctx context.Context, s *pthStorage) (io.ReadCloser, *checkedReader, error) {
	if t := c.transformed[s.src]; t != nil {
		if t.NumEl()*int64(s.dtype.Size()) != s.nbytes() {
			return nil, nil, &TensorError{Name: t.Name, Err: fmt.Errorf("%w: its storage is not its values (a packed or quantized record); write safetensors", ErrOption)}
		}
		return c.transformedReader(ctx, t, s.dtype)
	}
	rc, cr, err := c.checks.storageReader(ctx, s.src)
	if err != nil {
		return nil, nil, err
	}
	var r io.Reader = io.TeeReader(ctxReader{ctx, rc}, progressWriter{io.Discard, c.progress})
	if s.dtype != s.src.DType {
		r = newCastReader(r, s.src.DType, s.dtype)
	}
	return struct {
		io.Reader
		io.Closer
	}{r, rc}, cr, nil
}

// location returns the tag written for a storage.
func (c *config) location(s *statedict.Storage) (string, error) {
	if !c.hasRules {
		if s.Location == "" {
			return "cpu", nil
		}
		return s.Location, nil
	}
	d, err := c.rules.Target(s.Location)
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// writePth writes one .pth zip to w: the object tree tr, or when it is
// nil a flat state dict of items and values.
func (c *config) writePth(ctx context.Context, w io.Writer, items []*item, values []value, tr *tree) (int64, error) {
	var pkl []byte
	var storages []*pthStorage
	var err error
	if tr != nil {
		pkl, err = torchzip.EncodeTree(tr.root)
		storages = tr.storages
	} else {
		pkl, storages, err = c.flatPickle(items, values)
	}
	if err != nil {
		return 0, err
	}
	zw := torchzip.NewWriter(w, torchzip.WithBufferSize(c.bufSize))
	if err := zw.WriteRecord("data.pkl", int64(len(pkl)), bytes.NewReader(pkl)); err != nil {
		return 0, err
	}
	var total int64
	defer c.aheadOrder(storageSources(c, storages))()
	for _, s := range storages {
		rc, cr, err := c.storageReader(ctx, s)
		if err != nil {
			return 0, err
		}
		err = zw.WriteRecord("data/"+s.key, s.nbytes(), rc)
		rc.Close()
		if err != nil {
			if d := damagedInput(err); d != nil {
				return 0, d
			}
			return 0, err
		}
		if err := cr.verify(0); err != nil {
			return 0, err
		}
		total += s.nbytes()
	}
	return total, zw.Close()
}

// flatPickle returns the data.pkl of a flat state dict holding items and
// values, and the storages it references.
func (c *config) flatPickle(items []*item, values []value) ([]byte, []*pthStorage, error) {
	var storages []*pthStorage
	refs := map[*statedict.Storage]*torchzip.StorageRef{}
	var entries []torchzip.Entry
	for _, it := range items {
		t := it.src
		ref, ok := refs[t.Storage]
		if !ok {
			loc, err := c.location(t.Storage)
			if err != nil {
				return nil, nil, &TensorError{Name: t.Name, Err: err}
			}
			ps := &pthStorage{key: fmt.Sprint(len(storages)), src: t.Storage, dtype: t.Storage.DType}
			if it.dtype != t.DType {
				ps.dtype = it.dtype
			}
			storages = append(storages, ps)
			ref = &torchzip.StorageRef{Key: ps.key, DType: ps.dtype, Location: loc, NumEl: t.Storage.NBytes / int64(t.Storage.DType.Size())}
			refs[t.Storage] = ref
		}
		entries = append(entries, torchzip.Entry{Name: it.name, Tensor: &torchzip.TensorRef{
			Storage: ref, Offset: t.Offset, Shape: t.Shape, Strides: t.Strides,
			RequiresGrad: t.RequiresGrad, Parameter: t.Parameter}})
	}
	for _, v := range values {
		entries = append(entries, torchzip.Entry{Name: v.name, Value: v.v})
	}
	pkl, err := torchzip.EncodeStateDict(entries)
	return pkl, storages, err
}

// metadata returns the safetensors __metadata__ shared by every shard.
func (p *plan) metadata() (map[string]string, error) {
	md := map[string]string{"format": "pt"}
	for alias, kept := range p.aliases {
		md[alias] = kept
	}
	if len(p.values) > 0 {
		obj := make(map[string]any, len(p.values))
		for _, v := range p.values {
			obj[v.name] = v.v
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		md[ObjectsKey] = string(b)
	}
	return md, nil
}

// compressFile writes the zstd compression of src to w.
func compressFile(ctx context.Context, w io.Writer, src *os.File) error {
	if _, err := src.Seek(0, io.SeekStart); err != nil {
		return err
	}
	enc, err := newZstd(w)
	if err != nil {
		return err
	}
	if _, err := io.Copy(enc, ctxReader{ctx, src}); err != nil {
		enc.Close()
		return err
	}
	return enc.Close()
}

// sortedNames returns the keys of m sorted.
func sortedNames(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// newZstd returns a zstd encoder at the default level.
func newZstd(w io.Writer) (*zstd.Encoder, error) { return zstd.NewWriter(w) }
