package lora

import (
	"errors"
	"math"
	"math/rand"
	"testing"
)

func TestParseConfigRefusals(t *testing.T) {
	for _, c := range []struct {
		json string
		want error
	}{
		{`{"peft_type": "IA3", "target_modules": ["k"]}`, ErrNotLoRA},
		{`{"peft_type": "LOHA"}`, ErrNotLoRA},
		{`{"r": 8}`, ErrNotLoRA},
		{`{"peft_type": "LORA", "use_fancy_scaling": true}`, ErrUnsupported},
		{`{"peft_type": "LORA", "layer_replication": [[0, 4]]}`, ErrUnsupported},
		{`{"peft_type": "LORA", "init_lora_weights": "pissa_niter_4"}`, ErrUnsupported},
		{`{"peft_type": "LORA", "loftq_config": {"loftq_bits": 4}}`, ErrUnsupported},
		{`{"peft_type": "LORA", "r": 0}`, ErrConfig},
		{`{"peft_type": "LORA", "bias": "some"}`, ErrConfig},
		{`{"peft_type": "LORA", "rank_pattern": {"q": 2.5}}`, ErrConfig},
		{`{"peft_type": "LORA", "target_modules": 3}`, ErrConfig},
		{`[1]`, ErrConfig},
	} {
		if _, err := ParseConfig([]byte(c.json)); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.json, err, c.want)
		}
	}
	// Unknown keys at their off values, and PEFT's own keys, pass.
	ok := `{"peft_type": "LORA", "use_fancy_scaling": false, "new_thing": null, "other": {}, "layer_replication": null,
		"init_lora_weights": "gaussian", "loftq_config": {}, "lora_dropout": 0.1, "task_type": "CAUSAL_LM"}`
	if _, err := ParseConfig([]byte(ok)); err != nil {
		t.Errorf("%v", err)
	}
}

func TestScalingAndPatterns(t *testing.T) {
	c, err := ParseConfig([]byte(`{"peft_type": "LORA", "r": 8, "lora_alpha": 16,
		"rank_pattern": {"layers.1.q": 2, "q": 4}, "alpha_pattern": {"v$": 3}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		module string
		r      int
		alpha  float64
	}{
		{"model.layers.1.q", 2, 16}, // first key in the file's order wins
		{"model.layers.0.q", 4, 16},
		{"model.layers.0.xq", 8, 16}, // "q" matches only a whole last part
		{"model.layers.0.v", 8, 3},
	} {
		r, alpha, s := c.Scaling(x.module)
		if r != x.r || alpha != x.alpha || s != alpha/float64(r) {
			t.Errorf("%s: r %d alpha %g scale %g, want r %d alpha %g", x.module, r, alpha, s, x.r, x.alpha)
		}
	}
	c.UseRSLoRA = true
	if _, _, s := c.Scaling("model.layers.0.q"); s != 16/2.0 {
		t.Errorf("rsLoRA scale %g, want alpha/sqrt(4) = 8", s)
	}
}

func TestTargets(t *testing.T) {
	for _, x := range []struct {
		cfg    string
		module string
		want   bool
	}{
		{`{"target_modules": ["q_proj"]}`, "model.layers.0.attn.q_proj", true},
		{`{"target_modules": ["q_proj"]}`, "model.layers.0.attn.xq_proj", false},
		{`{"target_modules": ".*\\.(q|v)_proj"}`, "model.layers.0.attn.v_proj", true},
		{`{"target_modules": ".*\\.(q|v)_proj"}`, "q_proj", false},
		{`{"target_modules": ["q_proj"], "exclude_modules": ["layers.1.attn.q_proj"]}`, "model.layers.1.attn.q_proj", false},
		{`{"target_modules": ["q_proj"], "layers_to_transform": [1], "layers_pattern": "layers"}`, "model.layers.1.attn.q_proj", true},
		{`{"target_modules": ["q_proj"], "layers_to_transform": [1], "layers_pattern": "layers"}`, "model.layers.0.attn.q_proj", false},
		{`{"target_modules": ["q_proj"], "layers_to_transform": 0}`, "model.layers.0.attn.q_proj", true},
		{`{"target_modules": ["lm_head"], "modules_to_save": ["lm_head"]}`, "lm_head", false},
		{`{"target_modules": "all-linear"}`, "anything.at.all", true},
	} {
		c, err := ParseConfig([]byte(`{"peft_type": "LORA", ` + x.cfg[1:]))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Targets(x.module); got != x.want {
			t.Errorf("%s: Targets(%s) = %v", x.cfg, x.module, got)
		}
	}
}

// TestAddMatMulT checks the blocked product against a float64 one, on
// shapes with remainders of the 4-column unrolling and the column block.
func TestAddMatMulT(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, sh := range [][3]int{{1, 1, 1}, {3, 5, 2}, {67, 1031, 16}, {130, 7, 3}} {
		m, n, r := sh[0], sh[1], sh[2]
		c, l, rt := make([]float32, m*n), make([]float32, m*r), make([]float32, n*r)
		for _, s := range [][]float32{c, l, rt} {
			for i := range s {
				s[i] = float32(rng.NormFloat64())
			}
		}
		c0 := append([]float32{}, c...)
		AddMatMulT(c, l, rt, m, n, r, 0.75)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var d, mag float64
				for k := 0; k < r; k++ {
					d += float64(l[i*r+k]) * float64(rt[j*r+k])
					mag += math.Abs(float64(l[i*r+k]) * float64(rt[j*r+k]))
				}
				want := float64(c0[i*n+j]) + 0.75*d
				lim := float64(r+2) * (math.Abs(float64(c0[i*n+j])) + 0.75*mag) / (1 << 23)
				if got := float64(c[i*n+j]); math.Abs(got-want) > lim {
					t.Fatalf("%v [%d,%d]: %v, want %v (bound %g)", sh, i, j, got, want, lim)
				}
			}
		}
	}
}

// BenchmarkAddMatMulT: one 4096x4096 weight plus a rank-16 delta (64 MiB
// of float32 read and written).
func BenchmarkAddMatMulT(b *testing.B) {
	const m, n, r = 4096, 4096, 16
	c, l, rt := make([]float32, m*n), make([]float32, m*r), make([]float32, n*r)
	for i := range l {
		l[i] = float32(i%7) * 0.1
	}
	for i := range rt {
		rt[i] = float32(i%5) * 0.1
	}
	b.SetBytes(int64(m * n * 4))
	for i := 0; i < b.N; i++ {
		AddMatMulT(c, l, rt, m, n, r, 0.5)
	}
}
