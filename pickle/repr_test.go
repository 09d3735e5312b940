package pickle

import (
	"math"
	"math/big"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// TestRepr checks Repr against what Python 3's repr() prints for the same
// values (the expected strings were printed by CPython).
func TestRepr(t *testing.T) {
	one := Tuple{int64(1)}
	cyc := List{nil}
	cyc[0] = &cyc
	cases := []struct {
		v    any
		want string
	}{
		{nil, "None"}, {true, "True"}, {int64(-3), "-3"}, {new(big.Int).Lsh(big.NewInt(1), 70), "1180591620717411303424"},
		{1.0, "1.0"}, {1e16, "1e+16"}, {1e15, "1000000000000000.0"}, {0.0001, "0.0001"}, {1e-05, "1e-05"},
		{1.5e-7, "1.5e-07"}, {123456789.125, "123456789.125"}, {math.Copysign(0, -1), "-0.0"},
		{math.Inf(1), "inf"}, {math.NaN(), "nan"}, {2.5e300, "2.5e+300"}, {1e22, "1e+22"},
		{complex(1, 2), "(1+2j)"}, {complex(0, 1), "1j"}, {complex(-1.5, -2), "(-1.5-2j)"}, {complex(1e20, 1), "(1e+20+1j)"},
		{"it's", `"it's"`}, {`a"b'c`, `'a"b\'c'`}, {"tab\t\x01é\u2028\U0001F600", `'tab\t\x01é\u2028😀'`},
		{[]byte("raw\x00'\xff"), `b"raw\x00'\xff"`}, {[]byte("raw"), "b'raw'"},
		{&Set{Items: []any{int64(1), int64(2), int64(3)}}, "{1, 2, 3}"},
		{&Set{Items: []any{int64(1), int64(2)}, Frozen: true}, "frozenset({1, 2})"},
		{&Set{}, "set()"}, {&Set{Frozen: true}, "frozenset()"},
		{&one, "(1,)"}, {&Tuple{}, "()"}, {&List{"a", 1.5}, "['a', 1.5]"},
		{&Dict{Entries: []DictEntry{{"a", int64(1)}, {[]byte("k"), nil}}}, "{'a': 1, b'k': None}"},
		{&Dict{Class: "collections.OrderedDict", Entries: []DictEntry{{"a", int64(1)}}}, "OrderedDict({'a': 1})"},
		{&cyc, "[[...]]"},
		{Global{"torch", "float32"}, "torch.float32"},
		{Device("cuda:1"), "device(type='cuda', index=1)"}, {Device("cpu"), "device(type='cpu')"},
		{&StorageRef{DType: "float32", Numel: 6, Location: "cpu"}, "<storage float32, 6 elements, cpu>"},
		{&Foreign{Module: "m", Name: "C"}, "<m.C object>"},
	}
	for _, c := range cases {
		if got := Repr(c.v); got != c.want {
			t.Errorf("Repr(%#v) = %s, want %s", c.v, got, c.want)
		}
	}
	long := make(List, 10000)
	for i := range long {
		long[i] = int64(i)
	}
	if got := Repr(&long); len(got) > maxReprLen+3 || !strings.HasSuffix(got, "...") {
		t.Errorf("Repr of a long list is %d bytes, ends %q", len(got), got[len(got)-10:])
	}
}

// TestVMErrorsWithoutGoSyntax: gopickle's own errors dump the offending
// value with %#v; Unpickle's messages must not.
func TestVMErrorsWithoutGoSyntax(t *testing.T) {
	for name, p := range map[string]string{
		"newobj on a dict":     "\x80\x02}q\x00)\x81.",
		"reduce on a list":     "\x80\x02]q\x00)R.",
		"build on an int":      "\x80\x02K\x01}b.",
		"newobj on a global":   "\x80\x02ctorch\nfloat32\n)\x81.",
		"append on a tuple":    "\x80\x02)K\x01a.",
		"setitem on a list":    "\x80\x02]K\x01K\x02s.",
		"obj on a dict":        "\x80\x02(}o.",
		"newobj_ex on a tuple": "\x80\x04)))\x92.",
	} {
		_, err := Unpickle([]byte(p))
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if m := err.Error(); strings.ContainsAny(m, "&{}#") || strings.Contains(m, "types.") || strings.Contains(m, "Py") {
			t.Errorf("%s: message has Go syntax: %s", name, m)
		}
	}
}

// TestReprLongValueCostsWhatIsShown: Repr of a 5 MiB str or bytes value
// quotes only what it shows (it used to quote the whole value, then cut
// it), and shows the same text as quoting everything and cutting.
func TestReprLongValueCostsWhatIsShown(t *testing.T) {
	long := strings.Repeat("a\x01'é", 1<<20)
	for _, v := range []any{long, []byte(long)} {
		full := map[bool]string{true: StrRepr(long), false: BytesRepr([]byte(long))}[reflect.TypeOf(v).Kind() == reflect.String]
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		got := Repr(v)
		runtime.ReadMemStats(&after)
		if want := full[:maxReprLen] + "..."; got != want {
			t.Errorf("%T: %q..., want %q...", v, got[:40], want[:40])
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
			t.Errorf("%T: %d bytes allocated for the repr of %d bytes", v, alloc, len(long))
		}
	}
}
