package pickle

import (
	"math/big"
	"testing"
)

func TestKeyName(t *testing.T) {
	for _, c := range []struct {
		k    any
		want string
	}{
		{"w", "w"}, {int64(3), "3"}, {big.NewInt(-7), "-7"}, {true, "True"}, {nil, "None"}, {1.5, "1.5"},
		{[]byte("b"), "b'b'"}, {2.0, "2.0"}, {&Set{Items: []any{int64(1)}, Frozen: true}, "frozenset({1})"}, {&Tuple{"k", int64(1)}, "('k', 1)"}, {&Tuple{int64(2)}, "(2,)"},
	} {
		if got := KeyName(c.k); got != c.want {
			t.Errorf("KeyName(%#v) = %q, want %q", c.k, got, c.want)
		}
	}
}
