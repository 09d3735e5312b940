package statedict

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/pickle"
)

// The adapter of package dcp: a torch.distributed.checkpoint directory as
// a Checkpoint of global tensors, each assembled lazily from its chunks.
// The format (.metadata, tiling, where each item's bytes lie, the
// safetensors layout's DCP_SHARDING_INFO) is dcp's; decoding each item
// (a torch.save zip, or a safetensors tensor) into tensor pieces, and
// reading them, is this package's. Two layouts open here: a dcp.Reader's
// (.metadata and .distcp files, openDCP), and torch >= 2.8's per-rank
// safetensors files whose DCP_SHARDING_INFO places their chunks
// (openHFDCP); .distcp files may hold a safetensors blob too
// (safetensorsChunk).

// FormatDCP is a torch.distributed.checkpoint directory: a .metadata pickle
// and one or more .distcp files written by FileSystemWriter.
const FormatDCP Format = "dcp"

// ErrChunkCRC reports a DCP chunk whose bytes disagree with the CRC32 its
// torch.save zip recorded: the file was damaged after it was written.
// Reading a whole tensor checks every chunk; slices cannot.
var ErrChunkCRC = errors.New("statedict: chunk bytes disagree with their CRC32")

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
	// file and the byte offset each starts at (safetensorsChunk).
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
	// (openHFDCP); nil for the chunks of a .distcp file.
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

// torch >= 2.8 safetensors-backed DCP (package dcp's read_sharding.go
// describes the layout): per-rank safetensors files whose
// dcp.ShardingInfoKey places their chunks, opened with this package's
// safetensors reader and assembled as a .distcp checkpoint's tensors are;
// and .distcp files holding a safetensors blob.

// hfDCPFiles returns the safetensors files of dir when at least one of
// them carries dcp.ShardingInfoKey and more than one file is there or the
// offsets place a chunk away from the origin: a safetensors DCP
// checkpoint. Files are sniffed by their header only.
func hfDCPFiles(dir string, cfg *config) []string {
	files := cfg.glob(dir, "*.safetensors")
	if len(files) == 0 || len(files) > dcp.MaxSafetensorsFiles {
		return nil
	}
	for _, f := range files {
		ra, size, closer, err := cfg.open(f)
		if err != nil {
			continue
		}
		md, err := safetensorsMetadata(ra, size, cfg)
		closer.Close()
		if err != nil {
			continue
		}
		if dcp.ShardedSafetensors(md, len(files)) {
			return files
		}
	}
	return nil
}

// hfChunkSource is one chunk of a safetensors DCP tensor: the safetensors
// tensor holding it.
type hfChunkSource struct {
	t    *Tensor
	file string // as errors show it
}

// openHFDCP opens the safetensors files of a torch >= 2.8 safetensors DCP
// checkpoint in dir as one checkpoint of global tensors (FormatDCP with
// ShardFormat FormatSafetensors), assembled lazily from their chunks as
// for a .distcp checkpoint. Files without dcp.ShardingInfoKey hold chunks
// at the origin, as torch's reader takes them.
func openHFDCP(dir string, files []string, cfg *config) (*Checkpoint, error) {
	ck := &Checkpoint{Format: FormatDCP, ByteOrder: "little", ShardFormat: FormatSafetensors}
	ok := false
	defer func() {
		if !ok {
			ck.Close()
		}
	}()
	type entry struct {
		dtype  dtype.DType
		ndim   int
		shape  []int64
		chunks []dcp.Chunk
		srcs   map[string]hfChunkSource // by chunk file
	}
	byName := map[string]*entry{}
	var order []string
	for _, p := range files {
		if err := cfg.canceled(); err != nil {
			return nil, err
		}
		c := *cfg
		c.shard = true
		sub, err := openFile(p, &c)
		if err != nil {
			return nil, err
		}
		ck.closers = append(ck.closers, sub)
		shown := cfg.display(p)
		if sub.Format != FormatSafetensors {
			return nil, &Error{File: shown, Err: fmt.Errorf("%w: a %s file among the safetensors of a DCP checkpoint", ErrMalformed, sub.Format)}
		}
		offs, has, err := dcp.SavedOffsets(sub.Metadata)
		if err != nil {
			return nil, &Error{File: shown, Record: "header", Err: fromFormat(err)}
		}
		rel := path.Base(filepath.ToSlash(p))
		ck.Shards = append(ck.Shards, rel)
		if sub.Metadata != nil {
			if ck.ShardMetadata == nil {
				ck.ShardMetadata = map[string]map[string]string{}
			}
			ck.ShardMetadata[shown] = sub.Metadata
		}
		for _, t := range sub.Tensors {
			o := make([]int64, len(t.Shape))
			if has {
				var listed bool
				if o, listed = offs[t.Name]; !listed {
					return nil, &Error{File: shown, Tensor: t.Name, Err: fmt.Errorf("%w: the tensor has no entry in %s", ErrMalformed, dcp.ShardingInfoKey)}
				}
			}
			if err := dcp.CheckSavedOffsets(o, t.Shape); err != nil {
				return nil, &Error{File: shown, Tensor: t.Name, Err: fromFormat(err)}
			}
			e := byName[t.Name]
			if e == nil {
				e = &entry{dtype: t.DType, ndim: len(t.Shape), shape: make([]int64, len(t.Shape)), srcs: map[string]hfChunkSource{}}
				byName[t.Name] = e
				order = append(order, t.Name)
			}
			if e.dtype != t.DType || e.ndim != len(t.Shape) {
				return nil, &Error{File: shown, Tensor: t.Name, Err: fmt.Errorf("%w: chunk is %s%v, another is %s with %d dimensions", ErrMalformed, t.DType, t.Shape, e.dtype, e.ndim)}
			}
			for d := range o {
				e.shape[d] = max(e.shape[d], o[d]+t.Shape[d])
			}
			var begin int64
			if ss, isSection := t.Storage.src.(*sectionSource); isSection {
				begin = ss.off
			}
			e.chunks = append(e.chunks, dcp.Chunk{Offsets: o, Sizes: t.Shape, Location: dcp.Location{File: rel, Offset: begin, Length: t.Storage.NBytes}})
			e.srcs[rel] = hfChunkSource{t: t, file: shown}
		}
		for _, w := range sub.Warnings {
			ck.Warnings = append(ck.Warnings, rel+": "+w)
		}
	}
	if len(order) == 0 {
		return nil, &Error{File: cfg.display(dir), Err: fmt.Errorf("%w: the safetensors files hold no tensor", ErrMalformed)}
	}
	sort.Strings(ck.Shards)
	shared := &dcpShared{dir: dir, cfg: cfg, ck: ck}
	root := &pickle.Dict{}
	for _, name := range order {
		e := byName[name]
		kept, problem := dcp.CheckTiling(&dcp.Entry{FQN: name, Tensor: true, DType: e.dtype, Size: e.shape, Chunks: e.chunks})
		var chunks []Chunk
		for _, c := range kept {
			chunks = append(chunks, toChunk(c, dcp.ShardFileRank(c.File)))
		}
		srcs := e.srcs
		leaf, err := ck.addDCPTensor(name, e.shape, &dcpTensor{dcpShared: shared, name: name, dtype: e.dtype, chunks: chunks, problem: problem,
			pieceOf: func(c Chunk) (*piece, error) { return hfPiece(srcs[c.File], c) }})
		if err != nil {
			return nil, &Error{File: cfg.display(dir), Tensor: name, Err: err}
		}
		root.Entries = append(root.Entries, pickle.DictEntry{Key: name, Value: leaf})
	}
	ck.Root = root
	ok = true
	return ck, nil
}

