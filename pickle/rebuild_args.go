package pickle

import (
	"math/big"

	"github.com/nlpodyssey/gopickle/types"
)

// Argument helpers: every hook checks arity and types before use.

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
		return dtypeNames()[g.Name], nil
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
