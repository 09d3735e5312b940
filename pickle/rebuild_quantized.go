package pickle

import (
	"github.com/nlpodyssey/gopickle/types"
)

// rebuildQTensor is _rebuild_qtensor(storage, storage_offset, size, stride,
// quantizer_params, requires_grad, backward_hooks).
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
