package pickle

import (
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/nlpodyssey/gopickle/types"
)

// maxDims bounds the rank of a tensor (torch itself supports at most 64
// dimensions in most kernels); it keeps tensor rebuilds constant-size.
const maxDims = 64

// StorageRef is a storage named by a persistent id: the bytes live outside
// the pickle (a zip record, a legacy-stream block).
type StorageRef struct {
	Class    string // storage class name: "FloatStorage", ..., or "UntypedStorage"
	DType    string // torch dtype name from the class ("float32"); "" for UntypedStorage
	Key      string // key as string (ints formatted decimal)
	Location string // location tag as saved ("cpu", "cuda:0", ...)
	Numel    int64  // as saved: elements for typed classes, BYTES for UntypedStorage
	Ref      any    // free slot: a persistent-load hook may keep its own resolved storage here
	// View is set when the id names a slice of the storage Key (the view
	// metadata of torch < 0.4's legacy format); Numel is then the root's.
	View *StorageView
}

// Len is the storage's size as torch's len() reports it for the loaded
// storage: the view's size for a view, else Numel.
func (s *StorageRef) Len() int64 {
	if s.View != nil {
		return s.View.Numel
	}
	return s.Numel
}

// StorageView is a storage that is a slice of another (torch < 0.4):
// elements [Offset, Offset+Numel) of the root storage.
type StorageView struct {
	Key           string // the view's own key
	Offset, Numel int64
}

// Tensor is a torch tensor as rebuilt from its pickle: metadata only.
// Sizes, strides and offsets count elements.
type Tensor struct {
	Storage       *StorageRef // nil for storage-less tensors (meta, sparse, nested, wrapper subclass)
	DType         string      // torch name ("float32"): from the storage class or the dtype argument
	Offset        int64       // storage offset in elements
	Shape, Stride []int64     // Stride is nil when the tensor has no strides (sparse, nested)
	RequiresGrad  bool
	Parameter     bool   // wrapped by _rebuild_parameter(_with_state) or nn.Parameter
	Rebuild       string // rebuild function that built the data, e.g. "_rebuild_tensor_v2"
	Layout        string // "strided", "sparse_coo", "sparse_csr", ..., or "nested"
	// Components are the parts of sparse and nested tensors, in torch's
	// order: COO indices, values; CSR crow_indices, col_indices, values;
	// CSC ccol_indices, row_indices, values; BSR/BSC likewise; nested
	// buffer, sizes, strides, storage_offsets.
	Components []NamedTensor
	Quant      *QParams
	Subclass   string // module.name of a tensor subclass from _rebuild_from_type_v2 or a wrapper subclass
	Device     string // device of storage-less tensors ("meta", a wrapper subclass's device, ...)
	// Attributes are the Python attributes _rebuild_from_type_v2 restores
	// on the tensor (its state, usually a dict): a wrapper subclass keeps
	// its real data there (e.g. {'elem': tensor}) over a storage-less shell.
	// nil when there are none.
	Attributes any
}

// NamedTensor is one component of a sparse or nested tensor.
type NamedTensor struct {
	Name   string
	Tensor *Tensor
}

// QParams are the quantizer parameters of a quantized tensor. Per-tensor
// schemes use Scale and ZeroPoint; per-channel schemes use Scales,
// ZeroPoints (nil when the pickle stored plain lists) and Axis.
type QParams struct {
	Scheme     string // "per_tensor_affine", "per_channel_affine", "per_channel_affine_float_qparams"
	Scale      float64
	ZeroPoint  int64
	Scales     *Tensor
	ZeroPoints *Tensor
	Axis       int64
}

// storageClasses maps classic typed storage classes to their dtype.
var storageClasses = map[string]string{
	"DoubleStorage": "float64", "FloatStorage": "float32", "HalfStorage": "float16",
	"BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
	"ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
	"ComplexDoubleStorage": "complex128", "ComplexFloatStorage": "complex64",
	"QInt8Storage": "qint8", "QInt32Storage": "qint32", "QUInt8Storage": "quint8",
	"QUInt4x2Storage": "quint4x2", "QUInt2x4Storage": "quint2x4",
}

