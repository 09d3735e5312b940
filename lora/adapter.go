package lora

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/ckpt-dev/ckpt/statedict"
)

// Adapter is one PEFT LoRA adapter: its config, its tensors grouped by
// the base module they adapt, and the weight it is merged with.
type Adapter struct {
	Name   string  // how messages and the report name it (its path)
	Config *Config // adapter_config.json
	Weight float64 // w in W + sum of w * delta

	modules map[string]*module           // base module name -> LoRA tensors
	replace map[string]*statedict.Tensor // base tensor name -> replacement
}

// module is the LoRA tensors of one base module.
type module struct {
	name      string
	a, b      *statedict.Tensor // lora_A / lora_B weights, or lora_embedding_A / B
	embedding bool
	magnitude *statedict.Tensor // lora_magnitude_vector (DoRA)
	biasB     *statedict.Tensor // lora_B.bias (lora_bias)
}

// PEFT's saved names, after the prefix (base_model.model.) is removed:
// the adapter's name ("default") may still be in them when a tool saved
// the model's own state dict.
type peftKeys struct{ linear, embed, mag, saved *regexp.Regexp }

// peftNames compiles peftKeys on first use (NewAdapter), not at start-up.
var peftNames = sync.OnceValue(func() peftKeys {
	return peftKeys{
		linear: regexp.MustCompile(`^(.+)\.lora_([AB])(?:\.[^.]+)?\.(weight|bias)$`),
		embed:  regexp.MustCompile(`^(.+)\.lora_embedding_([AB])(?:\.[^.]+)?$`),
		mag:    regexp.MustCompile(`^(.+)\.lora_magnitude_vector(?:\.[^.]+)?(?:\.weight)?$`),
		saved:  regexp.MustCompile(`^(.+)\.modules_to_save(?:\.[^.]+)?\.([^.]+)$`),
	}
})

// Prefix is the prefix PEFT's saved names carry before the base model's.
const Prefix = "base_model.model."

// NewAdapter groups the tensors of an adapter checkpoint ck (its
// adapter_model.safetensors or .bin) by the base module they adapt, as
// PEFT names them: X.lora_A.weight, X.lora_B.weight (and .bias),
// X.lora_embedding_A/B, X.lora_magnitude_vector, each with or without the
// adapter's name before the last part, under the base_model.model.
// prefix. Other tensors (modules_to_save, trained biases) replace the
// base tensor of the same name whole. name is for messages.
func NewAdapter(name string, cfg *Config, ck *statedict.Checkpoint, weight float64) (*Adapter, error) {
	a := &Adapter{Name: name, Config: cfg, Weight: weight, modules: map[string]*module{}, replace: map[string]*statedict.Tensor{}}
	mod := func(n string) *module {
		m := a.modules[n]
		if m == nil {
			m = &module{name: n}
			a.modules[n] = m
		}
		return m
	}
	set := func(slot **statedict.Tensor, t *statedict.Tensor) error {
		if *slot != nil {
			return &Error{Adapter: name, Name: t.Name, Err: fmt.Errorf("%w: %s is given twice", ErrMissing, (*slot).Name)}
		}
		*slot = t
		return nil
	}
	re := peftNames()
	for _, t := range ck.Tensors {
		key := strings.TrimPrefix(t.Name, Prefix)
		if t.Storage == nil || t.Meta || t.Component != "" || t.Layout != "" && t.Layout != statedict.Strided || !t.DType.IsFloat() {
			return nil, &Error{Adapter: name, Name: t.Name, Err: fmt.Errorf("%w: not a dense floating tensor", ErrUnsupported)}
		}
		var err error
		switch {
		case re.linear.MatchString(key):
			m := re.linear.FindStringSubmatch(key)
			mo := mod(m[1])
			switch {
			case m[2] == "A" && m[3] == "weight":
				err = set(&mo.a, t)
			case m[2] == "B" && m[3] == "weight":
				err = set(&mo.b, t)
			case m[2] == "B":
				err = set(&mo.biasB, t)
			default:
				err = &Error{Adapter: name, Name: t.Name, Err: fmt.Errorf("%w: lora_A has no bias in PEFT", ErrUnsupported)}
			}
		case re.embed.MatchString(key):
			m := re.embed.FindStringSubmatch(key)
			mo := mod(m[1])
			mo.embedding = true
			if m[2] == "A" {
				err = set(&mo.a, t)
			} else {
				err = set(&mo.b, t)
			}
		case re.mag.MatchString(key):
			err = set(&mod(re.mag.FindStringSubmatch(key)[1]).magnitude, t)
		case strings.Contains(key, "lora_"):
			err = &Error{Adapter: name, Name: t.Name, Err: fmt.Errorf("%w: a LoRA tensor ckpt does not know", ErrUnsupported)}
		default:
			if m := re.saved.FindStringSubmatch(key); m != nil {
				key = m[1] + "." + m[2]
			}
			if a.replace[key] != nil {
				err = &Error{Adapter: name, Name: t.Name, Err: fmt.Errorf("%w: %s is given twice", ErrMissing, key)}
			}
			a.replace[key] = t
		}
		if err != nil {
			return nil, err
		}
	}
	for _, n := range a.moduleNames() {
		m := a.modules[n]
		if m.a == nil || m.b == nil {
			return nil, &Error{Adapter: name, Name: n, Err: fmt.Errorf("%w: the module has lora_B without lora_A or the reverse", ErrMissing)}
		}
		if (m.magnitude != nil) != cfg.UseDoRA {
			return nil, &Error{Adapter: name, Name: n, Err: fmt.Errorf("%w: use_dora is %v but the module has%s lora_magnitude_vector", ErrMissing, cfg.UseDoRA, map[bool]string{true: "", false: " no"}[m.magnitude != nil])}
		}
		if m.biasB != nil && !cfg.LoRABias {
			return nil, &Error{Adapter: name, Name: n, Err: fmt.Errorf("%w: lora_B has a bias but lora_bias is false", ErrMissing)}
		}
	}
	return a, nil
}

// moduleNames returns the adapted modules' names, sorted.
func (a *Adapter) moduleNames() []string {
	out := make([]string, 0, len(a.modules))
	for n := range a.modules {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// replaceNames returns the names of the base tensors the adapter
// replaces whole, sorted.
func (a *Adapter) replaceNames() []string {
	out := make([]string, 0, len(a.replace))
	for n := range a.replace {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
