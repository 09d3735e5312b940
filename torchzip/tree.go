package torchzip

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"strconv"

	"github.com/ckpt-dev/ckpt/pickle"
)

// More protocol-2 opcodes, for object trees.
const (
	opEmptyDict  = '}'
	opEmptyList  = ']'
	opAppends    = 'e'
	opTuple1     = 0x85
	opBuild      = 'b'
	opBinFloat   = 'G'
	opBinPut     = 'q'
	opLongBinPut = 'r'
	opBinGet     = 'h'
	opLongBinGet = 'j'
)

// maxTreeDepth bounds the nesting EncodeTree follows.
const maxTreeDepth = 10_000

// memoStringMin is the length from which strings are written once and
// referenced again through the memo, so that a value shared many times in
// the tree is not copied many times into the pickle: every node then costs
// at most a few dozen bytes besides the distinct strings and bytes.
const memoStringMin = 16

// EncodeTree returns the data.pkl bytes of an object tree, for torch.load.
// The nodes it writes, and how:
//
//   - nil, bool, int64, *big.Int (up to 255 bytes), string: NONE, NEWTRUE,
//     NEWFALSE, BININT*, LONG1, BINUNICODE, as torch 1.13's weights_only
//     loader reads them;
//   - float64: BINFLOAT, which weights_only loaders read from torch 2.0 on;
//   - []byte: _codecs.encode(latin-1 string, "latin1"), complex128:
//     builtins.complex(re, im), *pickle.Set (not frozen): builtins.set(list),
//     pickle.Device: torch.device(str), the spellings Python's protocol-2
//     pickler uses and torch 2.x's weights_only allowlist accepts;
//   - *pickle.Dict of Class "" (a dict) or "collections.OrderedDict", with
//     its State (string-keyed attributes such as a state dict's _metadata)
//     restored by BUILD on an OrderedDict; *pickle.List; *pickle.Tuple;
//   - *TensorRef: a tensor rebuilt as EncodeStateDict does;
//   - *StorageRef: a storage as a value of its own (its persistent id, which
//     torch.load returns as a TypedStorage).
//
// Containers and tensors reached twice (shared or cyclic references) are
// written once and referenced through the memo, as pickle does; so are
// bytes and long strings, so the pickle grows with the distinct values. Any other node fails with ErrUnsupportedValue, a malformed
// tensor or a tuple or set that contains itself with ErrInvalid; the error
// is a *RecordError naming the path of the node ("model.0.weight",
// "[key]" for a dict key).
func EncodeTree(root any) ([]byte, error) {
	e := &encoder{
		b:     []byte{opProto, 2},
		memo:  map[any]uint32{},
		strs:  map[string]uint32{},
		bytes: map[string]uint32{},
		busy:  map[any]bool{},
	}
	if err := e.node(root, "", 0); err != nil {
		return nil, err
	}
	return append(e.b, opStop), nil
}

type encoder struct {
	b     []byte
	memo  map[any]uint32    // written containers and tensors
	strs  map[string]uint32 // written long strings
	bytes map[string]uint32 // written long byte strings
	busy  map[any]bool      // tuples and sets being written
	n     uint32            // next memo index
}

// put memoizes the value on top of the stack.
func (e *encoder) put() uint32 {
	i := e.n
	e.n++
	if i < 256 {
		e.b = append(e.b, opBinPut, byte(i))
	} else {
		e.b = append(e.b, opLongBinPut)
		e.b = binary.LittleEndian.AppendUint32(e.b, i)
	}
	return i
}

func (e *encoder) get(i uint32) {
	if i < 256 {
		e.b = append(e.b, opBinGet, byte(i))
		return
	}
	e.b = append(e.b, opLongBinGet)
	e.b = binary.LittleEndian.AppendUint32(e.b, i)
}