// storageDTypes returns a pointer to the dtype of a storage class global
// ("" for UntypedStorage), or nil when module.name is not one.
func storageDTypes(module, name string) *string {
	if name == "UntypedStorage" && (module == "torch" || module == "torch.storage") {
		s := ""
		return &s
	}
	if module != "torch" && module != "torch.cuda" {
		return nil
	}
	if d, ok := storageClasses[name]; ok {
		return &d
	}
	return nil
}

// dtypeNames maps torch.<name> dtype globals to the canonical dtype name.
var dtypeNames = func() map[string]string {
	m := map[string]string{
		"double": "float64", "float": "float32", "half": "float16", "cdouble": "complex128",
		"cfloat": "complex64", "chalf": "complex32", "long": "int64", "int": "int32", "short": "int16",
	}
	for _, n := range strings.Fields(`float64 float32 float16 bfloat16 complex128 complex64 complex32
		int64 int32 int16 int8 uint8 uint16 uint32 uint64 bool float8_e5m2 float8_e4m3fn
		float8_e5m2fnuz float8_e4m3fnuz float8_e8m0fnu float4_e2m1fn_x2 qint8 quint8 qint32
		quint4x2 quint2x4 bits8 bits1x8 bits2x4 bits4x2 bits16
		int1 int2 int3 int4 int5 int6 int7 uint1 uint2 uint3 uint4 uint5 uint6 uint7`) {
		m[n] = n
	}
	return m
}()

func isDTypeGlobal(module, name string) bool {
	_, ok := dtypeNames[name]
	return ok && module == "torch"
}

// ParseStoragePID parses torch's ('storage', storage_type, key, location,
// numel[, view_metadata]) persistent id, as passed to a WithPersistentLoad
// hook. Legacy view metadata (view_key, offset, size), written by torch <
// 0.4 for storages that are slices of another, is returned in View.
func ParseStoragePID(pid any) (*StorageRef, error) {
	t, ok := pid.(*Tuple)
	if !ok || (len(*t) != 5 && len(*t) != 6) {
		return nil, malformed("persistent id %T is not a 5- or 6-tuple", pid)
	}
	f := *t
	if s, ok := f[0].(string); !ok || s != "storage" {
		return nil, malformed("persistent id does not start with 'storage'")
	}
	cls, ok := f[1].(Global)
	if !ok {
		return nil, malformed("storage type is %T, not a storage class", f[1])
	}
	dt := storageDTypes(cls.Module, cls.Name)
	if dt == nil {
		return nil, malformed("unknown storage class %s", cls)
	}
	ref := &StorageRef{Class: cls.Name, DType: *dt}
	switch k := f[2].(type) {
	case string:
		ref.Key = k
	case int64:
		ref.Key = strconv.FormatInt(k, 10)
	default:
		return nil, malformed("storage key is %T", f[2])
	}
	if ref.Location, ok = f[3].(string); !ok {
		return nil, malformed("storage location is %T", f[3])
	}
	if ref.Numel, ok = f[4].(int64); !ok || ref.Numel < 0 {
		return nil, malformed("storage size %v is not a non-negative integer", f[4])
	}
	if len(f) == 6 && f[5] != nil {
		vm, ok := f[5].(*Tuple)
		if !ok || len(*vm) != 3 {
			return nil, malformed("storage view metadata is not (view_key, offset, size)")
		}
		v := &StorageView{}
		switch k := (*vm)[0].(type) {
		case string:
			v.Key = k
		case int64:
			v.Key = strconv.FormatInt(k, 10)
		default:
			return nil, malformed("storage view key is not a string")
		}
		var ok1, ok2 bool
		v.Offset, ok1 = (*vm)[1].(int64)
		v.Numel, ok2 = (*vm)[2].(int64)
		if !ok1 || !ok2 || v.Offset < 0 || v.Numel < 0 || v.Offset > ref.Numel || v.Numel > ref.Numel-v.Offset {
			return nil, malformed("storage view [%v, +%v) does not fit storage %s of %d elements", (*vm)[1], (*vm)[2], ref.Key, ref.Numel)
		}
		ref.View = v
	}
	return ref, nil
}

