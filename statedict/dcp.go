package statedict

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/ckpt-dev/ckpt/pickle"
)

// FormatDCP is a torch.distributed.checkpoint directory: a .metadata pickle
// and one or more .distcp files written by FileSystemWriter.
const FormatDCP Format = "dcp"

// DCPMetadata is the name of the metadata file of a DCP directory.
const DCPMetadata = ".metadata"

// ErrTiling reports DCP chunks that do not tile their tensor exactly: a gap,
// an overlap, a chunk outside the shape, or a chunk whose bytes are missing.
// Open still succeeds (inspect shows the problem); reading the tensor fails.
var ErrTiling = errors.New("statedict: chunks do not tile the tensor")

// ErrChunkCRC reports a DCP chunk whose bytes disagree with the CRC32 its
// torch.save zip recorded: the file was damaged after it was written.
// Reading a whole tensor checks every chunk; slices cannot.
var ErrChunkCRC = errors.New("statedict: chunk bytes disagree with their CRC32")

// Chunk is one piece of a tensor of a DCP checkpoint: the box
// [Offsets, Offsets+Sizes) of the global tensor, saved as a torch.save
// file at bytes [Begin, Begin+Length) of File.
type Chunk struct {
	Offsets []int64
	Sizes   []int64
	File    string // .distcp file name, relative to the checkpoint directory
	Rank    int    // the rank that wrote File (__R_N.distcp), -1 when the name does not say
	Begin   int64
	Length  int64
}

// Chunks returns the chunks a DCP tensor is assembled from (replicated
// duplicates removed), nil for a tensor of any other format.
func (t *Tensor) Chunks() []Chunk {
	if t.Storage == nil {
		return nil
	}
	if g, ok := t.Storage.src.(*gatherSource); ok && g.g.dcp != nil {
		return g.g.dcp.chunks
	}
	return nil
}