func child(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (e *encoder) fail(path string, err error) error {
	return &RecordError{Name: path, Err: err}
}

func (e *encoder) node(v any, path string, depth int) error {
	if depth > maxTreeDepth {
		return e.fail(path, fmt.Errorf("%w: nested deeper than %d", ErrInvalid, maxTreeDepth))
	}
	switch x := v.(type) {
	case *pickle.Dict, *pickle.List, *pickle.Tuple, *pickle.Set, *TensorRef, *StorageRef, *big.Int:
		if i, ok := e.memo[x]; ok {
			e.get(i)
			return nil
		}
		if e.busy[x] {
			return e.fail(path, fmt.Errorf("%w: %T contains itself", ErrInvalid, x))
		}
	}
	switch x := v.(type) {
	case *pickle.Dict:
		return e.dict(x, path, depth)
	case *pickle.List:
		e.b = append(e.b, opEmptyList)
		e.memo[x] = e.put()
		return e.appends(*x, path, depth)
	case *pickle.Tuple:
		e.busy[x] = true
		defer delete(e.busy, x)
		e.b = append(e.b, opMark)
		for i, it := range *x {
			if err := e.node(it, child(path, strconv.Itoa(i)), depth+1); err != nil {
				return err
			}
		}
		e.b = append(e.b, opTuple)
		e.memo[x] = e.put()
		return nil
	case *pickle.Set:
		if x.Frozen {
			return e.fail(path, fmt.Errorf("%w: frozenset", ErrUnsupportedValue))
		}
		e.busy[x] = true
		defer delete(e.busy, x)
		e.b = global(e.b, "builtins", "set")
		e.b = append(e.b, opEmptyList)
		if err := e.appends(x.Items, path, depth); err != nil {
			return err
		}
		e.b = append(e.b, opTuple1, opReduce)
		e.memo[x] = e.put()
		return nil
	case *StorageRef:
		if x.Key == "" || x.NumEl < 0 || x.DType.StorageClass() == "" && !Torch2DType(x.DType) {
			return e.fail(path, fmt.Errorf("%w: storage of %s", ErrUnsupportedDType, x.DType))
		}
		e.b = storagePID(e.b, x)
		e.memo[x] = e.put()
		return nil
	case *TensorRef:
		var err error
		if e.b, err = tensor(e.b, x); err != nil {
			return e.fail(path, err)
		}
		e.memo[x] = e.put()
		return nil
	case *big.Int:
		if (x.BitLen()+8)/8 > 255 {
			return e.fail(path, fmt.Errorf("%w: integer of %d bits", ErrUnsupportedValue, x.BitLen()))
		}
		e.b = long1(e.b, x)
		e.memo[x] = e.put()
		return nil
	case string:
		return e.str(x)
	case []byte:
		return e.byteString(x)
	case float64:
		e.b = binFloat(e.b, x)
		return nil
	case complex128:
		e.b = global(e.b, "builtins", "complex")
		e.b = append(e.b, opMark)
		e.b = binFloat(e.b, real(x))
		e.b = binFloat(e.b, imag(x))
		e.b = append(e.b, opTuple, opReduce)
		return nil
	case pickle.Device:
		e.b = global(e.b, "torch", "device")
		e.b = str(e.b, string(x))
		e.b = append(e.b, opTuple1, opReduce)
		return nil
	}
	var err error
	if e.b, err = value(e.b, v); err != nil {
		return e.fail(path, err)
	}
	return nil
}

// str writes a string, through the memo when it is long.
func (e *encoder) str(s string) error {
	if !pickle.ValidText(s) {
		return fmt.Errorf("%w: string %s", ErrInvalid, errNotText)
	}
	if len(s) < memoStringMin {
		e.b = str(e.b, s)
		return nil
	}
	if i, ok := e.strs[s]; ok {
		e.get(i)
		return nil
	}
	e.b = str(e.b, s)
	e.strs[s] = e.put()
	return nil
}

// byteString writes bytes as Python's protocol-2 pickler does,
// _codecs.encode(s, "latin1") where s has one code point per byte, once
// per distinct value (the call is long).
func (e *encoder) byteString(b []byte) error {
	if i, ok := e.bytes[string(b)]; ok {
		e.get(i)
		return nil
	}
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	e.b = global(e.b, "_codecs", "encode")
	e.b = append(e.b, opMark)
	e.b = str(e.b, string(r))
	e.b = str(e.b, "latin1")
	e.b = append(e.b, opTuple, opReduce)
	e.bytes[string(b)] = e.put()
	return nil
}

// appends adds items to the list on top of the stack, in batches.
func (e *encoder) appends(items []any, path string, depth int) error {
	for i, it := range items {
		if i%setItemsBatch == 0 {
			if i > 0 {
				e.b = append(e.b, opAppends)
			}
			e.b = append(e.b, opMark)
		}
		if err := e.node(it, child(path, strconv.Itoa(i)), depth+1); err != nil {
			return err
		}
	}
	if len(items) > 0 {
		e.b = append(e.b, opAppends)
	}
	return nil
}

func (e *encoder) dict(d *pickle.Dict, path string, depth int) error {
	switch d.Class {
	case "":
		if d.State != nil {
			return e.fail(path, fmt.Errorf("%w: attributes on a plain dict", ErrUnsupportedValue))
		}
		e.b = append(e.b, opEmptyDict)
	case "collections.OrderedDict":
		e.b = global(e.b, "collections", "OrderedDict")
		e.b = append(e.b, opEmptyTuple, opReduce)
	default:
		return e.fail(path, fmt.Errorf("%w: %s", ErrUnsupportedValue, d.Class))
	}
	e.memo[d] = e.put()
	for i, en := range d.Entries {
		if i%setItemsBatch == 0 {
			if i > 0 {
				e.b = append(e.b, opSetItems)
			}
			e.b = append(e.b, opMark)
		}
		name := child(path, pickle.KeyName(en.Key))
		if err := e.node(en.Key, child(path, "["+pickle.KeyName(en.Key)+"]"), depth+1); err != nil {
			return err
		}
		if err := e.node(en.Value, name, depth+1); err != nil {
			return err
		}
	}
	if len(d.Entries) > 0 {
		e.b = append(e.b, opSetItems)
	}
	if d.State == nil {
		return nil
	}
	st, ok := d.State.(*pickle.Dict)
	if !ok || st.Class != "" {
		return e.fail(path, fmt.Errorf("%w: OrderedDict attributes of type %T", ErrUnsupportedValue, d.State))
	}
	for _, en := range st.Entries {
		if _, ok := en.Key.(string); !ok {
			return e.fail(path, fmt.Errorf("%w: attribute name of type %T", ErrUnsupportedValue, en.Key))
		}
	}
	if err := e.node(st, child(path, "[attributes]"), depth+1); err != nil {
		return err
	}
	e.b = append(e.b, opBuild)
	return nil
}

func binFloat(b []byte, f float64) []byte {
	b = append(b, opBinFloat)
	return binary.BigEndian.AppendUint64(b, math.Float64bits(f))
}
