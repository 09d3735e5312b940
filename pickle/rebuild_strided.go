package pickle

// Rebuild functions of plain strided tensors and parameters.

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