// Problem returns why a DCP tensor cannot be read (an ErrTiling or
// ErrMissingRecord error: a gap, an overlap, a chunk outside the shape, a
// missing file), nil when it can or for other formats.
func (t *Tensor) Problem() error {
	if t.Storage == nil {
		return nil
	}
	if g, ok := t.Storage.src.(*gatherSource); ok && g.g.dcp != nil {
		return g.g.dcp.problem
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

// isDCPDir reports whether dir holds a DCP checkpoint: a .metadata file,
// local or in c.fs. An FS that cannot list (a web server) is asked for
// the file itself.
func (c *config) isDCPDir(dir string) bool {
	if c.fs == nil {
		fi, err := os.Stat(filepath.Join(dir, DCPMetadata))
		return err == nil && fi.Mode().IsRegular()
	}
	if names, err := c.fs.ReadDir(dir); err == nil {
		return slices.Contains(names, DCPMetadata)
	}
	f, err := c.fs.OpenFile(c.join(dir, DCPMetadata))
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

// dcpOpenFile opens a .distcp file; tests replace it to count bytes read.
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

// openDCPFile opens a .distcp file of c.fs, or a local one through
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

// dcpFile is an open .distcp file.
type dcpFile interface {
	io.ReaderAt
	io.Closer
}

var rankFile = regexp.MustCompile(`^__(\d+)_\d+\.distcp$`)

// dcpTensor is what a DCP tensor's storage needs to read its chunks.
type dcpTensor struct {
	dir     string
	name    string
	dtype   DType
	chunks  []Chunk
	problem error
	files   map[string]*dcpOpened
	cfg     *config
	ck      *Checkpoint
	mu      *sync.Mutex // guards ck.closers

	pmu    sync.Mutex
	pieces []*piece // by chunk, nil until its header is read
}

type dcpOpened struct {
	f    dcpFile
	size int64
	err  error
}

// openDCP reads the .metadata of the DCP checkpoint in dir (local, or in
// cfg.fs). Chunk files are opened now; each chunk's torch.save header is
// read on first use.
func openDCP(dir string, cfg *config) (*Checkpoint, error) {
	mpath := cfg.join(dir, DCPMetadata)
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
	mpath := cfg.display(cfg.join(dir, DCPMetadata))
	md, err := ParseDCPMetadata(raw, WithPickleLimits(cfg.limits))
	if err != nil {
		return nil, withFile(err, mpath)
	}
	ck := &Checkpoint{Format: FormatDCP, ByteOrder: "little", ShardFormat: FormatTorchZip}
	ok := false
	defer func() {
		if !ok {
			ck.Close()
		}
	}()
	files := map[string]*dcpOpened{}
	openRel := func(rel string) *dcpOpened {
		if o, done := files[rel]; done {
			return o
		}
		o := &dcpOpened{}
		files[rel] = o
		if rel == "" || rel == "." || rel == ".." || strings.ContainsAny(rel, `/\`) || filepath.IsAbs(rel) {
			o.err = fmt.Errorf("%w: file name %q must be a plain name inside the checkpoint directory", ErrMalformed, rel)
			return o
		}
		f, size, err := cfg.openDCPFile(cfg.join(dir, rel))
		if err != nil {
			o.err = fmt.Errorf("%w: file %s: %v", ErrMissingRecord, rel, errors.Unwrap(err))
			if errors.Unwrap(err) == nil {
				o.err = fmt.Errorf("%w: file %s: %v", ErrMissingRecord, rel, err)
			}
			return o
		}
		o.f, o.size = f, size
		ck.closers = append(ck.closers, f)
		ck.Shards = append(ck.Shards, rel)
		return o
	}
	mu := &sync.Mutex{}
	leaves := map[string]any{}
	for _, it := range md.Items {
		if !it.IsTensor {
			o := openRel(it.File)
			v, ok, err := ck.addDCPValue(dir, it, o, cfg)
			if err != nil {
				return nil, err
			}
			if ok {
				leaves[it.Name] = v
			}
			continue
		}
		t := &Tensor{Name: it.Name, DType: it.DType, Shape: it.Shape, Strides: contiguousStrides(it.Shape),
			Device: "cpu", Layout: Strided}
		dt := &dcpTensor{dir: dir, name: it.Name, dtype: it.DType, cfg: cfg, ck: ck, files: files, mu: mu}
		dt.chunks, dt.problem = checkTiling(it, t)
		for _, c := range dt.chunks {
			if dt.problem != nil {
				break
			}
			if c.File == "" {
				continue // an empty chunk needs no bytes
			}
			o := openRel(c.File)
			switch {
			case o.err != nil:
				dt.problem = o.err
			case c.Begin < 0 || c.Length < 0 || c.Begin > o.size || c.Length > o.size-c.Begin:
				dt.problem = fmt.Errorf("%w: chunk bytes %d+%d lie outside %s (%d bytes)", ErrTruncated, c.Begin, c.Length, c.File, o.size)
			}
		}
		n := t.NBytes()
		if n < 0 {
			return nil, &Error{File: mpath, Tensor: it.Name, Err: fmt.Errorf("%w: shape %v", ErrOverflow, it.Shape)}
		}
		g := &gather{name: it.Name, dtype: it.DType, shape: it.Shape, dcp: dt, pieces: dt.open}
		t.Storage = &Storage{Key: it.Name, Location: "cpu", DType: it.DType, NBytes: n,
			File: cfg.display(dir), src: &gatherSource{g: g, lo: make([]int64, len(it.Shape)), hi: it.Shape}}
		if dt.problem != nil {
			ck.Warnings = append(ck.Warnings, fmt.Sprintf("tensor %q: %s", it.Name, strings.TrimPrefix(dt.problem.Error(), "statedict: ")))
		}
		ck.Tensors = append(ck.Tensors, t)
		ck.Storages = append(ck.Storages, t.Storage)
		leaves[it.Name] = &pickle.Tensor{DType: it.DType.String(), Shape: t.Shape, Stride: t.Strides, Layout: string(Strided),
			Storage: &pickle.StorageRef{Class: "UntypedStorage", Key: it.Name, Location: "cpu", Numel: n, Ref: t.Storage}}
	}
	sort.Strings(ck.Shards)
	ck.Root = dcpTree(md, leaves)
	ok = true
	return ck, nil
}

// addDCPValue reads a non-tensor item: a torch.save of the object.
func (ck *Checkpoint) addDCPValue(dir string, it DCPItem, o *dcpOpened, cfg *config) (any, bool, error) {
	where := &Error{File: cfg.display(cfg.join(dir, it.File)), Record: fmt.Sprintf("bytes %d+%d", it.Begin, it.Length), Tensor: it.Name}
	switch {
	case it.File == "":
		where.File, where.Record = cfg.display(cfg.join(dir, DCPMetadata)), ""
		where.Err = fmt.Errorf("%w: value has no storage entry", ErrMissingRecord)
		return nil, false, where
	case o.err != nil:
		ck.Warnings = append(ck.Warnings, fmt.Sprintf("value %q left out: %s", it.Name, strings.TrimPrefix(o.err.Error(), "statedict: ")))
		return nil, false, nil
	case it.Begin < 0 || it.Length <= 0 || it.Begin > o.size || it.Length > o.size-it.Begin:
		ck.Warnings = append(ck.Warnings, fmt.Sprintf("value %q left out: its bytes %d+%d lie outside %s (%d bytes)", it.Name, it.Begin, it.Length, it.File, o.size))
		return nil, false, nil
	case it.Length > cfg.maxPickle:
		where.Err = fmt.Errorf("%w: value of %d bytes exceeds the limit of %d", ErrMalformed, it.Length, cfg.maxPickle)
		return nil, false, where
	}
	c := *cfg
	sub, err := readZip(io.NewSectionReader(o.f, it.Begin, it.Length), it.Length, &c)
	if err != nil {
		where.Err = err
		return nil, false, where
	}
	rename := func(n string) string {
		if n == "" {
			return it.Name
		}
		return it.Name + "." + n
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

// maxPairwise bounds the chunks of one tensor checked pairwise for
// overlaps; chunks that split a single dimension are checked in
// O(n log n) whatever their number.
const maxPairwise = 4096

// checkTiling validates an item's chunks against its shape: every chunk
// inside the shape, identical (replicated) chunks once, no overlap, no gap.
func checkTiling(it DCPItem, t *Tensor) ([]Chunk, error) {
	nd := len(it.Shape)
	total := t.NumEl()
	if total < 0 {
		return nil, fmt.Errorf("%w: shape %v", ErrOverflow, it.Shape)
	}
	var kept []Chunk
	var vol int64
	seen := map[string]bool{}
	for _, c := range it.Chunks {
		if len(c.Offsets) != nd || len(c.Sizes) != nd {
			return nil, fmt.Errorf("%w: chunk at %v has %d dimensions, the tensor %d", ErrTiling, c.Offsets, len(c.Sizes), nd)
		}
		v := int64(1)
		for d := range nd {
			o, s := c.Offsets[d], c.Sizes[d]
			if o < 0 || s < 0 || o > it.Shape[d] || s > it.Shape[d]-o {
				return nil, fmt.Errorf("%w: chunk at %v of size %v reaches outside the shape %v", ErrTiling, c.Offsets, c.Sizes, it.Shape)
			}
			v *= s
		}
		if v == 0 {
			continue
		}
		key := fmt.Sprint(c.Offsets, c.Sizes)
		if seen[key] {
			continue // a replicated copy
		}
		seen[key] = true
		if c.File == "" {
			return nil, fmt.Errorf("%w: chunk at %v has no storage entry", ErrMissingRecord, c.Offsets)
		}
		kept = append(kept, c)
		vol += v
		if vol > total {
			break // overlaps; found below
		}
	}
	if err := checkOverlaps(kept, it.Shape); err != nil {
		return nil, err
	}
	if vol != total {
		return kept, fmt.Errorf("%w: chunks cover %d of %d elements (a gap)", ErrTiling, vol, total)
	}
	return kept, nil
}

// checkOverlaps reports two chunks that overlap.
func checkOverlaps(cs []Chunk, shape []int64) error {
	fail := func(a, b Chunk) error {
		return fmt.Errorf("%w: chunks at %v (size %v) and %v (size %v) overlap", ErrTiling, a.Offsets, a.Sizes, b.Offsets, b.Sizes)
	}
	// Chunks that all span every dimension but one, dim, are intervals on it.
	dim := -1
	single := true
	for _, c := range cs {
		for d := range shape {
			if c.Offsets[d] == 0 && c.Sizes[d] == shape[d] {
				continue
			}
			if dim >= 0 && dim != d {
				single = false
			}
			dim = d
		}
	}
	if single {
		if dim < 0 {
			if len(cs) > 1 {
				return fail(cs[0], cs[1])
			}
			return nil
		}
		s := slices.Clone(cs)
		sort.Slice(s, func(i, j int) bool { return s[i].Offsets[dim] < s[j].Offsets[dim] })
		for i := 1; i < len(s); i++ {
			if s[i].Offsets[dim] < s[i-1].Offsets[dim]+s[i-1].Sizes[dim] {
				return fail(s[i-1], s[i])
			}
		}
		return nil
	}
	if len(cs) > maxPairwise {
		return fmt.Errorf("%w: %d chunks split on several dimensions (at most %d are checked)", ErrUnsupported, len(cs), maxPairwise)
	}
	for i := range cs {
		for j := range i {
			if overlap(cs[j], cs[i]) {
				return fail(cs[j], cs[i])
			}
		}
	}
	return nil
}

func overlap(a, b Chunk) bool {
	for d := range a.Offsets {
		if a.Offsets[d]+a.Sizes[d] <= b.Offsets[d] || b.Offsets[d]+b.Sizes[d] <= a.Offsets[d] {
			return false
		}
	}
	return true
}

// open returns the pieces of the chunks that hold elements of the box
// [lo, hi), reading each one's torch.save header on first use: a slice
// of a rank's share touches only the chunks (and files) it needs.
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

func (dt *dcpTensor) openChunk(c Chunk) (*piece, error) {
	o := dt.files[c.File]
	fail := func(err error) error {
		return &contextError{fmt.Sprintf("chunk at %v in %s bytes %d+%d", c.Offsets, c.File, c.Begin, c.Length), err}
	}
	cfg := *dt.cfg
	sub, err := readZip(io.NewSectionReader(o.f, c.Begin, c.Length), c.Length, &cfg)
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
	p, err := tensorPiece(ct)
	if err != nil {
		return nil, fail(err)
	}
	p.lo = c.Offsets
	p.hi = make([]int64, len(c.Offsets))
	for d := range p.hi {
		p.hi[d] = c.Offsets[d] + c.Sizes[d]
	}
	p.file = dt.cfg.display(dt.cfg.join(dt.dir, c.File))
	if st := ct.Storage; st.HasCRC && p.contig && p.swap == 0 && p.off == 0 && ct.NBytes() == st.NBytes {
		p.crc, p.hasCRC = st.CRC32, true
	}
	return p, nil
}

// DCPItem is one entry of a DCP checkpoint's metadata, joined with its
// storage entries.
type DCPItem struct {
	Name     string
	IsTensor bool
	DType    DType   // tensors
	Shape    []int64 // tensors: the global shape
	Chunks   []Chunk // tensors, as listed
	// Non-tensor values: where their torch.save lies.
	File          string
	Begin, Length int64
}

// DCPMeta is a parsed .metadata file.
type DCPMeta struct {
	Items []DCPItem
	// Paths is the planner_data of the default planner: for each flattened
	// name, the keys of its place in the saved state dict (strings for
	// dict keys, int64 for list indices). nil when the metadata has none.
	Paths map[string][]any
}

// ParseDCPMetadata parses the .metadata pickle of a DCP checkpoint (only
// WithPickleLimits among the options applies). Nothing in it is executed.
func ParseDCPMetadata(data []byte, opts ...Option) (*DCPMeta, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	v, err := pickle.Unpickle(data, pickle.WithLimits(cfg.limits),
		pickle.WithPersistentLoad(func(any) (any, error) {
			return nil, fmt.Errorf("%w: a persistent id in DCP metadata", ErrMalformed)
		}))
	if err != nil {
		return nil, pickleError(DCPMetadata, err)
	}
	bad := func(format string, args ...any) error {
		return &Error{Record: DCPMetadata, Err: fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)}
	}
	root, ok := v.(*pickle.Object)
	if !ok || root.Name != "Metadata" {
		return nil, bad("not a torch.distributed.checkpoint Metadata (a %s)", TypeName(v))
	}
	st := objState(root)
	sdm, ok := field(st, "state_dict_metadata").(*pickle.Dict)
	if !ok {
		return nil, bad("Metadata has no state_dict_metadata dict")
	}
	type key struct{ fqn, off string }
	storage := map[key]pickle.DictEntry{}
	if sd, ok := field(st, "storage_data").(*pickle.Dict); ok {
		for _, e := range sd.Entries {
			idx, ok := e.Key.(*pickle.Object)
			if !ok || idx.Name != "MetadataIndex" {
				return nil, bad("storage_data key is a %s, not a MetadataIndex", TypeName(e.Key))
			}
			is := objState(idx)
			fqn, ok := field(is, "fqn").(string)
			if !ok {
				return nil, bad("MetadataIndex without fqn")
			}
			off := ""
			if o := field(is, "offset"); o != nil {
				d, err := ints(o)
				if err != nil {
					return nil, bad("storage_data[%q].offset: %v", fqn, err)
				}
				off = fmt.Sprint(d)
			}
			storage[key{fqn, off}] = e
		}
	} else if field(st, "storage_data") != nil {
		return nil, bad("storage_data is a %s, not a dict", TypeName(field(st, "storage_data")))
	}
	where := func(fqn, off string) (file string, begin, length int64, err error) {
		e, ok := storage[key{fqn, off}]
		if !ok {
			return "", 0, 0, nil
		}
		info, ok := e.Value.(*pickle.Object)
		if !ok || info.Name != "_StorageInfo" {
			return "", 0, 0, bad("storage_data[%q] is a %s, not a _StorageInfo", fqn, TypeName(e.Value))
		}
		is := objState(info)
		file, _ = field(is, "relative_path").(string)
		b, ok1 := field(is, "offset").(int64)
		l, ok2 := field(is, "length").(int64)
		if file == "" || !ok1 || !ok2 {
			return "", 0, 0, bad("storage_data[%q] lacks relative_path, offset or length", fqn)
		}
		return file, b, l, nil
	}
	md := &DCPMeta{}
	for _, e := range sdm.Entries {
		name, ok := e.Key.(string)
		if !ok {
			return nil, bad("state_dict_metadata key is a %s, not a str", TypeName(e.Key))
		}
		o, ok := e.Value.(*pickle.Object)
		if !ok {
			return nil, bad("state_dict_metadata[%q] is a %s", name, TypeName(e.Value))
		}
		it := DCPItem{Name: name}
		switch o.Name {
		case "BytesStorageMetadata":
			var err error
			if it.File, it.Begin, it.Length, err = where(name, ""); err != nil {
				return nil, err
			}
		case "TensorStorageMetadata":
			it.IsTensor = true
			ts := objState(o)
			props, ok := field(ts, "properties").(*pickle.Object)
			if !ok {
				return nil, bad("tensor %q has no TensorProperties", name)
			}
			g, ok := propDType(props)
			if !ok {
				return nil, bad("tensor %q: unknown dtype in %s", name, TypeName(field(objState(props), "dtype")))
			}
			it.DType = g
			shape, err := ints(field(ts, "size"))
			if err != nil {
				return nil, bad("tensor %q: size: %v", name, err)
			}
			it.Shape = shape
			chunks, ok := field(ts, "chunks").(*pickle.List)
			if !ok {
				return nil, bad("tensor %q has no chunk list", name)
			}
			for i, cv := range *chunks {
				co, ok := cv.(*pickle.Object)
				if !ok || co.Name != "ChunkStorageMetadata" {
					return nil, bad("tensor %q chunk %d is a %s", name, i, TypeName(cv))
				}
				cs := objState(co)
				offs, err1 := ints(field(cs, "offsets"))
				sizes, err2 := ints(field(cs, "sizes"))
				if err1 != nil || err2 != nil {
					return nil, bad("tensor %q chunk %d: offsets or sizes are not integers", name, i)
				}
				c := Chunk{Offsets: offs, Sizes: sizes, Rank: -1}
				if c.File, c.Begin, c.Length, err = where(name, fmt.Sprint(offs)); err != nil {
					return nil, err
				}
				if m := rankFile.FindStringSubmatch(c.File); m != nil {
					if r, err := strconv.Atoi(m[1]); err == nil {
						c.Rank = r
					}
				}
				it.Chunks = append(it.Chunks, c)
			}
		default:
			return nil, bad("state_dict_metadata[%q] is a %s", name, o.Module+"."+o.Name)
		}
		md.Items = append(md.Items, it)
	}
	md.Paths = plannerPaths(field(st, "planner_data"))
	return md, nil
}

// objState is the BUILD state of a dataclass instance: its __dict__.
func objState(o *pickle.Object) any { return o.State }

// field returns a dataclass field from a state dict (nil when absent).
func field(state any, name string) any {
	d, ok := state.(*pickle.Dict)
	if !ok {
		return nil
	}
	v, _ := d.Get(name)
	return v
}

// ints reads a torch.Size (or a tuple or list) of non-negative-or-not ints.
func ints(v any) ([]int64, error) {
	var items []any
	switch x := v.(type) {
	case *pickle.Tuple:
		items = *x
	case *pickle.List:
		items = *x
	default:
		return nil, fmt.Errorf("a %s, not a torch.Size", TypeName(v))
	}
	out := make([]int64, len(items))
	for i, e := range items {
		n, ok := e.(int64)
		if !ok {
			return nil, fmt.Errorf("item %d is a %s, not an int", i, TypeName(e))
		}
		out[i] = n
	}
	return out, nil
}

// propDType reads TensorProperties' dtype: its state is the tuple
// (dtype, layout, requires_grad, memory_format, pin_memory), or a dict in
// torch versions without __getstate__.
func propDType(p *pickle.Object) (DType, bool) {
	var g any
	switch s := p.State.(type) {
	case *pickle.Tuple:
		if len(*s) > 0 {
			g = (*s)[0]
		}
	case *pickle.Dict:
		g, _ = s.Get("dtype")
	}
	gl, ok := g.(pickle.Global)
	if !ok || gl.Module != "torch" {
		return Invalid, false
	}
	return ParseDType(gl.Name)
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

// plannerPaths reads planner_data: {fqn: (key, key, ...)}; nil unless every
// entry is a tuple of strings and ints.
func plannerPaths(v any) map[string][]any {
	d, ok := v.(*pickle.Dict)
	if !ok {
		return nil
	}
	out := make(map[string][]any, len(d.Entries))
	for _, e := range d.Entries {
		name, ok := e.Key.(string)
		tp, ok2 := e.Value.(*pickle.Tuple)
		if !ok || !ok2 || len(*tp) == 0 {
			return nil
		}
		for _, k := range *tp {
			switch x := k.(type) {
			case string:
			case int64:
				if x < 0 || x > 1<<20 {
					return nil
				}
			default:
				return nil
			}
		}
		out[name] = *tp
	}
	return out
}

// dcpTree rebuilds the nested state dict the default planner flattened, as
// dcp_to_torch_save does: dict keys and list indices from planner_data,
// lists padded with None. nil (a flat checkpoint) when there is no
// planner_data or its paths contradict each other.
func dcpTree(md *DCPMeta, leaves map[string]any) any {
	if md.Paths == nil {
		return nil
	}
	root := &pickle.Dict{}
	for _, it := range md.Items {
		v, ok := leaves[it.Name]
		if !ok {
			continue
		}
		path, ok := md.Paths[it.Name]
		if !ok {
			path = []any{it.Name}
		}
		var cur any = root
		for i, k := range path {
			last := i == len(path)-1
			var next any
			if !last {
				if _, isInt := path[i+1].(int64); isInt {
					next = &pickle.List{}
				} else {
					next = &pickle.Dict{}
				}
			} else {
				next = v
			}
			switch c := cur.(type) {
			case *pickle.Dict:
				key, ok := k.(string)
				if !ok {
					return nil
				}
				if old, ok := c.Get(key); ok {
					if last {
						return nil
					}
					next = old
				} else {
					c.Entries = append(c.Entries, pickle.DictEntry{Key: key, Value: next})
				}
			case *pickle.List:
				idx, ok := k.(int64)
				if !ok {
					return nil
				}
				for int64(len(*c)) <= idx {
					*c = append(*c, nil)
				}
				if old := (*c)[idx]; old != nil {
					if last {
						return nil
					}
					next = old
				} else {
					(*c)[idx] = next
				}
			default:
				return nil
			}
			cur = next
		}
	}
	return root
}
