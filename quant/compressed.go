package quant

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/ckpt-dev/ckpt/dtype"
)

// compressed-tensors (vllm-project/compressed-tensors), as llm-compressor
// saves it: quantization_config {quant_method: "compressed-tensors",
// format, config_groups: {NAME: {targets, weights, format?}}, ignore}.
// A quantized module M stores M.weight_scale beside its codes; which
// config group applies to M follows utils/match.py: a target is M's exact
// name, a "re:" regular expression matched at the start of the name
// (Python's re.match), or a class name; exact names win over regexes, and
// regexes over class names. ckpt has no model, so a class name target
// ("Linear") matches every module with a 2-D quantized weight. A module
// the ignore list names (exactly or by "re:") is not quantized. Each
// format's codec plugs in with RegisterCompressed; this file reads
// float-quantized (FP8 codes, scales per tensor, channel, group or block,
// dequantized as quantization/lifecycle/forward.py's _dequantize does:
// x_q.to(scale.dtype) * scale, so in the scale's dtype).

func init() {
	Register("compressed-tensors", parseCompressed)
	RegisterCompressed("float-quantized", floatQuantized)
}

// WeightArgs are a config group's "weights" quantization arguments.
type WeightArgs struct {
	NumBits        int             `json:"num_bits"`
	Type           string          `json:"type"`     // "float", "int"
	Strategy       string          `json:"strategy"` // "tensor", "channel", "group", "block", "tensor_group"
	GroupSize      int64           `json:"group_size"`
	BlockStructure json.RawMessage `json:"block_structure"` // [bh, bw] (older files: "BHxBW")
	Symmetric      *bool           `json:"symmetric"`
	Actorder       json.RawMessage `json:"actorder"`
}

// CompressedModule is one module a compressed-tensors config group
// quantizes, as a format's codec receives it.
type CompressedModule struct {
	Prefix  string            // the module's name with its trailing dot: "model.layers.0.mlp.up_proj."
	Args    WeightArgs        // the group's weights arguments
	Format  string            // the group's (or the config's) format
	DType   dtype.DType       // logical dtype
	Tensors map[string]Stored // every stored tensor, by name
}

// CompressedFormat builds the group of one module for a compressed-tensors format.
type CompressedFormat func(m CompressedModule) (*Group, error)

var (
	ctMu      sync.RWMutex
	ctFormats = map[string]CompressedFormat{}
)

// RegisterCompressed makes a compressed-tensors format known. It panics
// when the format is registered twice.
func RegisterCompressed(format string, f CompressedFormat) {
	ctMu.Lock()
	defer ctMu.Unlock()
	if _, dup := ctFormats[format]; dup {
		panic("quant: RegisterCompressed called twice for " + format)
	}
	ctFormats[format] = f
}

type ctGroup struct {
	name    string
	targets []string
	weights *WeightArgs
	format  string
}

type ctLayout struct {
	format string
	groups []ctGroup
	ignore []string
	res    map[string]*regexp.Regexp
	dt     dtype.DType
}

func parseCompressed(cfg Config) (Layout, error) {
	var q struct {
		Format       string `json:"format"`
		ConfigGroups map[string]struct {
			Targets []string    `json:"targets"`
			Weights *WeightArgs `json:"weights"`
			Format  string      `json:"format"`
		} `json:"config_groups"`
		Ignore []string `json:"ignore"`
	}
	if err := json.Unmarshal(cfg.Raw, &q); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	l := &ctLayout{format: q.Format, ignore: q.Ignore, res: map[string]*regexp.Regexp{}, dt: cfg.DType}
	names := make([]string, 0, len(q.ConfigGroups))
	for n := range q.ConfigGroups {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		g := q.ConfigGroups[n]
		if g.Weights == nil {
			continue // activations only: weights stay as they are
		}
		f := g.Format
		if f == "" {
			f = q.Format
		}
		l.groups = append(l.groups, ctGroup{name: n, targets: g.Targets, weights: g.Weights, format: f})
	}
	for _, t := range append(append([]string{}, q.Ignore...), allTargets(l.groups)...) {
		if p, ok := strings.CutPrefix(t, "re:"); ok {
			re, err := regexp.Compile("^(?:" + p + ")")
			if err != nil {
				return nil, fmt.Errorf("%w: target %q: ckpt's regular expressions (RE2) cannot read it: %v", ErrUnknownLayout, t, err)
			}
			l.res[t] = re
		}
	}
	return l, nil
}

