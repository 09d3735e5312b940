package pickle

import (
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/nlpodyssey/gopickle/types"
)

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