// ---- argument helpers: every hook checks arity and types before use ----

func arity(name string, args []any, counts ...int) error {
	for _, c := range counts {
		if len(args) == c {
			return nil
		}
	}
	return malformed("%s called with %d arguments", name, len(args))
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case *big.Int:
		f, _ := new(big.Float).SetInt(x).Float64()
		return f, true
	}
	return 0, false
}

func asBool(v any) (bool, bool) {
	if i, ok := asInt(v); ok {
		return i != 0, true
	}
	return false, false
}

// seq returns the items of a tuple or list on gopickle's stack.
func seq(v any) ([]any, bool) {
	switch x := v.(type) {
	case *types.Tuple:
		return *x, true
	case *types.List:
		return *x, true
	}
	return nil, false
}

// dims parses a size or stride tuple. The copy is charged: a memoized
// tuple can be passed to any number of rebuild calls. Negative values are
// passed on as the file has them: checking a tensor's geometry against its
// storage is the caller's job, which knows the tensor's name.
func dims(rt *hookEnv, what string, v any) ([]int64, error) {
	items, ok := seq(v)
	if !ok {
		return nil, malformed("%s is %T, not a tuple", what, v)
	}
	if len(items) > maxDims {
		return nil, malformed("%s has %d dimensions (more than %d)", what, len(items), maxDims)
	}
	if err := rt.charge(len(items)); err != nil {
		return nil, err
	}
	out := make([]int64, len(items))
	for i, it := range items {
		n, ok := it.(int)
		if !ok {
			return nil, malformed("%s[%d] is %v, not an integer", what, i, it)
		}
		out[i] = int64(n)
	}
	return out, nil
}

func asTensor(what string, v any) (*Tensor, error) {
	if p, ok := v.(*pyTensor); ok {
		return p.t, nil
	}
	if p, ok := v.(*pyLegacyTensor); ok {
		return p.tensor(), nil
	}
	return nil, malformed("%s is %T, not a tensor", what, v)
}

// globalOf returns the module and name of a global used as a value.
func globalOf(v any) (Global, bool) {
	switch x := v.(type) {
	case *pyClass:
		return Global{x.module, x.name}, true
	case Global:
		return x, true
	}
	return Global{}, false
}

func dtypeArg(v any) (string, error) {
	if g, ok := globalOf(v); ok && isDTypeGlobal(g.Module, g.Name) {
		return dtypeNames[g.Name], nil
	}
	return "", malformed("dtype argument is %v, not a torch dtype", v)
}

func torchGlobalArg(what string, v any, valid func(string) bool) (string, error) {
	if g, ok := globalOf(v); ok && g.Module == "torch" && valid(g.Name) {
		return g.Name, nil
	}
	return "", malformed("%s argument is %v", what, v)
}

// layouts and qschemes are the torch.<name> globals of those kinds.
var (
	layouts = map[string]bool{"strided": true, "sparse_coo": true, "sparse_csr": true, "sparse_csc": true,
		"sparse_bsr": true, "sparse_bsc": true, "_mkldnn": true, "jagged": true}
	qschemes = map[string]bool{"per_tensor_affine": true, "per_channel_affine": true,
		"per_tensor_symmetric": true, "per_channel_symmetric": true, "per_channel_affine_float_qparams": true}
)

func isLayout(n string) bool  { return layouts[n] }
func isQScheme(n string) bool { return qschemes[n] }

func deviceArg(v any) (string, error) {
	switch x := v.(type) {
	case Device:
		return string(x), nil
	case string:
		return x, nil
	}
	return "", malformed("device argument is %T", v)
}

// ---- torch rebuild functions ----