func allTargets(gs []ctGroup) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.targets...)
	}
	return out
}

// matchName is compressed-tensors' match_name: "re:" regexes matched at
// the start, other targets exactly.
func (l *ctLayout) matchName(name, target string) bool {
	if re := l.res[target]; re != nil {
		return re.MatchString(name)
	}
	return name == target
}

// isClass reports whether a target names a module class ("Linear") rather than a module.
func isClass(t string) bool {
	return !strings.HasPrefix(t, "re:") && !strings.Contains(t, ".") && t != "" && t[0] >= 'A' && t[0] <= 'Z'
}

// groupFor picks the config group of module name: exact name, then
// regex, then class targets; among equals, config_groups in name order.
func (l *ctLayout) groupFor(name string) *ctGroup {
	for pass := 0; pass < 3; pass++ {
		for i := range l.groups {
			for _, t := range l.groups[i].targets {
				re := strings.HasPrefix(t, "re:")
				ok := false
				switch pass {
				case 0:
					ok = !re && !isClass(t) && t == name
				case 1:
					ok = re && l.matchName(name, t)
				case 2:
					ok = isClass(t) // ckpt has no model: a class matches any quantized module
				}
				if ok {
					return &l.groups[i]
				}
			}
		}
	}
	return nil
}

func (l *ctLayout) ignored(name string) bool {
	for _, t := range l.ignore {
		if l.matchName(name, t) {
			return true
		}
	}
	return false
}

func (l *ctLayout) Plan(tensors []Stored) ([]*Group, error) {
	byName := indexStored(tensors)
	var groups []*Group
	for _, t := range tensors {
		prefix, ok := strings.CutSuffix(t.Name, "weight_scale")
		if !ok || (prefix != "" && !strings.HasSuffix(prefix, ".")) {
			continue
		}
		module := strings.TrimSuffix(prefix, ".")
		if l.ignored(module) {
			continue
		}
		g := l.groupFor(module)
		if g == nil {
			continue
		}
		scheme := "compressed-tensors " + g.format
		f := lookupCompressed(g.format)
		if f == nil {
			return nil, &Error{Scheme: scheme, Tensor: prefix + "weight", Err: fmt.Errorf("%w: ckpt does not dequantize format %q (config group %s; --raw keeps the stored tensors)", ErrUnknownScheme, g.format, g.name)}
		}
		grp, err := f(CompressedModule{Prefix: prefix, Args: *g.weights, Format: g.format, DType: l.dt, Tensors: byName})
		if err != nil {
			return nil, withScheme(err, scheme, prefix+"weight")
		}
		grp.Consumed = append(grp.Consumed, activationScales(byName, prefix+"weight")...)
		groups = append(groups, grp)
	}
	return groups, nil
}

func lookupCompressed(format string) CompressedFormat {
	ctMu.RLock()
	defer ctMu.RUnlock()
	return ctFormats[format]
}

