package pickle

import (
	"github.com/nlpodyssey/gopickle/types"
)

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
	case "torch.nested._internal.nested_tensor.NestedTensor":
		if t.Layout == "jagged" {
			// The state repeats the constructor's values and offsets
			// (and caches): the components say it all.
			return &pyTensor{t: &t}, nil
		}
		t.Subclass = typ.String()
	case "torch.Tensor", "torch._tensor.Tensor":
	case "torch.nn.parameter.Parameter", "torch.nn.Parameter":
		t.Parameter = true
	default:
		t.Subclass = typ.String()
	}
	return &pyTensor{t: &t, state: state}, nil
}
