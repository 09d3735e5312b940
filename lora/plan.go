package lora

import (
	"fmt"
	"slices"
	"sort"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/statedict"
)

// The kinds of module a delta is merged into, as ModuleReport names them.
const (
	KindLinear      = "linear"                // W (out, in) += s * B @ A
	KindTransposed  = "linear_fan_in_fan_out" // W (in, out) += s * (B @ A).T (GPT-2's Conv1D)
	KindEmbedding   = "embedding"             // W (num, dim) += s * (B @ A).T
	KindConv1x1     = "conv_1x1"              // a 1x1 convolution, as linear
	KindBias        = "lora_bias"             // bias += s * lora_B.bias
	KindReplacement = "replaced"              // modules_to_save or a trained bias, written whole
)

// ModuleReport is one merge into one base tensor.
type ModuleReport struct {
	Tensor  string  `json:"tensor"`  // the base tensor written
	Adapter int     `json:"adapter"` // index in Report.Adapters
	Kind    string  `json:"kind"`    // Kind* above
	Rank    int     `json:"rank,omitempty"`
	Alpha   float64 `json:"alpha,omitempty"`
	Scale   float64 `json:"scale,omitempty"` // PEFT's scaling: alpha/r or alpha/sqrt(r)
	Weight  float64 `json:"weight"`          // the adapter's weight
	DoRA    bool    `json:"dora,omitempty"`  // magnitude and norm applied
	From    string  `json:"from,omitempty"`  // a replacement's tensor in the adapter
}

// AdapterReport is one adapter of a merge.
type AdapterReport struct {
	Path        string  `json:"path"`
	Weight      float64 `json:"weight"`
	R           int     `json:"r"`
	Alpha       float64 `json:"lora_alpha"`
	RSLoRA      bool    `json:"use_rslora"`
	DoRA        bool    `json:"use_dora"`
	FanInFanOut bool    `json:"fan_in_fan_out"`
	Modules     int     `json:"modules"`  // base modules given a delta
	Replaced    int     `json:"replaced"` // base tensors replaced whole
}

// Report is what a merge does, decided by Plan before anything is read.
type Report struct {
	Adapters []AdapterReport `json:"adapters"`
	Merged   int             `json:"tensors_merged"`   // base tensors given deltas
	Replaced int             `json:"tensors_replaced"` // base tensors replaced whole
	Modules  []ModuleReport  `json:"modules"`          // by tensor, then adapter
}

// part is one adapter's contribution to one base tensor.
type part struct {
	kind   string
	m      *module
	repl   *statedict.Tensor
	scale  float64 // scaling * weight
	dora   bool
	rowsOK bool // DoRA's norm over rows (per output of a (out, in) weight); else over columns
}

// Merger merges adapters into the base tensors that convert hands it
// (convert.TensorTransform).
type Merger struct {
	parts  map[string][]part // base tensor name -> contributions, in adapter order
	report *Report
}

// Report returns what the merge does.
func (m *Merger) Report() *Report { return m.report }

// Transforms reports whether t gets a delta or a replacement.
func (m *Merger) Transforms(t *statedict.Tensor) bool { return len(m.parts[t.Name]) > 0 }

