package llamacpp

import "testing"

// TestExpertView: the view's element (e, o, i) is the source's
// (e, i, 2o+parity), as llama.cpp's converter computes
// data.transpose(-1, -2)[:, parity::2, :]; HalfView's element (e, j) is
// (e, 2j+parity), as bias[..., parity::2].
func TestExpertView(t *testing.T) {
	shape, strides := []int64{2, 3, 4}, []int64{12, 4, 1} // [E, in, out], C order
	at := func(s, st []int64, off int64, idx ...int64) int64 {
		for k, x := range idx {
			off += x * st[k]
		}
		return off
	}
	for parity := -1; parity <= 1; parity++ {
		s, st, off, err := ExpertView(shape, strides, parity)
		if err != nil {
			t.Fatal(err)
		}
		outs := int64(4)
		if parity >= 0 {
			outs = 2
		}
		if s[0] != 2 || s[1] != outs || s[2] != 3 {
			t.Fatalf("parity %d: shape %v", parity, s)
		}
		for e := range s[0] {
			for o := range s[1] {
				for i := range s[2] {
					want := at(shape, strides, 0, e, i, o)
					if parity >= 0 {
						want = at(shape, strides, 0, e, i, 2*o+int64(parity))
					}
					if got := at(s, st, off, e, o, i); got != want {
						t.Fatalf("parity %d: (%d,%d,%d) reads %d, want %d", parity, e, o, i, got, want)
					}
				}
			}
		}
	}
	for parity := range 2 {
		s, st, off, err := HalfView([]int64{2, 6}, []int64{6, 1}, parity)
		if err != nil || s[1] != 3 {
			t.Fatal(s, err)
		}
		for e := range int64(2) {
			for j := range int64(3) {
				if got, want := off+e*st[0]+j*st[1], e*6+2*j+int64(parity); got != want {
					t.Fatalf("parity %d: (%d,%d) reads %d, want %d", parity, e, j, got, want)
				}
			}
		}
	}
	if _, _, _, err := ExpertView([]int64{2, 3, 5}, []int64{15, 5, 1}, 0); err == nil {
		t.Error("an odd output count split")
	}
}

// TestArchNames: gpt-oss's post_attention_layernorm is llama.cpp's
// post_attention_norm (the architecture has no ffn_norm), Llama's is
// ffn_norm; gate_up_proj splits, gate first.
func TestArchNames(t *testing.T) {
	const n = "model.layers.3.post_attention_layernorm.weight"
	if got, _ := Archs["gpt-oss"].Rename(n); got != "blk.3.post_attention_norm.weight" {
		t.Errorf("gpt-oss: %s", got)
	}
	if got, _ := Archs["llama"].Rename(n); got != "blk.3.ffn_norm.weight" {
		t.Errorf("llama: %s", got)
	}
	even, odd, ok := Archs["gpt-oss"].SplitOf("model.layers.3.mlp.experts.gate_up_proj")
	if !ok || even != "blk.3.ffn_gate_exps.weight" || odd != "blk.3.ffn_up_exps.weight" {
		t.Errorf("split %q %q %v", even, odd, ok)
	}
	if _, _, ok := Archs["llama"].SplitOf("model.layers.3.mlp.experts.gate_up_proj"); ok {
		t.Error("llama splits gate_up_proj")
	}
}