// stridedTensor parses the (storage, offset, size, stride) prefix shared by
// the strided rebuild functions.
func stridedTensor(rt *hookEnv, rebuild string, args []any) (*Tensor, error) {
	st, ok := args[0].(*StorageRef)
	if !ok {
		return nil, malformed("%s: storage is %T, not a storage persistent id", rebuild, args[0])
	}
	off, ok := asInt(args[1])
	if !ok || off < 0 {
		return nil, malformed("%s: storage offset %v", rebuild, args[1])
	}
	shape, err := dims(rt, "size", args[2])
	if err != nil {
		return nil, err
	}
	stride, err := dims(rt, "stride", args[3])
	if err != nil {
		return nil, err
	}
	if len(shape) != len(stride) {
		return nil, malformed("%s: %d sizes but %d strides", rebuild, len(shape), len(stride))
	}
	return &Tensor{Storage: st, DType: st.DType, Offset: off, Shape: shape, Stride: stride,
		Rebuild: rebuild, Layout: "strided"}, nil
}

func rebuildTensor(rt *hookEnv, args []any) (any, error) {
	if err := arity("_rebuild_tensor", args, 4); err != nil {
		return nil, err
	}
	t, err := stridedTensor(rt, "_rebuild_tensor", args)
	if err != nil {
		return nil, err
	}
	if t.DType == "" {
		return nil, malformed("_rebuild_tensor on an untyped storage has no dtype")
	}
	return &pyTensor{t: t}, nil
}

func rebuildTensorV2(rt *hookEnv, args []any) (any, error) {
	if err := arity("_rebuild_tensor_v2", args, 6, 7); err != nil {
		return nil, err
	}
	t, err := stridedTensor(rt, "_rebuild_tensor_v2", args)
	if err != nil {
		return nil, err
	}
	if t.DType == "" {
		return nil, malformed("_rebuild_tensor_v2 on an untyped storage has no dtype")
	}
	if t.RequiresGrad, err = requiresGrad(args[4]); err != nil {
		return nil, err
	}
	return &pyTensor{t: t}, nil
}

func rebuildTensorV3(rt *hookEnv, args []any) (any, error) {
	if err := arity("_rebuild_tensor_v3", args, 7, 8); err != nil {
		return nil, err
	}
	t, err := stridedTensor(rt, "_rebuild_tensor_v3", args)
	if err != nil {
		return nil, err
	}
	if t.RequiresGrad, err = requiresGrad(args[4]); err != nil {
		return nil, err
	}
	if t.DType, err = dtypeArg(args[6]); err != nil {
		return nil, err
	}
	return &pyTensor{t: t}, nil
}

func requiresGrad(v any) (bool, error) {
	b, ok := asBool(v)
	if !ok {
		return false, malformed("requires_grad is %T, not a bool", v)
	}
	return b, nil
}

func parameterOf(what string, data, rg any) (any, error) {
	t, err := asTensor(what+" data", data)
	if err != nil {
		return nil, err
	}
	p := *t
	p.Parameter = true
	if p.RequiresGrad, err = requiresGrad(rg); err != nil {
		return nil, err
	}
	return &pyTensor{t: &p}, nil
}

func rebuildParameter(_ *hookEnv, args []any) (any, error) {
	if err := arity("_rebuild_parameter", args, 3); err != nil {
		return nil, err
	}
	return parameterOf("_rebuild_parameter", args[0], args[1])
}

// rebuildParameterWithState ignores the state: it only sets Python attributes.
func rebuildParameterWithState(_ *hookEnv, args []any) (any, error) {
	if err := arity("_rebuild_parameter_with_state", args, 4); err != nil {
		return nil, err
	}
	return parameterOf("_rebuild_parameter_with_state", args[0], args[1])
}

// newParameter is torch.nn.Parameter(data, requires_grad=True).
func newParameter(_ *hookEnv, args []any) (any, error) {
	if err := arity("Parameter", args, 1, 2); err != nil {
		return nil, err
	}
	rg := any(true)
	if len(args) == 2 {
		rg = args[1]
	}
	return parameterOf("Parameter", args[0], rg)
}

