package torchzip

import (
	"encoding/binary"
	"fmt"
	"math/big"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/pickle"
)

// StorageRef is the persistent id of one storage record ("data/<Key>").
type StorageRef struct {
	Key      string      // record key: "0", "1", ...
	DType    dtype.DType // a classic storage class's, or one Torch2DType accepts
	Location string      // location tag written for torch.load: "cpu", "cuda:0", ...
	NumEl    int64       // storage size in elements
}

// TensorRef is a tensor over a storage, in elements.
type TensorRef struct {
	Storage      *StorageRef
	Offset       int64
	Shape        []int64
	Strides      []int64
	RequiresGrad bool
	Parameter    bool // rebuilt as torch.nn.Parameter
}

// Entry is one key of the state dict: a tensor, or a plain value when
// Tensor is nil (nil, bool, int64, *big.Int, float64 or string).
type Entry struct {
	Name   string
	Tensor *TensorRef
	Value  any
}

// Protocol-2 opcodes used here, all accepted by torch 1.13's weights_only
// unpickler (BINFLOAT, in tree.go, only from torch 2.0 on).
const (
	opProto      = 0x80
	opGlobal     = 'c'
	opEmptyTuple = ')'
	opReduce     = 'R'
	opMark       = '('
	opTuple      = 't'
	opSetItems   = 'u'
	opBinPersID  = 'Q'
	opBinUnicode = 'X'
	opBinInt     = 'J'
	opBinInt1    = 'K'
	opLong1      = 0x8a
	opNone       = 'N'
	opTrue       = 0x88
	opFalse      = 0x89
	opStop       = '.'
)

// setItemsBatch is how many items one SETITEMS carries, as pickle does.
const setItemsBatch = 1000

// EncodeStateDict returns the data.pkl bytes of a collections.OrderedDict
// holding the entries in order. Storages are identified by key: tensors
// whose StorageRef has the same Key share one storage when loaded (tied
// weights stay tied). Float values are written with BINFLOAT, which
// torch.load(weights_only=True) reads from torch 2.0 on but not on 1.13;
// callers that target 1.13's weights_only loader leave them out. It fails
// on other values (ErrUnsupportedValue), on dtypes without a typed storage
// class (ErrUnsupportedDType) and on malformed tensors (ErrInvalid),
// naming the entry.
func EncodeStateDict(entries []Entry) ([]byte, error) {
	b := []byte{opProto, 2}
	b = global(b, "collections", "OrderedDict")
	b = append(b, opEmptyTuple, opReduce)
	seen := make(map[string]bool, len(entries))
	for i, e := range entries {
		if seen[e.Name] {
			return nil, &RecordError{Name: e.Name, Err: fmt.Errorf("%w: duplicate key", ErrInvalid)}
		}
		seen[e.Name] = true
		if !pickle.ValidText(e.Name) {
			return nil, &RecordError{Name: e.Name, Err: fmt.Errorf("%w: key %s", ErrInvalid, errNotText)}
		}
		if i%setItemsBatch == 0 {
			if i > 0 {
				b = append(b, opSetItems)
			}
			b = append(b, opMark)
		}
		b = str(b, e.Name)
		var err error
		if e.Tensor != nil {
			b, err = tensor(b, e.Tensor)
		} else {
			b, err = value(b, e.Value)
		}
		if err != nil {
			return nil, &RecordError{Name: e.Name, Err: err}
		}
	}
	if len(entries) > 0 {
		b = append(b, opSetItems)
	}
	return append(b, opStop), nil
}

func global(b []byte, module, name string) []byte {
	b = append(b, opGlobal)
	b = append(b, module...)
	b = append(b, '\n')
	b = append(b, name...)
	return append(b, '\n')
}

func str(b []byte, s string) []byte {
	b = append(b, opBinUnicode)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func boolean(b []byte, v bool) []byte {
	if v {
		return append(b, opTrue)
	}
	return append(b, opFalse)
}

func integer(b []byte, v int64) []byte {
	switch {
	case v >= 0 && v < 256:
		return append(b, opBinInt1, byte(v))
	case v >= -1<<31 && v < 1<<31:
		b = append(b, opBinInt)
		return binary.LittleEndian.AppendUint32(b, uint32(int32(v)))
	}
	return long1(b, big.NewInt(v))
}

// long1 writes v as LONG1: little-endian two's complement, minimal length.
func long1(b []byte, v *big.Int) []byte {
	n := (v.BitLen() + 8) / 8 // room for the sign bit
	mag := new(big.Int).Set(v)
	if v.Sign() < 0 {
		mag.Add(mag, new(big.Int).Lsh(big.NewInt(1), uint(8*n)))
	}
	be := mag.FillBytes(make([]byte, n))
	b = append(b, opLong1, byte(n))
	for i := n - 1; i >= 0; i-- {
		b = append(b, be[i])
	}
	return b
}

// errNotText says why a string that is not valid UTF-8 cannot be written.
const errNotText = "is not valid UTF-8 (Python could not load it)"

func value(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, opNone), nil
	case bool:
		return boolean(b, x), nil
	case int64:
		return integer(b, x), nil
	case *big.Int:
		if (x.BitLen()+8)/8 > 255 {
			return nil, fmt.Errorf("%w: integer of %d bits", ErrUnsupportedValue, x.BitLen())
		}
		return long1(b, x), nil
	case string:
		if !pickle.ValidText(x) {
			return nil, fmt.Errorf("%w: string %s", ErrInvalid, errNotText)
		}
		return str(b, x), nil
	case float64:
		return binFloat(b, x), nil
	}
	return nil, fmt.Errorf("%w: %T", ErrUnsupportedValue, v)
}

