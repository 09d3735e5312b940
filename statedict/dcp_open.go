package statedict

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/pickle"
)

// dcpTensor is what a DCP tensor's storage needs to read its chunks.
type dcpTensor struct {
	dir     string
	name    string
	dtype   dtype.DType
	chunks  []Chunk
	problem error
	files   map[string]*dcpOpened
	cfg     *config
	ck      *Checkpoint
	mu      *sync.Mutex // guards ck.closers
	// pieceOf opens a chunk held as a tensor of a safetensors file
	// (dcp_hf.go); nil for chunks that are torch.save zips.
	pieceOf func(Chunk) (*piece, error)

	pmu    sync.Mutex
	pieces []*piece // by chunk, nil until its header is read
}

type dcpOpened struct {
	f    dcpFile
	size int64
	err  error
	// A .distcp that FileSystemWriter wrote with
	// SerializationFormat.SAFETENSORS: its safetensors blob, by the byte
	// offset it starts at (dcp_hf.go).
	stMu sync.Mutex
	st   map[int64]*stBlob
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
