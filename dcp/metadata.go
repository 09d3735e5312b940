package dcp

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/dcpclass"
)

// MetadataFile is the name of the metadata file in a DCP directory.
const MetadataFile = ".metadata"

// FileName is the name torch's FileSystemWriter gives the file of rank
// (thread_count 1): "__0_0.distcp".
func FileName(rank int) string { return fmt.Sprintf("__%d_0.distcp", rank) }

// Location is where an item's bytes lie: bytes [Offset, Offset+Length)
// of File, a name relative to the checkpoint directory.
type Location struct {
	File           string
	Offset, Length int64
}

// Chunk is one saved piece of a tensor: the box [Offsets, Offsets+Sizes)
// of the global tensor, saved as a tensor of shape Sizes at Location.
type Chunk struct {
	Offsets, Sizes []int64
	Location
}

// Entry is one key of the flattened state dict: a tensor (Tensor true:
// DType, Size, RequiresGrad and its Chunks) or a non-tensor value saved
// with torch.save (Value).
type Entry struct {
	FQN string
	// Path is the key's place in the nested state dict that was saved
	// (planner_data): from the root, a string for each dict key and an
	// int64 (or int) for each list index, as torch's flatten_state_dict
	// records it. Empty means []any{FQN}, a key of a flat state dict.
	Path         []any
	Tensor       bool
	DType        dtype.DType
	Size         []int64
	RequiresGrad bool
	Chunks       []Chunk
	Value        Location // non-tensor values
}

// Metadata is what .metadata holds. Entries are in state dict order;
// Order lists the storage_data keys in the order they are written (torch
// writes them rank by rank, each rank's file in order): indices into
// Entries and, for tensors, into their Chunks. When Order is nil, the
// items are listed entry by entry.
type Metadata struct {
	Entries []Entry
	Order   []ItemRef
	// Planned reports that ParseMetadata found planner_data it could read
	// and set each entry's Path from it (Tree rebuilds the nested state
	// dict only then). Encode always writes planner_data.
	Planned bool
}

// ItemRef names one item of Metadata: Entries[Entry], and for a tensor its
// Chunks[Chunk].
type ItemRef struct{ Entry, Chunk int }