// Plan checks every adapter against base and returns the Merger: each
// adapted module must be a target of its config, have its weight (X.weight)
// in base with shapes that fit the configured rank, and each replacement
// must name a base tensor of its shape. PEFT loads adapters with
// strict=False and skips what does not match; Plan refuses instead
// (ErrMissing, ErrShape). DoRA is merged only as the one adapter, at
// weight 1 (add_weighted_adapter has no DoRA rule either); two adapters
// may not both replace the same tensor.
func Plan(base *statedict.Checkpoint, adapters []*Adapter) (*Merger, error) {
	m := &Merger{parts: map[string][]part{}, report: &Report{Adapters: []AdapterReport{}, Modules: []ModuleReport{}}}
	byName := map[string]*statedict.Tensor{}
	for _, t := range base.Tensors {
		byName[t.Name] = t
	}
	for ai, a := range adapters {
		c := a.Config
		if c.UseDoRA && (len(adapters) > 1 || a.Weight != 1) {
			return nil, &Error{Adapter: a.Name, Name: "use_dora", Err: fmt.Errorf("%w: a DoRA adapter is merged alone at weight 1", ErrUnsupported)}
		}
		m.report.Adapters = append(m.report.Adapters, AdapterReport{Path: a.Name, Weight: a.Weight, R: c.R, Alpha: c.Alpha,
			RSLoRA: c.UseRSLoRA, DoRA: c.UseDoRA, FanInFanOut: c.FanInFanOut, Modules: len(a.modules), Replaced: len(a.replace)})
		for _, name := range a.moduleNames() {
			mo := a.modules[name]
			if !c.Targets(name) {
				return nil, &Error{Adapter: a.Name, Name: name, Err: fmt.Errorf("%w: the module is not one of the config's target_modules; PEFT would skip its weights, ckpt refuses", ErrMissing)}
			}
			w := byName[name+".weight"]
			if w == nil {
				return nil, &Error{Adapter: a.Name, Name: name, Err: fmt.Errorf("%w: the base has no %s.weight (PEFT loads with strict=False and would ignore the module; ckpt refuses)", ErrMissing, name)}
			}
			p, rep, err := planModule(a, mo, w)
			if err != nil {
				return nil, err
			}
			rep.Adapter = ai
			m.add(w.Name, p, rep)
			if mo.biasB != nil {
				bias := byName[name+".bias"]
				if bias == nil {
					return nil, &Error{Adapter: a.Name, Name: name, Err: fmt.Errorf("%w: lora_bias needs %s.bias in the base", ErrMissing, name)}
				}
				if err := checkBase(a, bias); err != nil {
					return nil, err
				}
				if !slices.Equal(mo.biasB.Shape, bias.Shape) {
					return nil, &Error{Adapter: a.Name, Name: mo.biasB.Name, Err: fmt.Errorf("%w: %v, the base's bias is %v", ErrShape, mo.biasB.Shape, bias.Shape)}
				}
				m.add(bias.Name, part{kind: KindBias, m: mo, scale: p.scale},
					ModuleReport{Tensor: bias.Name, Adapter: ai, Kind: KindBias, Rank: rep.Rank, Alpha: rep.Alpha, Scale: rep.Scale, Weight: a.Weight})
			}
		}
		for _, name := range a.replaceNames() {
			src := a.replace[name]
			t := byName[name]
			if t == nil {
				return nil, &Error{Adapter: a.Name, Name: src.Name, Err: fmt.Errorf("%w: the base has no %s to replace", ErrMissing, name)}
			}
			if err := checkBase(a, t); err != nil {
				return nil, err
			}
			if !slices.Equal(src.Shape, t.Shape) {
				return nil, &Error{Adapter: a.Name, Name: src.Name, Err: fmt.Errorf("%w: %v replaces %s of %v", ErrShape, src.Shape, name, t.Shape)}
			}
			m.add(name, part{kind: KindReplacement, repl: src}, ModuleReport{Tensor: name, Adapter: ai, Kind: KindReplacement, Weight: a.Weight, From: src.Name})
		}
	}
	for name, ps := range m.parts {
		repl := 0
		for _, p := range ps {
			if p.kind == KindReplacement {
				repl++
			}
		}
		if repl > 0 && len(ps) > 1 {
			return nil, fmt.Errorf("lora: %q: %w: %d adapters write it (a tensor replaced whole takes no other adapter)", name, ErrUnsupported, len(ps))
		}
		if repl > 0 {
			m.report.Replaced++
		} else {
			m.report.Merged++
		}
	}
	sort.SliceStable(m.report.Modules, func(i, j int) bool { return m.report.Modules[i].Tensor < m.report.Modules[j].Tensor })
	return m, nil
}

func (m *Merger) add(name string, p part, r ModuleReport) {
	m.parts[name] = append(m.parts[name], p)
	m.report.Modules = append(m.report.Modules, r)
}