func rebuildQTensor(rt *hookEnv, args []any) (any, error) {
	if err := arity("_rebuild_qtensor", args, 7); err != nil {
		return nil, err
	}
	t, err := stridedTensor(rt, "_rebuild_qtensor", args)
	if err != nil {
		return nil, err
	}
	if t.DType == "" {
		return nil, malformed("_rebuild_qtensor on an untyped storage has no dtype")
	}
	if t.RequiresGrad, err = requiresGrad(args[5]); err != nil {
		return nil, err
	}
	qp, ok := seq(args[4])
	if !ok || len(qp) == 0 {
		return nil, malformed("quantizer params are %T", args[4])
	}
	q := &QParams{}
	if q.Scheme, err = torchGlobalArg("qscheme", qp[0], isQScheme); err != nil {
		return nil, err
	}
	switch q.Scheme {
	case "per_tensor_affine":
		if len(qp) != 3 {
			return nil, malformed("per_tensor_affine params have %d items", len(qp))
		}
		var ok1, ok2 bool
		q.Scale, ok1 = asFloat(qp[1])
		q.ZeroPoint, ok2 = asInt(qp[2])
		if !ok1 || !ok2 {
			return nil, malformed("per_tensor_affine scale/zero_point are %T/%T", qp[1], qp[2])
		}
	case "per_channel_affine", "per_channel_affine_float_qparams":
		if len(qp) != 4 {
			return nil, malformed("%s params have %d items", q.Scheme, len(qp))
		}
		// torch < 1.5 stored plain lists; those are accepted and not kept.
		if _, isList := qp[1].(*types.List); !isList {
			if q.Scales, err = asTensor("scales", qp[1]); err != nil {
				return nil, err
			}
		}
		if _, isList := qp[2].(*types.List); !isList {
			if q.ZeroPoints, err = asTensor("zero_points", qp[2]); err != nil {
				return nil, err
			}
		}
		if q.Axis, ok = asInt(qp[3]); !ok {
			return nil, malformed("per-channel axis is %T", qp[3])
		}
	default:
		return nil, malformed("cannot rebuild a quantized tensor with qscheme %s", q.Scheme)
	}
	// torch pickles per_channel_affine_float_qparams as per_channel_affine
	// and tells them apart on load by the zero points' dtype.
	if q.Scheme == "per_channel_affine" && q.ZeroPoints != nil {
		switch q.ZeroPoints.DType {
		case "float64", "float32", "float16", "bfloat16":
			q.Scheme = "per_channel_affine_float_qparams"
		}
	}
	t.Quant = q
	return &pyTensor{t: t}, nil
}

var sparseComponents = map[string][]string{
	"sparse_coo": {"indices", "values"},
	"sparse_csr": {"crow_indices", "col_indices", "values"},
	"sparse_bsr": {"crow_indices", "col_indices", "values"},
	"sparse_csc": {"ccol_indices", "row_indices", "values"},
	"sparse_bsc": {"ccol_indices", "row_indices", "values"},
}

// rebuildSparse is _rebuild_sparse_tensor(layout, data) (and torch 1.x's
// _rebuild_sparse_csr_tensor). data is (indices, values, size[, is_coalesced])
// for COO and (compressed_indices, plain_indices, values, size) otherwise.
func rebuildSparse(rt *hookEnv, args []any) (any, error) {
	if err := arity("_rebuild_sparse_tensor", args, 2); err != nil {
		return nil, err
	}
	layout, err := torchGlobalArg("layout", args[0], isLayout)
	if err != nil {
		return nil, err
	}
	names, ok := sparseComponents[layout]
	if !ok {
		return nil, malformed("cannot rebuild a sparse tensor with layout %s", layout)
	}
	data, ok := seq(args[1])
	want := len(names) + 1
	if !ok || !(len(data) == want || (layout == "sparse_coo" && len(data) == want+1)) {
		return nil, malformed("%s data is not a %d-tuple", layout, want)
	}
	t := &Tensor{Rebuild: "_rebuild_sparse_tensor", Layout: layout}
	for i, n := range names {
		c, err := asTensor(n, data[i])
		if err != nil {
			return nil, err
		}
		t.Components = append(t.Components, NamedTensor{n, c})
	}
	t.DType = t.Components[len(names)-1].Tensor.DType
	if t.Shape, err = dims(rt, "size", data[len(names)]); err != nil {
		return nil, err
	}
	return &pyTensor{t: t}, nil
}

