package quant

import (
	"errors"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// TestBnB4Upstream: NF4 and FP4, plain and nested absmax, a ragged last
// block, equal to bitsandbytes' default-backend dequantize_4bit (float32
// bit for bit, and after rounding to the state's dtype).
func TestBnB4Upstream(t *testing.T) {
	f := loadFixture(t, "bnb")
	for name, c := range f.cases() {
		t.Run(name, func(t *testing.T) {
			p := "w_" + name + ".weight"
			qt := "nf4"
			if name[:3] == "fp4" {
				qt = "fp4"
			}
			st, err := ParseBnB4State(p, f.get(p+".quant_state.bitsandbytes__"+qt).Data)
			if err != nil {
				t.Fatal(err)
			}
			var na, nm *CodecTensor
			var nad, nmd []byte
			if c["nested"].(bool) {
				a, m := f.ct(p+".nested_absmax"), f.ct(p+".nested_quant_map")
				na, nm, nad, nmd = &a, &m, f.get(a.Name).Data, f.get(m.Name).Data
			}
			l, err := CheckBnB4(st, f.ct(p), f.ct(p+".absmax"), na, nm)
			if err != nil {
				t.Fatal(err)
			}
			w, a := f.get(p).Data, f.get(p+".absmax").Data
			checkExact(t, f, name+".", dequantAll(t, l.Rows(), l.Cols(), func(dst []float32, r0, r1 int) error { return l.DequantRows(dst, w, a, nad, nmd, r0, r1) }))
			// the stored quant_map is bitsandbytes' table, which the codec has built in
			for i, v := range f.floats(p + ".quant_map") {
				if l.code[i] != v {
					t.Fatalf("code %d: built in %g, stored %g", i, l.code[i], v)
				}
			}
		})
	}
}

// TestInt8Upstream: LLM.int8 weight * SCB * (1/127) as bitsandbytes'
// int8_vectorwise_dequant computes it.
func TestInt8Upstream(t *testing.T) {
	f := loadFixture(t, "bnb")
	l, err := CheckInt8(f.ct("int8.weight"), f.ct("int8.SCB"))
	if err != nil {
		t.Fatal(err)
	}
	w, s := f.get("int8.weight").Data, f.get("int8.SCB").Data
	checkExact(t, f, "int8.", dequantAll(t, l.Rows, l.Cols, func(dst []float32, r0, r1 int) error { return l.DequantRows(dst, w, s, r0, r1) }))
}

func TestBnBLayoutErrors(t *testing.T) {
	ct := func(name string, d dtype.DType, s ...int64) CodecTensor { return CodecTensor{name, d, s} }
	st := BnB4State{QuantType: "nf4", Blocksize: 64, DType: "bfloat16", Shape: []int64{7, 30}}
	w, a := ct("w", dtype.Uint8, 105, 1), ct("a", dtype.Float32, 4)
	if _, err := CheckBnB4(st, w, a, nil, nil); err != nil {
		t.Fatal(err)
	}
	bad := func(mut func(*BnB4State)) BnB4State { s := st; mut(&s); return s }
	na, nm := ct("na", dtype.Float32, 1), ct("nm", dtype.Float32, 256)
	for i, c := range []struct {
		st     BnB4State
		w, a   CodecTensor
		na, nm *CodecTensor
	}{
		{bad(func(s *BnB4State) { s.QuantType = "int4" }), w, a, nil, nil},
		{bad(func(s *BnB4State) { s.Blocksize = 0 }), w, a, nil, nil},
		{bad(func(s *BnB4State) { s.Shape = []int64{7, 31} }), w, a, nil, nil},
		{bad(func(s *BnB4State) { s.Shape = []int64{-7, 30} }), w, a, nil, nil},
		{st, w, ct("a", dtype.Float32, 5), nil, nil},
		{st, w, ct("a", dtype.Uint8, 4), nil, nil},
		{st, w, ct("a", dtype.Uint8, 4), &na, nil},
		{st, w, ct("a", dtype.Uint8, 4), &na, &nm}, // nested_blocksize 0
		{bad(func(s *BnB4State) { s.NestedBlocksize, s.NestedDType = 256, "float32" }), w, ct("a", dtype.Uint8, 4), &na, &CodecTensor{"nm", dtype.Float32, []int64{255}}},
	} {
		if _, err := CheckBnB4(c.st, c.w, c.a, c.na, c.nm); !errors.Is(err, ErrCodecLayout) {
			t.Errorf("case %d: %v, want a layout error", i, err)
		}
	}
	if _, err := ParseBnB4State("w", []byte("{\"blocksize\": \"x\"}")); !errors.Is(err, ErrCodecLayout) {
		t.Errorf("bad JSON: %v", err)
	}
	if _, err := CheckInt8(ct("w", dtype.Int8, 4, 8), ct("s", dtype.Float32, 5)); !errors.Is(err, ErrCodecLayout) {
		t.Errorf("SCB of the wrong shape: %v", err)
	}
}

func FuzzBnB4(f *testing.F) {
	f.Add([]byte(`{"quant_type":"nf4","blocksize":64,"dtype":"bfloat16","shape":[7,30]}`), []byte{105, 1}, []byte{4}, false, []byte{1})
	f.Add([]byte(`{"quant_type":"fp4","blocksize":64,"shape":[7,30],"nested_blocksize":256,"nested_dtype":"float32","nested_offset":0.5}`), []byte{105, 1}, []byte{4}, true, []byte{0xff, 0x7f})
	f.Fuzz(func(t *testing.T, js, ws, as []byte, nested bool, data []byte) {
		st, err := ParseBnB4State("w", js)
		if err != nil {
			return
		}
		ad := dtype.Float32
		var na, nm *CodecTensor
		if nested {
			ad = dtype.Uint8
			na, nm = &CodecTensor{"na", dtype.Float32, []int64{1}}, &CodecTensor{"nm", dtype.Float32, []int64{256}}
		}
		l, err := CheckBnB4(st, CodecTensor{"w", dtype.Uint8, fuzzShape(ws)}, CodecTensor{"a", ad, fuzzShape(as)}, na, nm)
		if err != nil {
			return
		}
		fill := func(n int) []byte { return fuzzFill(data, n) }
		var nad, nmd []byte
		an := l.Blocks * 4
		if nested {
			an, nad, nmd = l.Blocks, fill(4*codecCeilDiv(l.Blocks, st.NestedBlocksize)), fill(1024)
		}
		dst := make([]float32, l.Elems)
		if err := l.DequantRows(dst, fill(codecCeilDiv(l.Elems, 2)), fill(an), nad, nmd, 0, l.Rows()); err != nil {
			t.Fatal(err)
		}
	})
}

func BenchmarkBnB4(b *testing.B) {
	const rows, cols = 1024, 4096
	st := BnB4State{QuantType: "nf4", Blocksize: 64, Shape: []int64{rows, cols}, NestedBlocksize: 256, NestedDType: "float32"}
	nb := rows * cols / 64
	na, nm := CodecTensor{"na", dtype.Float32, []int64{int64(nb / 256)}}, CodecTensor{"nm", dtype.Float32, []int64{256}}
	l, err := CheckBnB4(st, CodecTensor{"w", dtype.Uint8, []int64{rows * cols / 2, 1}}, CodecTensor{"a", dtype.Uint8, []int64{int64(nb)}}, &na, &nm)
	if err != nil {
		b.Fatal(err)
	}
	w, a, nad, nmd := make([]byte, rows*cols/2), make([]byte, nb), make([]byte, nb/256*4), make([]byte, 1024)
	benchRows(b, rows, cols, len(w)+len(a), func(dst []float32, r0, r1 int) error { return l.DequantRows(dst, w, a, nad, nmd, r0, r1) })
}
