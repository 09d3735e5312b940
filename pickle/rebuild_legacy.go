package pickle

import (
	"strings"
)

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
	d, ok := storageClasses()[base+"Storage"]
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

// PySetState implements BUILD: Tensor.__setstate__'s legacy forms,
// (storage, offset, size, stride), which torch applies with set_, and a
// torch 0.3 Variable's (data, ?, backward_hooks, requires_grad, ?), which
// torch still reads (1.13 and 2.6 both load the fixtures).
func (p *pyLegacyTensor) PySetState(state any) error {
	items, ok := seq(state)
	if ok && len(items) == 5 {
		data, err := asTensor(p.class+" Variable data", items[0])
		if err != nil {
			return err
		}
		t := *data
		if t.RequiresGrad, err = requiresGrad(items[3]); err != nil {
			return err
		}
		p.t = &t
		return nil
	}
	if !ok || len(items) != 4 {
		return malformed("%s state is not (storage, offset, size, stride)", p.class)
	}
	t, err := stridedTensor(p.rt, p.class+".__setstate__", items)
	if err != nil {
		return err
	}
	if t.Storage.DType != p.dtype {
		// torch.load refuses these too (set_ wants the tensor's dtype).
		return malformed("%s on a %s storage", p.class, cmpOr(t.Storage.DType, "untyped"))
	}
	t.Rebuild = "legacy __setstate__"
	p.t = t
	return nil
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

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}