// rebuildNested is _rebuild_nested_tensor(buffer, sizes, strides, storage_offsets).
func rebuildNested(_ *hookEnv, args []any) (any, error) {
	if err := arity("_rebuild_nested_tensor", args, 4); err != nil {
		return nil, err
	}
	t := &Tensor{Rebuild: "_rebuild_nested_tensor", Layout: "nested"}
	for i, n := range []string{"buffer", "sizes", "strides", "storage_offsets"} {
		c, err := asTensor(n, args[i])
		if err != nil {
			return nil, err
		}
		t.Components = append(t.Components, NamedTensor{n, c})
	}
	t.DType = t.Components[0].Tensor.DType
	return &pyTensor{t: t}, nil
}

// storagelessGeometry fills the dtype, sizes and strides of a tensor that
// has no storage (meta tensors, wrapper subclasses).
func storagelessGeometry(rt *hookEnv, t *Tensor, what string, dtype, size, stride any) error {
	var err error
	if t.DType, err = dtypeArg(dtype); err != nil {
		return err
	}
	if t.Shape, err = dims(rt, "size", size); err != nil {
		return err
	}
	if t.Stride, err = dims(rt, "stride", stride); err != nil {
		return err
	}
	if len(t.Shape) != len(t.Stride) {
		return malformed("%s: %d sizes but %d strides", what, len(t.Shape), len(t.Stride))
	}
	return nil
}

// rebuildMeta is _rebuild_meta_tensor_no_storage(dtype, size, stride, requires_grad).
func rebuildMeta(rt *hookEnv, args []any) (any, error) {
	if err := arity("_rebuild_meta_tensor_no_storage", args, 4); err != nil {
		return nil, err
	}
	t := &Tensor{Rebuild: "_rebuild_meta_tensor_no_storage", Layout: "strided", Device: "meta"}
	err := storagelessGeometry(rt, t, "meta tensor", args[0], args[1], args[2])
	if err != nil {
		return nil, err
	}
	if t.RequiresGrad, err = requiresGrad(args[3]); err != nil {
		return nil, err
	}
	return &pyTensor{t: t}, nil
}

// rebuildWrapperSubclass is _rebuild_wrapper_subclass(cls, dtype, size,
// stride, storage_offset, layout, device, requires_grad).
func rebuildWrapperSubclass(rt *hookEnv, args []any) (any, error) {
	if err := arity("_rebuild_wrapper_subclass", args, 8); err != nil {
		return nil, err
	}
	cls, ok := args[0].(*pyClass)
	if !ok {
		return nil, malformed("wrapper subclass class is %T", args[0])
	}
	t := &Tensor{Rebuild: "_rebuild_wrapper_subclass", Subclass: cls.String()}
	err := storagelessGeometry(rt, t, "wrapper subclass", args[1], args[2], args[3])
	if err != nil {
		return nil, err
	}
	if t.Offset, ok = asInt(args[4]); !ok || t.Offset < 0 {
		return nil, malformed("wrapper subclass storage offset %v", args[4])
	}
	if t.Layout, err = torchGlobalArg("layout", args[5], isLayout); err != nil {
		return nil, err
	}
	if t.Device, err = deviceArg(args[6]); err != nil {
		return nil, err
	}
	if t.RequiresGrad, err = requiresGrad(args[7]); err != nil {
		return nil, err
	}
	return &pyTensor{t: t}, nil
}

