package statedict

import (
	"strings"

	"github.com/ckpt-dev/ckpt/pickle"
)

// Whole quantized models keep their weights where Module.state_dict() does
// not look for plain tensors; these functions name them as state_dict()
// names them.
//
// A quantized Linear (dynamic or static) has a LinearPackedParams submodule
// whose _packed_params attribute is a torchbind object
// (torch.classes.quantized.LinearPackedParamsBase) pickled as a
// torch.ScriptObject whose state is ((weight, bias), qualified class name).
// state_dict() saves that pair under "<module>._packed_params" (next to
// "<module>.dtype"): the tensors are listed as "<module>._packed_params.0"
// (the quantized weight) and ".1" (the bias), the names a state-dict file of
// the same model gives them.
//
// A quantized Conv1d/2d/3d pickles through its own __getstate__, a tuple
// (in_channels, out_channels, kernel_size, stride, padding, dilation,
// transposed, output_padding, groups, padding_mode, weight, bias, scale,
// zero_point, training): items 10 and 11 are listed as "<module>.weight" and
// "<module>.bias", as state_dict() names them. The scale and zero_point that
// state_dict() adds as tensors are Python numbers in the pickle, part of the
// foreign object.

// packedParamsClass is the qualified name suffix of the torchbind classes
// whose pickled state is ((weight, bias), name).
const packedParamsClass = "torch.classes.quantized.LinearPackedParamsBase"

// walkPackedParams lists the tensors of the packed-params torchbind objects
// among a module's attributes.
func (b *builder) walkPackedParams(state *pickle.Dict, name string) error {
	for _, e := range state.Entries {
		f, ok := e.Value.(*pickle.Foreign)
		if !ok || f.Module != "torch" || f.Name != "ScriptObject" {
			continue
		}
		st, ok := f.State.(*pickle.Tuple)
		if !ok || len(*st) != 2 {
			continue
		}
		cls, _ := (*st)[1].(string)
		payload, ok := (*st)[0].(*pickle.Tuple)
		if !ok || !strings.HasSuffix(cls, packedParamsClass) {
			continue
		}
		if err := b.walk(payload, join(name, pickle.KeyName(e.Key)), true); err != nil {
			return err
		}
	}
	return nil
}

// quantizedConv returns the weight and bias of a quantized convolution
// module pickled through its __getstate__ tuple.
func quantizedConv(f *pickle.Foreign) (w, bias any, ok bool) {
	if !strings.Contains(f.Module, ".quantized.") || !strings.HasPrefix(f.Name, "Conv") {
		return nil, nil, false
	}
	st, isTuple := f.State.(*pickle.Tuple)
	if !isTuple || len(*st) != 15 {
		return nil, nil, false
	}
	if _, isTensor := (*st)[10].(*pickle.Tensor); !isTensor {
		return nil, nil, false
	}
	return (*st)[10], (*st)[11], true
}

// walkQuantizedConv records the convolution module as a foreign object
// and lists its weight and bias (a None bias is skipped, as state_dict()
// keeps it as None).
func (b *builder) walkQuantizedConv(f *pickle.Foreign, w, bias any, name string) error {
	b.ck.Foreign = append(b.ck.Foreign, Object{Name: name, Type: f.Module + "." + f.Name, Value: f})
	if err := b.walk(w, join(name, "weight"), true); err != nil {
		return err
	}
	if bias == nil {
		return nil
	}
	return b.walk(bias, join(name, "bias"), true)
}
