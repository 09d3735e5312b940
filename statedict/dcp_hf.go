package statedict

import (
	"fmt"
	"io"
	"path"
	"path/filepath"
	"slices"
	"sort"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/pickle"
)

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
		_, ok, err := dcp.SavedOffsets(md)
		if ok && (len(files) > 1 || err != nil || dcp.ChunksAway(md)) {
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