// floatQuantized reads compressed-tensors' float-quantized format: FP8
// codes in M.weight, scales in M.weight_scale.
func floatQuantized(m CompressedModule) (*Group, error) {
	a := m.Args
	w, ok := m.Tensors[m.Prefix+"weight"]
	if !ok {
		return nil, fmt.Errorf("%w: %sweight_scale without %sweight", ErrMissingCompanion, m.Prefix, m.Prefix)
	}
	if a.Type != "" && a.Type != "float" || a.NumBits != 0 && a.NumBits != 8 {
		return nil, fmt.Errorf("%w: float-quantized with %s weights of %d bits (8-bit float is read)", ErrUnknownLayout, a.Type, a.NumBits)
	}
	if _, ok := m.Tensors[m.Prefix+"weight_zero_point"]; ok {
		return nil, fmt.Errorf("%w: float-quantized weight with weight_zero_point (ckpt reads symmetric float quantization)", ErrUnknownLayout)
	}
	s := m.Tensors[m.Prefix+"weight_scale"]
	if len(w.Shape) != 2 {
		return nil, fmt.Errorf("%w: weight of shape %s: a 2-D weight is expected", ErrUnknownLayout, shapeText(w.Shape))
	}
	rows, cols := w.Shape[0], w.Shape[1]
	var bh, bw int64
	var desc string
	switch a.Strategy {
	case "tensor":
		bh, bw, desc = rows, cols, "per tensor"
	case "channel":
		bh, bw, desc = 1, cols, "per channel"
	case "group":
		if a.GroupSize <= 0 || a.GroupSize > maxBlock {
			return nil, fmt.Errorf("%w: group_size %d", ErrUnknownLayout, a.GroupSize)
		}
		if cols >= a.GroupSize && cols%a.GroupSize != 0 {
			return nil, fmt.Errorf("%w: %d columns are not a multiple of group_size %d (compressed-tensors refuses them too)", ErrUnknownLayout, cols, a.GroupSize)
		}
		bh, bw, desc = 1, a.GroupSize, fmt.Sprintf("groups of %d", a.GroupSize)
	case "block":
		b, err := blockStructure(a.BlockStructure)
		if err != nil {
			return nil, err
		}
		bh, bw, desc = b[0], b[1], fmt.Sprintf("%dx%d blocks", b[0], b[1])
	default:
		return nil, fmt.Errorf("%w: float-quantized weights with strategy %q", ErrUnknownLayout, a.Strategy)
	}
	c, err := newGrid(w, s, bh, bw, s.DType)
	if err != nil {
		return nil, err
	}
	g := &Group{Name: w.Name, DType: m.DType, Shape: w.Shape, Weight: w, Companions: []Stored{s}, Codec: c}
	if gi, ok := m.Tensors[m.Prefix+"weight_g_idx"]; ok {
		if a.Strategy != "group" {
			g.Consumed = append(g.Consumed, gi.Name) // upstream reads it for groups only
		} else {
			if g.Codec, err = newGIdxCodec(c, gi); err != nil {
				return nil, err
			}
			g.Companions = append(g.Companions, gi)
			desc += ", activation order in weight_g_idx"
		}
	}
	g.Scheme = fmt.Sprintf("compressed-tensors float-quantized %s, %s, scales in weight_scale", f8Name(w.DType), desc)
	return g, nil
}

// blockStructure reads [bh, bw] or the older "BHxBW".
func blockStructure(raw json.RawMessage) ([2]int64, error) {
	var b []int64
	if err := json.Unmarshal(raw, &b); err != nil {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return [2]int64{}, fmt.Errorf("%w: block_structure %s", ErrUnknownLayout, string(raw))
		}
		var h, w int64
		if _, err := fmt.Sscanf(s, "%dx%d", &h, &w); err != nil {
			return [2]int64{}, fmt.Errorf("%w: block_structure %q", ErrUnknownLayout, s)
		}
		b = []int64{h, w}
	}
	if len(b) != 2 || b[0] <= 0 || b[1] <= 0 || b[0] > maxBlock || b[1] > maxBlock {
		return [2]int64{}, fmt.Errorf("%w: block_structure %v (two sizes from 1 to %d)", ErrUnknownLayout, b, maxBlock)
	}
	return [2]int64{b[0], b[1]}, nil
}