// Encode returns the .metadata bytes: a pickle of
// torch.distributed.checkpoint.metadata.Metadata with the fields and
// classes torch 2.6 writes (state_dict_metadata, planner_data,
// storage_data keyed by MetadataIndex with filesystem._StorageInfo
// values, storage_meta). StorageMeta's checkpoint_id is None and its
// save_id a UUID derived from the rest of the metadata, so that equal
// checkpoints get equal bytes.
func (m *Metadata) Encode() ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	var p pickler
	p.b = []byte{0x80, 2}
	p.newObj(dcpclass.Metadata, dcpclass.MetadataClass)
	p.op(opEmptyDict, opMark)
	p.str("state_dict_metadata")
	p.op(opEmptyDict, opMark)
	for _, e := range m.Entries {
		p.str(e.FQN)
		if !e.Tensor {
			p.newObj(dcpclass.Metadata, dcpclass.BytesStorage)
			continue
		}
		p.newObj(dcpclass.Metadata, dcpclass.TensorStorage)
		p.op(opEmptyDict, opMark)
		p.str("properties")
		p.newObj(dcpclass.Metadata, dcpclass.TensorProperties)
		p.op(opMark)
		p.global("torch", e.DType.String())
		p.global("torch.serialization", "_get_layout")
		p.str("torch.strided")
		p.op(opTuple1, opReduce)
		p.boolean(e.RequiresGrad)
		p.global(dcpclass.Metadata, dcpclass.MemFormatEncoding)
		p.integer(0) // TORCH_CONTIGUOUS_FORMAT
		p.op(opTuple1, opReduce)
		p.boolean(false) // pin_memory
		p.op(opTuple, opBuild)
		p.str("size")
		p.size(e.Size)
		p.str("chunks")
		p.op(opEmptyList)
		for _, c := range e.Chunks {
			p.newObj(dcpclass.Metadata, dcpclass.ChunkStorage)
			p.op(opEmptyDict, opMark)
			p.str("offsets")
			p.size(c.Offsets)
			p.str("sizes")
			p.size(c.Sizes)
			p.op(opSetItems, opBuild, opAppend)
		}
		p.op(opSetItems, opBuild)
	}
	p.op(opSetItems)
	p.str("planner_data")
	p.op(opEmptyDict, opMark)
	for _, e := range m.Entries {
		p.str(e.FQN)
		path := e.Path
		if len(path) == 0 {
			path = []any{e.FQN}
		}
		p.op(opMark)
		for _, k := range path {
			switch k := k.(type) {
			case string:
				p.str(k)
			case int64:
				p.integer(k)
			case int:
				p.integer(int64(k))
			}
		}
		p.op(opTuple)
	}
	p.op(opSetItems)
	p.str("storage_data")
	p.op(opEmptyDict)
	order := m.Order
	if order == nil {
		for i, e := range m.Entries {
			if !e.Tensor {
				order = append(order, ItemRef{i, 0})
			}
			for j := range e.Chunks {
				order = append(order, ItemRef{i, j})
			}
		}
	}
	for i, ref := range order {
		if i%1000 == 0 {
			if i > 0 {
				p.op(opSetItems)
			}
			p.op(opMark)
		}
		e := m.Entries[ref.Entry]
		p.newObj(dcpclass.Metadata, dcpclass.MetadataIndex)
		p.op(opEmptyDict, opMark)
		p.str("fqn")
		p.str(e.FQN)
		p.str("index")
		loc := e.Value
		if e.Tensor {
			c := e.Chunks[ref.Chunk]
			p.integer(int64(ref.Chunk))
			p.str("offset")
			p.size(c.Offsets)
			loc = c.Location
		} else {
			p.op(opNone)
		}
		p.op(opSetItems, opBuild)
		p.newObj(dcpclass.Filesystem, dcpclass.StorageInfo)
		p.op(opEmptyDict, opMark)
		p.str("relative_path")
		p.str(loc.File)
		p.str("offset")
		p.integer(loc.Offset)
		p.str("length")
		p.integer(loc.Length)
		p.op(opSetItems, opBuild)
	}
	if len(order) > 0 {
		p.op(opSetItems)
	}
	sum := sha256.Sum256(p.b)
	p.str("storage_meta")
	p.newObj(dcpclass.Metadata, dcpclass.StorageMeta)
	p.op(opEmptyDict, opMark)
	p.str("checkpoint_id")
	p.op(opNone)
	p.str("save_id")
	p.str(uuidOf(sum[:16]))
	p.str("load_id")
	p.op(opNone)
	p.op(opSetItems, opBuild)
	p.op(opSetItems, opBuild, opStop)
	return p.b, nil
}

