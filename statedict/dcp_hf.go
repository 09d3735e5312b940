package statedict

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/pickle"
)

// torch >= 2.8 safetensors-backed DCP (HuggingFaceStorageWriter, and
// FileSystemWriter with SerializationFormat.SAFETENSORS): each file is a
// plain safetensors file, one tensor per name, whose header metadata
// carries the DCP facts: DCPShardingInfoKey maps each tensor name to
// {"saved_offsets": [...]}, where that file's tensor (a chunk) lies in
// the global tensor. A tensor's global shape is, as torch's reader and
// consolidator compute it, the largest offset+size over its chunks in
// each dimension. Found by content, never by file name.
const (
	DCPShardingInfoKey = "DCP_SHARDING_INFO"
	DCPVersionKey      = "DCP_VERSION"
	dcpSavedOffsets    = "saved_offsets"
)

// maxHFDCPFiles bounds the safetensors files of one directory read as a
// safetensors DCP checkpoint (one per rank and output file).
const maxHFDCPFiles = 1 << 16

// hfShardFile is the name HuggingFaceStorageWriter gives a rank's file
// when every rank saves its own share: shard-RRRRR-model-IIIII-of-NNNNN,
// RRRRR the rank plus one.
var hfShardFile = regexp.MustCompile(`^shard-(\d{5,})-model-\d{5,}-of-\d{5,}\.safetensors$`)

// HFDCPOffsets returns the saved_offsets of every tensor a safetensors
// file's metadata lists under DCPShardingInfoKey; ok is false when the
// metadata has no such key. The JSON is untrusted: every entry must be an
// object whose saved_offsets is a list of at most 64 non-negative
// integers.
func HFDCPOffsets(md map[string]string) (offsets map[string][]int64, ok bool, err error) {
	raw, ok := md[DCPShardingInfoKey]
	if !ok {
		return nil, false, nil
	}
	var info map[string]map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &info); err != nil {
		return nil, true, fmt.Errorf("%w: %s is not a JSON object of objects: %v", ErrMalformed, DCPShardingInfoKey, err)
	}
	offsets = make(map[string][]int64, len(info))
	for name, e := range info {
		v, has := e[dcpSavedOffsets]
		if !has {
			return nil, true, fmt.Errorf("%w: %s entry %q has no %s", ErrMalformed, DCPShardingInfoKey, name, dcpSavedOffsets)
		}
		var offs []int64
		if err := json.Unmarshal(v, &offs); err != nil || len(offs) > 64 {
			return nil, true, fmt.Errorf("%w: %s entry %q: %s is not a list of at most 64 integers", ErrMalformed, DCPShardingInfoKey, name, dcpSavedOffsets)
		}
		for _, o := range offs {
			if o < 0 {
				return nil, true, fmt.Errorf("%w: %s entry %q: negative offset %v", ErrMalformed, DCPShardingInfoKey, name, offs)
			}
		}
		offsets[name] = offs
	}
	return offsets, true, nil
}

// hfDCPFiles returns the safetensors files of dir when at least one of
// them carries DCPShardingInfoKey and more than one file is there or the
// offsets place a chunk away from the origin: a safetensors DCP
// checkpoint. Files are sniffed by their header only.
func hfDCPFiles(dir string, cfg *config) []string {
	files := cfg.glob(dir, "*.safetensors")
	if len(files) == 0 || len(files) > maxHFDCPFiles {
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
		_, ok, err := HFDCPOffsets(md)
		if ok && (len(files) > 1 || err != nil || hfChunksAway(md)) {
			return files
		}
	}
	return nil
}