// rebuildFromNumpy is _rebuild_device_tensor_from_numpy(ndarray, dtype,
// device, requires_grad). The data lives in the numpy array; the shape is
// taken from its pickled state when that has numpy's layout.
func rebuildFromNumpy(rt *hookEnv, args []any) (any, error) {
	if err := arity("_rebuild_device_tensor_from_numpy", args, 4); err != nil {
		return nil, err
	}
	t := &Tensor{Rebuild: "_rebuild_device_tensor_from_numpy", Layout: "strided"}
	var err error
	if t.DType, err = dtypeArg(args[1]); err != nil {
		return nil, err
	}
	if t.Device, err = deviceArg(args[2]); err != nil {
		return nil, err
	}
	if t.RequiresGrad, err = requiresGrad(args[3]); err != nil {
		return nil, err
	}
	// ndarray state: (version, shape, dtype, is_fortran, data)
	if o, ok := args[0].(*pyObj); ok {
		if st, ok := seq(o.state); ok && len(st) == 5 {
			if shape, err := dims(rt, "shape", st[1]); err == nil {
				t.Shape = shape
			}
		}
	}
	return &pyTensor{t: t}, nil
}

// rebuildFromCPUTensor is _rebuild_device_tensor_from_cpu_tensor(data,
// dtype, device, requires_grad): the CPU tensor's storage, moved to device.
func rebuildFromCPUTensor(_ *hookEnv, args []any) (any, error) {
	if err := arity("_rebuild_device_tensor_from_cpu_tensor", args, 4); err != nil {
		return nil, err
	}
	src, err := asTensor("data", args[0])
	if err != nil {
		return nil, err
	}
	t := *src
	if t.DType, err = dtypeArg(args[1]); err != nil {
		return nil, err
	}
	if t.Device, err = deviceArg(args[2]); err != nil {
		return nil, err
	}
	if t.RequiresGrad, err = requiresGrad(args[3]); err != nil {
		return nil, err
	}
	return &pyTensor{t: &t}, nil
}

// rebuildFromType is _rebuild_from_type(_v2)(func, new_type, args, state):
// func(*args) as an instance of new_type. torch.Tensor keeps the tensor,
// nn.Parameter marks it a parameter, other classes set Subclass. The state
// (Python attributes) is kept in Tensor.Attributes. When func does not
// build a tensor the call is recorded as a *Foreign.
func rebuildFromType(rt *hookEnv, args []any) (any, error) {
	if err := arity("_rebuild_from_type_v2", args, 4); err != nil {
		return nil, err
	}
	fn, ok := args[0].(*pyClass)
	if !ok {
		return nil, malformed("_rebuild_from_type_v2 func is %T", args[0])
	}
	typ, ok := args[1].(*pyClass)
	if !ok {
		return nil, malformed("_rebuild_from_type_v2 type is %T", args[1])
	}
	inner, ok := args[2].(*types.Tuple)
	if !ok {
		return nil, malformed("_rebuild_from_type_v2 args are %T", args[2])
	}
	v, err := fn.Call(*inner...)
	if err != nil {
		return nil, err
	}
	pt, ok := v.(*pyTensor)
	if !ok {
		self := &pyClass{module: "torch._tensor", name: "_rebuild_from_type_v2", kind: kindForeign, rt: rt}
		return &pyObj{cls: self, args: args}, nil
	}
	t := *pt.t
	state := args[3]
	if d, ok := state.(*types.Dict); ok && len(*d) == 0 {
		state = nil
	}
	switch typ.String() {
	case "torch.Tensor", "torch._tensor.Tensor":
	case "torch.nn.parameter.Parameter", "torch.nn.Parameter":
		t.Parameter = true
	default:
		t.Subclass = typ.String()
	}
	return &pyTensor{t: &t, state: state}, nil
}

// newSize is torch.Size(seq): a tuple of non-negative ints.
func newSize(rt *hookEnv, args []any) (any, error) {
	if err := arity("torch.Size", args, 1); err != nil {
		return nil, err
	}
	d, err := dims(rt, "torch.Size", args[0])
	if err != nil {
		return nil, err
	}
	t := make(types.Tuple, len(d))
	for i, n := range d {
		t[i] = int(n)
	}
	return &t, nil
}