// Torch2DType reports whether d is a dtype without a classic typed storage
// class that torch 2.x itself saves, as the tensors are written here:
// torch._utils._rebuild_tensor_v3 over a torch.storage.UntypedStorage,
// with the dtype (torch.float8_e4m3fn, torch.uint16, ...) as its last
// argument. Such outputs load on the torch 2.x versions that have the
// dtype (float8 from 2.1, uint16-64 from 2.3), with weights_only=True;
// torch 1.13 has none of these dtypes.
func Torch2DType(d dtype.DType) bool {
	switch d {
	case dtype.Uint16, dtype.Uint32, dtype.Uint64, dtype.Complex32,
		dtype.Float8E5M2, dtype.Float8E4M3FN, dtype.Float8E5M2FNUZ, dtype.Float8E4M3FNUZ,
		dtype.Float8E8M0FNU, dtype.Float4E2M1FNx2,
		dtype.Bits8, dtype.Bits1x8, dtype.Bits2x4, dtype.Bits4x2, dtype.Bits16:
		return true
	}
	return false
}

func ints(b []byte, xs []int64) []byte {
	b = append(b, opMark)
	for _, x := range xs {
		b = integer(b, x)
	}
	return append(b, opTuple)
}

func tensor(b []byte, t *TensorRef) ([]byte, error) {
	s := t.Storage
	if s == nil || s.Key == "" || s.NumEl < 0 || t.Offset < 0 || len(t.Shape) != len(t.Strides) {
		return nil, fmt.Errorf("%w: tensor needs a storage, non-negative sizes and one stride per dimension", ErrInvalid)
	}
	class := s.DType.StorageClass()
	v3 := class == "" // a dtype torch 2.x writes through UntypedStorage
	if v3 && !Torch2DType(s.DType) {
		return nil, fmt.Errorf("%w: %s", ErrUnsupportedDType, s.DType)
	}
	if t.Parameter {
		b = global(b, "torch._utils", "_rebuild_parameter")
		b = append(b, opMark)
	}
	if v3 {
		b = global(b, "torch._utils", "_rebuild_tensor_v3")
	} else {
		b = global(b, "torch._utils", "_rebuild_tensor_v2")
	}
	b = append(b, opMark)
	b = storagePID(b, s)
	b = integer(b, t.Offset)
	b = ints(b, t.Shape)
	b = ints(b, t.Strides)
	b = boolean(b, t.RequiresGrad && !t.Parameter)
	b = global(b, "collections", "OrderedDict")
	b = append(b, opEmptyTuple, opReduce)
	if v3 {
		b = global(b, "torch", s.DType.String())
	}
	b = append(b, opTuple, opReduce)
	if t.Parameter {
		b = boolean(b, t.RequiresGrad)
		b = global(b, "collections", "OrderedDict")
		b = append(b, opEmptyTuple, opReduce)
		b = append(b, opTuple, opReduce)
	}
	return b, nil
}

// storagePID writes the persistent id of a storage: ('storage',
// torch.<X>Storage, key, location, numel), or for dtypes without a classic
// storage class ('storage', torch.storage.UntypedStorage, key, location,
// nbytes), as torch.save writes them.
func storagePID(b []byte, s *StorageRef) []byte {
	class := s.DType.StorageClass()
	b = append(b, opMark)
	b = str(b, "storage")
	if class == "" {
		b = global(b, "torch.storage", "UntypedStorage")
	} else {
		b = global(b, "torch", class)
	}
	b = str(b, s.Key)
	b = str(b, s.Location)
	if class == "" {
		b = integer(b, s.NumEl*int64(s.DType.Size()))
	} else {
		b = integer(b, s.NumEl)
	}
	return append(b, opTuple, opBinPersID)
}