// uuidOf formats 16 bytes as a version-4-shaped UUID string.
func uuidOf(b []byte) string {
	var u [16]byte
	copy(u[:], b)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

func (m *Metadata) validate() error {
	seen := map[string]bool{}
	bad := func(name, format string, args ...any) error {
		return fmt.Errorf("%w: %q: %s", ErrInvalid, name, fmt.Sprintf(format, args...))
	}
	for _, e := range m.Entries {
		if e.FQN == "" || !utf8.ValidString(e.FQN) || seen[e.FQN] {
			return bad(e.FQN, "empty, duplicate or not UTF-8")
		}
		seen[e.FQN] = true
		for _, k := range e.Path {
			switch k := k.(type) {
			case string:
				if !utf8.ValidString(k) {
					return bad(e.FQN, "path key not UTF-8")
				}
			case int64:
				if k < 0 {
					return bad(e.FQN, "negative list index %d in its path", k)
				}
			case int:
				if k < 0 {
					return bad(e.FQN, "negative list index %d in its path", k)
				}
			default:
				return bad(e.FQN, "path element of type %T (a string key or an int index)", k)
			}
		}
		locs := []Location{e.Value}
		if e.Tensor {
			locs = nil
			if e.DType.Size() == 0 && e.DType.PerByte() == 0 {
				return bad(e.FQN, "dtype %s", e.DType)
			}
			for _, c := range e.Chunks {
				if len(c.Offsets) != len(e.Size) || len(c.Sizes) != len(e.Size) {
					return bad(e.FQN, "chunk of %d dimensions in a tensor of %d", len(c.Offsets), len(e.Size))
				}
				for d := range e.Size {
					if c.Offsets[d] < 0 || c.Sizes[d] < 0 || c.Offsets[d]+c.Sizes[d] > e.Size[d] {
						return bad(e.FQN, "chunk %v+%v outside %v", c.Offsets, c.Sizes, e.Size)
					}
				}
				locs = append(locs, c.Location)
			}
		}
		for _, l := range locs {
			if l.File == "" || !utf8.ValidString(l.File) || l.Offset < 0 || l.Length < 0 {
				return bad(e.FQN, "bad location %q %d+%d", l.File, l.Offset, l.Length)
			}
		}
	}
	for _, r := range m.Order {
		if r.Entry < 0 || r.Entry >= len(m.Entries) || r.Chunk < 0 ||
			(m.Entries[r.Entry].Tensor && r.Chunk >= len(m.Entries[r.Entry].Chunks)) {
			return fmt.Errorf("%w: item reference %v out of range", ErrInvalid, r)
		}
	}
	return nil
}

// Protocol-2 opcodes.
const (
	opMark      = '('
	opStop      = '.'
	opNone      = 'N'
	opNewTrue   = 0x88
	opNewFalse  = 0x89
	opBinInt    = 'J'
	opBinInt1   = 'K'
	opBinInt2   = 'M'
	opLong1     = 0x8a
	opBinUni    = 'X'
	opGlobal    = 'c'
	opEmptyDict = '}'
	opEmptyList = ']'
	opEmptyTup  = ')'
	opAppend    = 'a'
	opSetItems  = 'u'
	opTuple     = 't'
	opTuple1    = 0x85
	opReduce    = 'R'
	opBuild     = 'b'
	opNewObj    = 0x81
)

type pickler struct{ b []byte }

func (p *pickler) op(ops ...byte) { p.b = append(p.b, ops...) }

func (p *pickler) str(s string) {
	p.b = append(p.b, opBinUni)
	p.b = binary.LittleEndian.AppendUint32(p.b, uint32(len(s)))
	p.b = append(p.b, s...)
}

func (p *pickler) global(module, name string) {
	p.b = append(p.b, opGlobal)
	p.b = append(p.b, module...)
	p.b = append(p.b, '\n')
	p.b = append(p.b, name...)
	p.b = append(p.b, '\n')
}

// newObj writes cls.__new__(cls), as pickle does for a dataclass.
func (p *pickler) newObj(module, name string) {
	p.global(module, name)
	p.op(opEmptyTup, opNewObj)
}

func (p *pickler) boolean(v bool) {
	if v {
		p.op(opNewTrue)
	} else {
		p.op(opNewFalse)
	}
}

func (p *pickler) integer(v int64) {
	switch {
	case v >= 0 && v < 1<<8:
		p.b = append(p.b, opBinInt1, byte(v))
	case v >= 0 && v < 1<<16:
		p.b = append(p.b, opBinInt2)
		p.b = binary.LittleEndian.AppendUint16(p.b, uint16(v))
	case v >= math.MinInt32 && v <= math.MaxInt32:
		p.b = append(p.b, opBinInt)
		p.b = binary.LittleEndian.AppendUint32(p.b, uint32(int32(v)))
	default: // LONG1: little-endian two's complement, shortest
		var le [8]byte
		binary.LittleEndian.PutUint64(le[:], uint64(v))
		n := 8
		for n > 1 && (le[n-1] == 0 && le[n-2]&0x80 == 0 || le[n-1] == 0xff && le[n-2]&0x80 != 0) {
			n--
		}
		p.b = append(p.b, opLong1, byte(n))
		p.b = append(p.b, le[:n]...)
	}
}

// size writes torch.Size(tuple).
func (p *pickler) size(v []int64) {
	p.global("torch", "Size")
	p.op(opMark)
	for _, x := range v {
		p.integer(x)
	}
	p.op(opTuple, opTuple1, opReduce)
}