// newDevice is torch.device("cuda:1") or torch.device("cuda", 1).
func newDevice(_ *hookEnv, args []any) (any, error) {
	if err := arity("torch.device", args, 1, 2); err != nil {
		return nil, err
	}
	s, ok := args[0].(string)
	if !ok || s == "" {
		return nil, malformed("torch.device type is %v", args[0])
	}
	if len(args) == 2 && args[1] != nil {
		i, ok := args[1].(int)
		if !ok || i < 0 || strings.Contains(s, ":") {
			return nil, malformed("torch.device(%q, %v)", s, args[1])
		}
		s += ":" + strconv.Itoa(i)
	}
	return Device(s), nil
}

// getLayout is torch.serialization._get_layout("torch.sparse_coo").
func getLayout(_ *hookEnv, args []any) (any, error) {
	if err := arity("_get_layout", args, 1); err != nil {
		return nil, err
	}
	s, _ := args[0].(string)
	name, ok := strings.CutPrefix(s, "torch.")
	if !ok || !isLayout(name) {
		return nil, malformed("unknown layout %v", args[0])
	}
	return Global{"torch", name}, nil
}

// decodeLong decodes a LONG4 payload: little-endian two's complement.
func decodeLong(rt *hookEnv, args []any) (any, error) {
	if err := arity("LONG4", args, 1); err != nil {
		return nil, err
	}
	s, _ := args[0].(string)
	if err := rt.charge(len(s)); err != nil {
		return nil, err
	}
	b := make([]byte, len(s))
	for i := range b {
		b[i] = s[len(s)-1-i]
	}
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	if n.IsInt64() && n.Int64() >= math.MinInt && n.Int64() <= math.MaxInt {
		return int(n.Int64()), nil
	}
	return n, nil
}

// legacyTensorDType returns the dtype of torch < 0.4's tensor classes
// (torch.FloatTensor, torch.cuda.LongTensor, ...).
func legacyTensorDType(module, name string) (string, bool) {
	if module != "torch" && module != "torch.cuda" {
		return "", false
	}
	base, ok := strings.CutSuffix(name, "Tensor")
	if !ok {
		return "", false
	}
	d, ok := storageClasses[base+"Storage"]
	return d, ok
}

// pyLegacyTensor is torch < 0.4's pickled tensor: torch.FloatTensor()
// (REDUCE with no arguments), then BUILD with (storage, storage_offset,
// size, stride), which torch's Tensor.__setstate__ applies with set_.
type pyLegacyTensor struct {
	dtype, class string
	rt           *hookEnv
	t            *Tensor
}

func legacyTensorMaker(class, dtype string) hookFunc {
	return func(rt *hookEnv, args []any) (any, error) {
		if len(args) != 0 {
			return nil, malformed("%s called with %d arguments (torch < 0.4 tensors are built empty, then BUILD)", class, len(args))
		}
		return &pyLegacyTensor{dtype: dtype, class: class, rt: rt}, nil
	}
}

// PySetState implements BUILD: Tensor.__setstate__'s legacy form.
func (p *pyLegacyTensor) PySetState(state any) error {
	items, ok := seq(state)
	if !ok || len(items) != 4 {
		return malformed("%s state is not (storage, offset, size, stride)", p.class)
	}
	t, err := stridedTensor(p.rt, p.class+".__setstate__", items)
	if err != nil {
		return err
	}
	if t.Storage.DType != p.dtype {
		return malformed("%s on a %s storage", p.class, cmpOr(t.Storage.DType, "untyped"))
	}
	t.Rebuild = "legacy __setstate__"
	p.t = t
	return nil
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// tensor returns the built tensor; torch.FloatTensor() without state is an
// empty tensor, which has no storage.
func (p *pyLegacyTensor) tensor() *Tensor {
	if p.t == nil {
		p.t = &Tensor{DType: p.dtype, Shape: []int64{0}, Stride: []int64{1}, Layout: "strided",
			Rebuild: "legacy __setstate__", Device: "cpu"}
	}
	return p.t
}
