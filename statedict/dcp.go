package statedict

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/pickle"
)

// The adapter of package dcp's Reader: a torch.distributed.checkpoint
// directory as a Checkpoint of global tensors, each assembled lazily from
// its chunks. The format (.metadata, tiling, where each item's bytes lie)
// is dcp's; decoding each item (a torch.save zip, or a safetensors blob)
// into tensor pieces, and reading them, is this package's.

// FormatDCP is a torch.distributed.checkpoint directory: a .metadata pickle
// and one or more .distcp files written by FileSystemWriter.
const FormatDCP Format = "dcp"

// ErrChunkCRC reports a DCP chunk whose bytes disagree with the CRC32 its
// torch.save zip recorded: the file was damaged after it was written.
// Reading a whole tensor checks every chunk; slices cannot.
var ErrChunkCRC = errors.New("statedict: chunk bytes disagree with their CRC32")

// Chunk is one piece of a tensor of a DCP checkpoint: the box
// [Offsets, Offsets+Sizes) of the global tensor, saved as a torch.save
// file (or a safetensors tensor) at bytes [Begin, Begin+Length) of File.
type Chunk struct {
	Offsets []int64
	Sizes   []int64
	File    string // file name, relative to the checkpoint directory
	Rank    int    // the rank that wrote File (dcp.RankOf, dcp.ShardFileRank), -1 when the name does not say
	Begin   int64
	Length  int64
}

// Chunks returns the chunks a DCP tensor is assembled from (replicated
// duplicates removed), nil for a tensor of any other format.
func (t *Tensor) Chunks() []Chunk {
	if dt := t.dcpTensor(); dt != nil {
		return dt.chunks
	}
	return nil
}

// Problem returns why a DCP tensor cannot be read (a dcp.ErrTiling or
// ErrMissingRecord error: a gap, an overlap, a chunk outside the shape, a
// missing file), nil when it can or for other formats.
func (t *Tensor) Problem() error {
	if dt := t.dcpTensor(); dt != nil {
		return dt.problem
	}
	return nil
}

func (t *Tensor) dcpTensor() *dcpTensor {
	if t.Storage == nil {
		return nil
	}
	if g, ok := t.Storage.src.(*gatherSource); ok {
		return g.g.dcp
	}
	return nil
}