// hfChunksAway reports whether a safetensors file's metadata places a
// chunk of a safetensors DCP checkpoint away from the origin.
func hfChunksAway(md map[string]string) bool {
	offs, _, err := HFDCPOffsets(md)
	if err != nil {
		return false
	}
	for _, o := range offs {
		for _, v := range o {
			if v != 0 {
				return true
			}
		}
	}
	return false
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
// for a .distcp checkpoint. Files without DCPShardingInfoKey hold chunks
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
		chunks []Chunk
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
		offs, has, err := HFDCPOffsets(sub.Metadata)
		if err != nil {
			return nil, &Error{File: shown, Record: "header", Err: err}
		}
		rel := path.Base(filepath.ToSlash(p))
		rank := -1
		if m := hfShardFile.FindStringSubmatch(rel); m != nil {
			if r, err := strconv.Atoi(m[1]); err == nil && r >= 1 {
				rank = r - 1
			}
		}
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
					return nil, &Error{File: shown, Tensor: t.Name, Err: fmt.Errorf("%w: the tensor has no entry in %s", ErrMalformed, DCPShardingInfoKey)}
				}
			}
			if len(o) != len(t.Shape) {
				return nil, &Error{File: shown, Tensor: t.Name, Err: fmt.Errorf("%w: %s %v for a tensor of shape %v", ErrMalformed, dcpSavedOffsets, o, t.Shape)}
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
				if o[d] > maxDim-t.Shape[d] {
					return nil, &Error{File: shown, Tensor: t.Name, Err: fmt.Errorf("%w: offset %v + size %v", ErrOverflow, o, t.Shape)}
				}
				e.shape[d] = max(e.shape[d], o[d]+t.Shape[d])
			}
			var begin int64
			if ss, isSection := t.Storage.src.(*sectionSource); isSection {
				begin = ss.off
			}
			e.chunks = append(e.chunks, Chunk{Offsets: o, Sizes: t.Shape, File: rel, Rank: rank, Begin: begin, Length: t.Storage.NBytes})
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
	mu := &sync.Mutex{}
	root := &pickle.Dict{}
	for _, name := range order {
		e := byName[name]
		it := DCPItem{Name: name, IsTensor: true, DType: e.dtype, Shape: e.shape, Chunks: e.chunks}
		t := &Tensor{Name: name, DType: e.dtype, Shape: e.shape, Strides: contiguousStrides(e.shape), Device: "cpu", Layout: Strided}
		n := t.NBytes()
		if n < 0 {
			return nil, &Error{File: cfg.display(dir), Tensor: name, Err: fmt.Errorf("%w: shape %v", ErrOverflow, e.shape)}
		}
		srcs := e.srcs
		dt := &dcpTensor{dir: dir, name: name, dtype: e.dtype, cfg: cfg, ck: ck, mu: mu,
			pieceOf: func(c Chunk) (*piece, error) { return hfPiece(srcs[c.File], c) }}
		dt.chunks, dt.problem = checkTiling(it, t)
		g := &gather{name: name, dtype: e.dtype, shape: e.shape, dcp: dt, pieces: dt.open}
		t.Storage = &Storage{Key: name, Location: "cpu", DType: e.dtype, NBytes: n,
			File: cfg.display(dir), src: &gatherSource{g: g, lo: make([]int64, len(e.shape)), hi: e.shape}}
		if dt.problem != nil {
			ck.Warnings = append(ck.Warnings, fmt.Sprintf("tensor %q: %s", name, strings.TrimPrefix(dt.problem.Error(), "statedict: ")))
		}
		ck.Tensors = append(ck.Tensors, t)
		ck.Storages = append(ck.Storages, t.Storage)
		root.Entries = append(root.Entries, pickle.DictEntry{Key: name, Value: &pickle.Tensor{DType: e.dtype.String(), Shape: t.Shape,
			Stride: t.Strides, Layout: string(Strided), Storage: &pickle.StorageRef{Class: "UntypedStorage", Key: name, Location: "cpu", Numel: n, Ref: t.Storage}}})
	}
	ck.Root = root
	ok = true
	return ck, nil
}

// maxDim bounds offset+size in a dimension so that sums cannot overflow.
const maxDim = int64(1) << 62

// hfPiece is the piece of chunk c held by safetensors tensor s.
func hfPiece(s hfChunkSource, c Chunk) (*piece, error) {
	if s.t == nil {
		return nil, fmt.Errorf("%w: chunk at %v in %s", ErrMissingRecord, c.Offsets, c.File)
	}
	p, err := tensorPiece(s.t)
	if err != nil {
		return nil, err
	}
	p.lo = c.Offsets
	p.hi = make([]int64, len(c.Offsets))
	for d := range p.hi {
		p.hi[d] = c.Offsets[d] + c.Sizes[d]
	}
	p.file = s.file
	return p, nil
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
func (dt *dcpTensor) safetensorsChunk(o *dcpOpened, c Chunk) (p *piece, isST bool, err error) {
	var head [9]byte
	if c.Begin < 0 || c.Begin > o.size-9 {
		return nil, false, nil
	}
	if _, err := o.f.ReadAt(head[:], c.Begin); err != nil {
		return nil, false, nil
	}
	n := binary.LittleEndian.Uint64(head[:8])
	if head[8] != '{' || n > uint64(o.size-c.Begin-8) {
		return nil, false, nil
	}
	o.stMu.Lock()
	b := o.st[c.Begin]
	if b == nil {
		b = &stBlob{}
		cfg := *dt.cfg
		b.ck, b.err = readSafetensors(io.NewSectionReader(o.f, c.Begin, o.size-c.Begin), o.size-c.Begin, &cfg)
		if b.err == nil {
			b.offsets, _, b.err = HFDCPOffsets(b.ck.Metadata)
		}
		if o.st == nil {
			o.st = map[int64]*stBlob{}
		}
		o.st[c.Begin] = b
	}
	o.stMu.Unlock()
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
		return nil, true, fmt.Errorf("%w: its %s are %v, the metadata says %v", ErrMalformed, dcpSavedOffsets, b.offsets[dt.name], c.Offsets)
	}
	p, err = hfPiece(hfChunkSource{t: t, file: dt.cfg.display(dt.cfg.join(dt.dir, c.File))}, c)
	return p, true, err
}
