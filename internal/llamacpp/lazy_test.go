package llamacpp

import (
	"os"
	"sync"
	"testing"
)

// compiledAtStart names the architectures whose rules were compiled
// before any test ran.
var compiledAtStart []string

func TestMain(m *testing.M) {
	for name, a := range Archs {
		if a.names != nil || a.splits != nil || a.transposed != nil {
			compiledAtStart = append(compiledAtStart, name)
		}
	}
	os.Exit(m.Run())
}

// TestArchsCompiledOnFirstUse: the architectures' rules are not compiled
// when the program starts (they were most of its start-up), are compiled
// once however many goroutines ask at the same time (run with -race),
// and then rename and split as their rules say.
func TestArchsCompiledOnFirstUse(t *testing.T) {
	if len(compiledAtStart) > 0 {
		t.Errorf("rules compiled before first use: %v", compiledAtStart)
	}
	a := Archs["gpt-oss"]
	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Go(func() {
			got[i], _ = a.Rename("model.layers.7.self_attn.q_proj.bias")
			a.Patterns()
		})
	}
	wg.Wait()
	for _, g := range got {
		if g != "blk.7.attn_q.bias" {
			t.Errorf("Rename from a goroutine: %q", g)
		}
	}
	if len(a.Patterns()) != len(a.Names) || len(a.splits) != len(a.Splits) {
		t.Errorf("%d patterns for %d names, %d for %d splits", len(a.Patterns()), len(a.Names), len(a.splits), len(a.Splits))
	}
	if tr := a.Transposed(); tr == nil || !tr.MatchString("blk.3.ffn_up_exps.weight") || tr.MatchString("blk.3.ffn_up_exps.bias") {
		t.Errorf("gpt-oss Transposed: %v", tr)
	}
	if tr := Archs["llama"].Transposed(); tr != nil {
		t.Errorf("llama Transposed: %v, want nil", tr)
	}
	if m := QK().FindStringSubmatch("blk.12.attn_k.bias"); m == nil || m[1] != "k" || QK().MatchString("blk.12.attn_v.weight") {
		t.Errorf("QK: %q", m)
	}
	even, odd, ok := a.SplitOf("model.layers.3.mlp.experts.gate_up_proj")
	if !ok || even != "blk.3.ffn_gate_exps.weight" || odd != "blk.3.ffn_up_exps.weight" {
		t.Errorf("SplitOf: %q %q %v", even, odd, ok)
	}
}