// VerifyChunks reads a DCP tensor whole, checking the CRC32 of every
// chunk whose torch.save zip recorded one for exactly its bytes, and
// returns how many it checked. A mismatch is an ErrChunkCRC error naming
// the file; for other tensors it reads nothing and returns 0, nil.
func (t *Tensor) VerifyChunks(ctx context.Context) (int, error) {
	if t.Chunks() == nil {
		return 0, nil
	}
	if err := t.Problem(); err != nil {
		return 0, &Error{File: t.Storage.File, Tensor: t.Name, Err: err}
	}
	src := t.Storage.src.(*gatherSource)
	rc, err := src.g.stream(src.lo, src.hi)
	if err != nil {
		return 0, &Error{File: t.Storage.File, Tensor: t.Name, Err: err}
	}
	defer rc.Close()
	buf := make([]byte, 1<<20)
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		_, err := rc.Read(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	n := 0
	for _, ps := range rc.(*boxStream).subs {
		if ps != nil && ps.checked {
			n++
		}
	}
	return n, nil
}

// dcpFS is the dcp.FS of the checkpoint directory dir: local, or in cfg.fs.
type dcpFS struct {
	dir string
	cfg *config
}

type sizedFile struct {
	dcpFile
	size int64
}

func (f sizedFile) Size() int64 { return f.size }

func (d dcpFS) Open(name string) (dcp.File, error) {
	f, size, err := d.cfg.openDCPFile(d.cfg.join(d.dir, name))
	if err != nil {
		return nil, err
	}
	return sizedFile{f, size}, nil
}

// checkList lists dir when it is in c.fs, so that a listing that fails
// (past a bound of the object store, or the server unreachable) ends the
// open with its error: the probes of openDir would each take it for an
// empty directory and ask again. An FS that cannot list
// (errors.ErrUnsupported) is probed file by file.
func (c *config) checkList(dir string) error {
	if c.fs == nil {
		return nil
	}
	if _, err := c.fs.ReadDir(dir); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	return nil
}

// isDCPDir reports whether dir holds a DCP checkpoint: a .metadata file,
// local or in c.fs. An FS that cannot list (a web server) is asked for
// the file itself.
func (c *config) isDCPDir(dir string) bool {
	if c.fs == nil {
		fi, err := os.Stat(filepath.Join(dir, dcp.MetadataFile))
		return err == nil && fi.Mode().IsRegular()
	}
	if names, err := c.fs.ReadDir(dir); err == nil {
		return slices.Contains(names, dcp.MetadataFile)
	}
	f, err := c.fs.OpenFile(c.join(dir, dcp.MetadataFile))
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// join returns the name of file name in directory dir: slash-separated
// in c.fs, a local path otherwise.
func (c *config) join(dir, name string) string {
	if c.fs != nil {
		return path.Join(dir, name)
	}
	return filepath.Join(dir, name)
}

// dcpDir returns the directory of a DCP .metadata file named p.
func (c *config) dcpDir(p string) string {
	if c.fs == nil {
		return filepath.Dir(p)
	}
	if d := path.Dir(p); d != "." {
		return d
	}
	return ""
}

// dcpOpenFile opens a local DCP data file; tests replace it to count
// bytes read.
var dcpOpenFile = func(path string) (dcpFile, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// openDCPFile opens a DCP data file of c.fs, or a local one through
// dcpOpenFile.
func (c *config) openDCPFile(name string) (dcpFile, int64, error) {
	if c.fs == nil {
		return dcpOpenFile(name)
	}
	f, err := c.fs.OpenFile(name)
	if err != nil {
		return nil, 0, err
	}
	return f, f.Size(), nil
}

// dcpFile is an open DCP data file.
type dcpFile interface {
	io.ReaderAt
	io.Closer
}

// openDCP reads the .metadata of the DCP checkpoint in dir (local, or in
// cfg.fs). Chunk files are opened now; each chunk's header is read on
// first use.
func openDCP(dir string, cfg *config) (*Checkpoint, error) {
	mpath := cfg.join(dir, dcp.MetadataFile)
	shown := cfg.display(mpath)
	mf, size, closer, err := cfg.open(mpath)
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	if size > cfg.maxPickle {
		return nil, &Error{File: shown, Err: fmt.Errorf("%w: metadata of %d bytes exceeds the limit of %d", ErrMalformed, size, cfg.maxPickle)}
	}
	raw := make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(mf, 0, size), raw); err != nil {
		return nil, &Error{File: shown, Err: fmt.Errorf("%w: %v", ErrTruncated, err)}
	}
	return openDCPMetadata(dir, raw, cfg)
}

// openDCPMetadata opens the DCP checkpoint in dir whose .metadata holds raw.
func openDCPMetadata(dir string, raw []byte, cfg *config) (*Checkpoint, error) {
	mpath := cfg.display(cfg.join(dir, dcp.MetadataFile))
	r, err := dcp.NewReader(dcpFS{dir, cfg}, raw, dcp.WithPickleLimits(cfg.limits))
	if err != nil {
		return nil, withFile(pickleError(dcp.MetadataFile, fromFormat(err)), mpath)
	}
	md := r.Metadata()
	ck := &Checkpoint{Format: FormatDCP, ByteOrder: "little", ShardFormat: FormatTorchZip}
	ck.closers = append(ck.closers, r)
	ok := false
	defer func() {
		if !ok {
			ck.Close()
		}
	}()
	shared := &dcpShared{r: r, dir: dir, cfg: cfg, ck: ck}
	leaves := map[string]any{}
	for i := range md.Entries {
		e := &md.Entries[i]
		if !e.Tensor {
			v, ok, err := ck.addDCPValue(dir, e, r, cfg)
			if err != nil {
				return nil, err
			}
			if ok {
				leaves[e.FQN] = v
			}
			continue
		}
		kept, problem := r.Chunks(e)
		var chunks []Chunk
		for _, c := range kept {
			chunks = append(chunks, toChunk(c, dcp.RankOf(c.File)))
		}
		leaf, err := ck.addDCPTensor(e.FQN, e.Size, &dcpTensor{dcpShared: shared, name: e.FQN, dtype: e.DType, chunks: chunks, problem: problem})
		if err != nil {
			return nil, &Error{File: mpath, Tensor: e.FQN, Err: err}
		}
		leaves[e.FQN] = leaf
	}
	ck.Shards = r.Files()
	ck.Root = md.Tree(leaves)
	ok = true
	return ck, nil
}

// toChunk is a chunk as Tensor.Chunks shows it.
func toChunk(c dcp.Chunk, rank int) Chunk {
	return Chunk{Offsets: c.Offsets, Sizes: c.Sizes, File: c.File, Rank: rank, Begin: c.Offset, Length: c.Length}
}

// addDCPTensor adds the global tensor dt assembles, of shape shape, and
// returns its leaf of the object tree.
func (ck *Checkpoint) addDCPTensor(name string, shape []int64, dt *dcpTensor) (any, error) {
	dt.problem = fromFormat(dt.problem)
	t := &Tensor{Name: name, DType: dt.dtype, Shape: shape, Strides: contiguousStrides(shape), Device: "cpu", Layout: Strided}
	n := t.NBytes()
	if n < 0 {
		return nil, fmt.Errorf("%w: shape %v", ErrOverflow, shape)
	}
	g := &gather{name: name, dtype: dt.dtype, shape: shape, dcp: dt, pieces: dt.open}
	t.Storage = &Storage{Key: name, Location: "cpu", DType: dt.dtype, NBytes: n,
		File: dt.cfg.display(dt.dir), src: &gatherSource{g: g, lo: make([]int64, len(shape)), hi: shape}}
	if dt.problem != nil {
		ck.Warnings = append(ck.Warnings, fmt.Sprintf("tensor %q: %s", name, strings.TrimPrefix(dt.problem.Error(), "statedict: ")))
	}
	ck.Tensors = append(ck.Tensors, t)
	ck.Storages = append(ck.Storages, t.Storage)
	leaf := &pickle.Tensor{DType: dt.dtype.String(), Shape: t.Shape, Stride: t.Strides, Layout: string(Strided),
		Storage: &pickle.StorageRef{Class: "UntypedStorage", Key: name, Location: "cpu", Numel: n, Ref: t.Storage}}
	return leaf, nil
}

// addDCPValue reads a non-tensor item: a torch.save of the object.
func (ck *Checkpoint) addDCPValue(dir string, e *dcp.Entry, r *dcp.Reader, cfg *config) (any, bool, error) {
	loc := e.Value
	where := &Error{File: cfg.display(cfg.join(dir, loc.File)), Record: fmt.Sprintf("bytes %d+%d", loc.Offset, loc.Length), Tensor: e.FQN}
	if loc.File == "" {
		where.File, where.Record = cfg.display(cfg.join(dir, dcp.MetadataFile)), ""
		where.Err = fmt.Errorf("%w: value has no storage entry", ErrMissingRecord)
		return nil, false, where
	}
	f, err := r.File(loc.File)
	switch {
	case err != nil:
		ck.Warnings = append(ck.Warnings, fmt.Sprintf("value %q left out: %s", e.FQN, strings.TrimPrefix(fromFormat(err).Error(), "statedict: ")))
		return nil, false, nil
	case loc.Offset < 0 || loc.Length <= 0 || loc.Offset > f.Size() || loc.Length > f.Size()-loc.Offset:
		ck.Warnings = append(ck.Warnings, fmt.Sprintf("value %q left out: its bytes %d+%d lie outside %s (%d bytes)", e.FQN, loc.Offset, loc.Length, loc.File, f.Size()))
		return nil, false, nil
	case loc.Length > cfg.maxPickle:
		where.Err = fmt.Errorf("%w: value of %d bytes exceeds the limit of %d", ErrMalformed, loc.Length, cfg.maxPickle)
		return nil, false, where
	}
	c := *cfg
	sub, err := readZip(io.NewSectionReader(f, loc.Offset, loc.Length), loc.Length, &c)
	if err != nil {
		where.Err = err
		return nil, false, where
	}
	rename := func(n string) string {
		if n == "" {
			return e.FQN
		}
		return e.FQN + "." + n
	}
	for _, ob := range sub.Objects {
		ob.Name = rename(ob.Name)
		ck.Objects = append(ck.Objects, ob)
	}
	for _, ob := range sub.Opaque {
		ob.Name = rename(ob.Name)
		ck.Opaque = append(ck.Opaque, ob)
	}
	for _, ob := range sub.Foreign {
		ob.Name = rename(ob.Name)
		ck.Foreign = append(ck.Foreign, ob)
	}
	for _, t := range sub.Tensors {
		t.Name = rename(t.Name)
		if t.Storage != nil {
			t.Storage.File = where.File
		}
		ck.Tensors = append(ck.Tensors, t)
	}
	ck.Storages = append(ck.Storages, sub.Storages...)
	ck.closers = append(ck.closers, sub)
	return sub.Root, true, nil
}

// dcpShared is what the tensors of one DCP checkpoint share.
type dcpShared struct {
	r   *dcp.Reader // nil for a safetensors DCP checkpoint
	dir string
	cfg *config
	ck  *Checkpoint

	mu sync.Mutex // guards ck.closers and st
	// st holds the safetensors blobs of .distcp files that
	// FileSystemWriter wrote with SerializationFormat.SAFETENSORS, by
	// file and the byte offset each starts at (dcp_hf.go).
	st map[dcp.Location]*stBlob
}

// dcpTensor is what a DCP tensor's storage needs to read its chunks.
type dcpTensor struct {
	*dcpShared
	name    string
	dtype   dtype.DType
	chunks  []Chunk
	problem error
	// pieceOf opens a chunk held as a tensor of a safetensors file
	// (dcp_hf.go); nil for the chunks of a .distcp file.
	pieceOf func(Chunk) (*piece, error)

	pmu    sync.Mutex
	pieces []*piece // by chunk, nil until its header is read
}

// open returns the pieces of the chunks that hold elements of the box
// [lo, hi), reading each one's header on first use: a slice of a rank's
// share touches only the chunks (and files) it needs.
func (dt *dcpTensor) open(lo, hi []int64) ([]*piece, error) {
	if dt.problem != nil {
		return nil, dt.problem
	}
	dt.pmu.Lock()
	defer dt.pmu.Unlock()
	if dt.pieces == nil {
		dt.pieces = make([]*piece, len(dt.chunks))
	}
	var ps []*piece
	for i, c := range dt.chunks {
		if !chunkMeets(c, lo, hi) {
			continue
		}
		if dt.pieces[i] == nil {
			p, err := dt.openChunk(c)
			if err != nil {
				return nil, err
			}
			dt.pieces[i] = p
		}
		ps = append(ps, dt.pieces[i])
	}
	return ps, nil
}

// chunkMeets reports whether chunk c holds an element of the box [lo, hi).
func chunkMeets(c Chunk, lo, hi []int64) bool {
	for d := range c.Offsets {
		if c.Offsets[d] >= hi[d] || lo[d] >= c.Offsets[d]+c.Sizes[d] {
			return false
		}
	}
	return true
}

// openChunk decodes chunk c: a tensor of a safetensors file, a
// safetensors blob in a .distcp file, or a torch.save zip of one tensor.
func (dt *dcpTensor) openChunk(c Chunk) (*piece, error) {
	fail := func(err error) error {
		return &contextError{fmt.Sprintf("chunk at %v in %s bytes %d+%d", c.Offsets, c.File, c.Begin, c.Length), err}
	}
	if dt.pieceOf != nil {
		p, err := dt.pieceOf(c)
		if err != nil {
			return nil, fail(err)
		}
		return p, nil
	}
	if p, isST, err := dt.safetensorsChunk(c); isST {
		if err != nil {
			return nil, fail(err)
		}
		return p, nil
	}
	item, err := dt.r.Item(dcp.Location{File: c.File, Offset: c.Begin, Length: c.Length})
	if err != nil {
		return nil, fail(fromFormat(err))
	}
	cfg := *dt.cfg
	sub, err := readZip(item, c.Length, &cfg)
	if err != nil {
		return nil, fail(err)
	}
	dt.mu.Lock()
	dt.ck.closers = append(dt.ck.closers, sub)
	dt.mu.Unlock()
	if len(sub.Tensors) != 1 {
		return nil, fail(fmt.Errorf("%w: it holds %d tensors, not 1", ErrMalformed, len(sub.Tensors)))
	}
	ct := sub.Tensors[0]
	if ct.DType != dt.dtype || !slices.Equal(ct.Shape, c.Sizes) {
		return nil, fail(fmt.Errorf("%w: it holds %s%v, the metadata says %s%v", ErrMalformed, ct.DType, ct.Shape, dt.dtype, c.Sizes))
	}
	p, err := chunkPiece(ct, c, dt.cfg.display(dt.cfg.join(dt.dir, c.File)))
	if err != nil {
		return nil, fail(err)
	}
	if st := ct.Storage; st.HasCRC && p.contig && p.swap == 0 && p.off == 0 && ct.NBytes() == st.NBytes {
		p.crc, p.hasCRC = st.CRC32, true
	}
	return p, nil
}

// chunkPiece is the piece of chunk c that tensor t holds, in file.
func chunkPiece(t *Tensor, c Chunk, file string) (*piece, error) {
	p, err := tensorPiece(t)
	if err != nil {
		return nil, err
	}
	p.lo = c.Offsets
	p.hi = make([]int64, len(c.Offsets))
	for d := range p.hi {
		p.hi[d] = c.Offsets[d] + c.Sizes[d]
	}
	p.file = file
	return p, nil
}

// contextError prefixes an error with where it happened, without the
// "statedict: " of the sentinel it wraps.
type contextError struct {
	where string
	err   error
}

func (e *contextError) Error() string {
	return e.where + ": " + strings.TrimPrefix(e.err.Error(), "statedict: ")
}

func (e *contextError) Unwrap() error { return e.err }