// hfPiece is the piece of chunk c held by safetensors tensor s.
func hfPiece(s hfChunkSource, c Chunk) (*piece, error) {
	if s.t == nil {
		return nil, fmt.Errorf("%w: chunk at %v in %s", ErrMissingRecord, c.Offsets, c.File)
	}
	return chunkPiece(s.t, c, s.file)
}

// safetensorsMetadata reads only the header metadata of a safetensors file
// (nil when the content is not safetensors).
func safetensorsMetadata(r io.ReaderAt, size int64, cfg *config) (map[string]string, error) {
	ck, err := readSafetensors(r, size, cfg)
	if err != nil {
		return nil, err
	}
	return ck.Metadata, nil
}

// stBlob is a safetensors file inside a .distcp file.
type stBlob struct {
	ck      *Checkpoint
	offsets map[string][]int64 // DCP_SHARDING_INFO; nil when absent
	err     error
}

// safetensorsChunk opens chunk c of a .distcp file that FileSystemWriter
// wrote with SerializationFormat.SAFETENSORS (torch >= 2.8): the file
// holds its byte items first, then one safetensors file of its tensor
// items, where each tensor item's storage offset points. isST is false
// (and nothing is read but 9 bytes) when the bytes at c.Begin do not start
// a safetensors header. The chunk is the blob's tensor named dt.name; its
// dtype, shape and DCP_SHARDING_INFO saved_offsets must agree with the
// .metadata.
func (dt *dcpTensor) safetensorsChunk(c Chunk) (p *piece, isST bool, err error) {
	f, err := dt.r.File(c.File)
	if err != nil || !dcp.SafetensorsAt(f, f.Size(), c.Begin) {
		return nil, false, nil
	}
	size := f.Size()
	at := dcp.Location{File: c.File, Offset: c.Begin}
	dt.mu.Lock()
	b := dt.st[at]
	if b == nil {
		b = &stBlob{}
		cfg := *dt.cfg
		b.ck, b.err = readSafetensors(io.NewSectionReader(f, c.Begin, size-c.Begin), size-c.Begin, &cfg)
		if b.err == nil {
			b.offsets, _, b.err = dcp.SavedOffsets(b.ck.Metadata)
			b.err = fromFormat(b.err)
		}
		if dt.st == nil {
			dt.st = map[dcp.Location]*stBlob{}
		}
		dt.st[at] = b
	}
	dt.mu.Unlock()
	if b.err != nil {
		return nil, true, b.err
	}
	var t *Tensor
	for _, x := range b.ck.Tensors {
		if x.Name == dt.name {
			t = x
			break
		}
	}
	switch {
	case t == nil:
		return nil, true, fmt.Errorf("%w: the safetensors data has no tensor %q", ErrMissingRecord, dt.name)
	case t.DType != dt.dtype || !slices.Equal(t.Shape, c.Sizes):
		return nil, true, fmt.Errorf("%w: it holds %s%v, the metadata says %s%v", ErrMalformed, t.DType, t.Shape, dt.dtype, c.Sizes)
	case b.offsets != nil && !slices.Equal(b.offsets[dt.name], c.Offsets):
		return nil, true, fmt.Errorf("%w: its saved_offsets are %v, the metadata says %v", ErrMalformed, b.offsets[dt.name], c.Offsets)
	}
	p, err = hfPiece(hfChunkSource{t: t, file: dt.cfg.display(dt.cfg.join(dt.dir, c.File))}, c)
	return p, true, err
}