// checkBase refuses a base tensor the merge cannot write.
func checkBase(a *Adapter, t *statedict.Tensor) error {
	if t.Storage == nil || t.Meta || !t.DType.IsFloat() || t.DType.Size() > 4 || t.Layout != "" && t.Layout != statedict.Strided {
		return &Error{Adapter: a.Name, Name: t.Name, Err: fmt.Errorf("%w: the base tensor is %s %s; merges go into dense float32, float16, bfloat16 or float8 tensors", ErrUnsupported, t.Layout, t.DType)}
	}
	return nil
}

// planModule checks one module's LoRA tensors against its base weight w.
func planModule(a *Adapter, mo *module, w *statedict.Tensor) (part, ModuleReport, error) {
	c := a.Config
	r, alpha, scale := c.Scaling(mo.name)
	rep := ModuleReport{Tensor: w.Name, Rank: r, Alpha: alpha, Scale: scale, Weight: a.Weight, DoRA: mo.magnitude != nil}
	fail := func(t *statedict.Tensor, format string, args ...any) (part, ModuleReport, error) {
		return part{}, rep, &Error{Adapter: a.Name, Name: t.Name, Err: fmt.Errorf("%w: "+format, append([]any{ErrShape}, args...)...)}
	}
	if err := checkBase(a, w); err != nil {
		return part{}, rep, err
	}
	ws, as, bs := matrix(w.Shape), matrix(mo.a.Shape), matrix(mo.b.Shape)
	if ws == nil || as == nil || bs == nil {
		if len(w.Shape) > 2 {
			return part{}, rep, &Error{Adapter: a.Name, Name: w.Name, Err: fmt.Errorf("%w: a convolution of kernel %v (only 1x1 kernels are merged)", ErrUnsupported, w.Shape[2:])}
		}
		return fail(mo.a, "lora_A %v, lora_B %v, base %v: not matrices", mo.a.Shape, mo.b.Shape, w.Shape)
	}
	p := part{m: mo, scale: scale * a.Weight, dora: mo.magnitude != nil}
	var out, in int64 // the weight's (out, in) as PEFT's B @ A gives it
	switch {
	case mo.embedding:
		p.kind, out, in = KindEmbedding, ws[1], ws[0] // W (num, dim); B @ A is (dim, num)
	case c.FanInFanOut:
		p.kind, out, in = KindTransposed, ws[1], ws[0]
	case len(w.Shape) == 4:
		p.kind, out, in = KindConv1x1, ws[0], ws[1]
		p.rowsOK = true
	default:
		p.kind, out, in = KindLinear, ws[0], ws[1]
		p.rowsOK = true
	}
	rep.Kind = p.kind
	if as[0] != int64(r) || bs[1] != int64(r) {
		return fail(mo.a, "lora_A %v and lora_B %v, but the config's rank for %s is %d", mo.a.Shape, mo.b.Shape, mo.name, r)
	}
	if as[1] != in || bs[0] != out {
		return fail(mo.b, "B @ A is (%d, %d), the base weight %v wants (%d, %d)", bs[0], as[1], w.Shape, out, in)
	}
	if mo.magnitude != nil {
		if mo.magnitude.NumEl() != out {
			return fail(mo.magnitude, "lora_magnitude_vector %v for %d outputs", mo.magnitude.Shape, out)
		}
	}
	return p, rep, nil
}

// matrix returns a shape as (rows, cols) when it is 2-D, or 4-D with 1x1
// trailing dimensions (a 1x1 convolution); nil otherwise.
func matrix(s []int64) []int64 {
	switch {
	case len(s) == 2:
		return s
	case len(s) == 4 && s[2] == 1 && s[3] == 1:
		return s[:2]
	}
	return nil
}

// floats reads a tensor's values as float32.
func floats(t *statedict.Tensor) ([]float32, error) {
	b, err := t.ReadAll()
	if err != nil {
		return nil, err
	}
	v := make([]float32, t.NumEl())
	if int64(len(b)) != t.NumEl()*int64(t.DType.Size()) {
		return nil, fmt.Errorf("%w: %d bytes for %d %s elements", ErrShape, len(b), t.NumEl(), t.DType)
	}
	dtype.DecodeFloat32(t.DType, v, b) // bfloat16 with AVX2 where the CPU has it
	return v, nil
}
