package lora

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// MaxConfigSize bounds an adapter_config.json (1 MiB; PEFT's are a few KB).
const MaxConfigSize = 1 << 20

// Config is what the merge takes from an adapter_config.json (PEFT's
// LoraConfig).
type Config struct {
	PeftType    string  // "LORA"
	R           int     // r
	Alpha       float64 // lora_alpha
	UseRSLoRA   bool    // use_rslora: scaling alpha/sqrt(r)
	FanInFanOut bool    // fan_in_fan_out: the base stores (in, out)
	Bias        string  // "none", "all" or "lora_only"
	UseDoRA     bool    // use_dora
	LoRABias    bool    // lora_bias: lora_B has a bias, added to the base's
	// TargetModules are the names (matched as suffixes after a dot) of
	// target_modules given as a list; TargetRegex is target_modules given
	// as one string, matched against the whole module name.
	TargetModules []string
	TargetRegex   string
	// ExcludeModules and ExcludeRegex are exclude_modules, likewise.
	ExcludeModules []string
	ExcludeRegex   string
	// ModulesToSave are modules the adapter holds whole.
	ModulesToSave []string
	// LayersToTransform and LayersPattern restrict the targets to layers
	// of those indices.
	LayersToTransform []int
	LayersPattern     []string
	// RankPattern and AlphaPattern, in the file's order.
	RankPattern  []Pattern
	AlphaPattern []Pattern
}

// Pattern is one entry of rank_pattern or alpha_pattern: a regular
// expression over module names and its value.
type Pattern struct {
	Key   string
	Value float64
	re    *regexp.Regexp
}

// harmless returns the LoraConfig keys that do not change a merge (or
// whose use the parser reads or checks below), built on first use.
var harmless = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"task_type": true, "peft_type": true, "auto_mapping": true, "peft_version": true,
		"base_model_name_or_path": true, "revision": true, "inference_mode": true,
		"r": true, "lora_alpha": true, "lora_dropout": true, "target_modules": true, "exclude_modules": true,
		"fan_in_fan_out": true, "bias": true, "use_rslora": true, "modules_to_save": true,
		"layers_to_transform": true, "layers_pattern": true, "rank_pattern": true, "alpha_pattern": true,
		"megatron_config": true, "megatron_core": true, "use_dora": true, "lora_bias": true,
		"init_lora_weights": true, "eva_config": true, "corda_config": true, "lora_ga_config": true,
		"loftq_config": true, "runtime_config": true, "ensure_weight_tying": true, "qalora_group_size": true,
	}
})

// refusedWhenSet are LoraConfig keys that change what the saved weights
// mean, and that the merge does not implement, when they are set.
var refusedWhenSet = map[string]string{
	"layer_replication":       "layer_replication duplicates base layers",
	"trainable_token_indices": "trainable_token_indices trains embedding rows apart",
	"target_parameters":       "target_parameters adapts parameters rather than modules",
	"alora_invocation_tokens": "activated LoRA (aLoRA) cannot be merged",
	"use_qalora":              "QA-LoRA pools inputs",
	"arrow_config":            "Arrow routes between adapters",
}

// ParseConfig parses an adapter_config.json. Keys it does not know are
// accepted only at an unset value (null, false, 0, "", [] or {}): PEFT
// adds features off by default, so an unknown key that is set would
// change the merge in a way ckpt cannot follow (ErrUnsupported).
func ParseConfig(b []byte) (*Config, error) {
	if len(b) > MaxConfigSize {
		return nil, fmt.Errorf("%w: %d bytes, over %d", ErrConfig, len(b), MaxConfigSize)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	c := &Config{R: 8, Alpha: 8, Bias: "none"}
	get := func(key string, v any) error {
		m, ok := raw[key]
		if !ok || string(m) == "null" {
			return nil
		}
		if err := json.Unmarshal(m, v); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrConfig, key, err)
		}
		return nil
	}
	var pt string
	if err := get("peft_type", &pt); err != nil {
		return nil, err
	}
	if !strings.EqualFold(pt, "LORA") {
		if pt == "" {
			return nil, fmt.Errorf("%w: no peft_type", ErrNotLoRA)
		}
		return nil, fmt.Errorf("%w: peft_type is %q", ErrNotLoRA, pt)
	}
	c.PeftType = "LORA"
	for _, f := range []struct {
		key string
		v   any
	}{{"r", &c.R}, {"lora_alpha", &c.Alpha}, {"use_rslora", &c.UseRSLoRA}, {"fan_in_fan_out", &c.FanInFanOut},
		{"bias", &c.Bias}, {"use_dora", &c.UseDoRA}, {"lora_bias", &c.LoRABias},
		{"modules_to_save", &c.ModulesToSave}} {
		if err := get(f.key, f.v); err != nil {
			return nil, err
		}
	}
	if c.R <= 0 {
		return nil, fmt.Errorf("%w: r is %d", ErrConfig, c.R)
	}
	switch c.Bias {
	case "none", "all", "lora_only":
	default:
		return nil, fmt.Errorf("%w: bias %q (none, all or lora_only)", ErrConfig, c.Bias)
	}
	var err error
	if c.TargetModules, c.TargetRegex, err = listOrRegex(raw, "target_modules"); err != nil {
		return nil, err
	}
	if c.ExcludeModules, c.ExcludeRegex, err = listOrRegex(raw, "exclude_modules"); err != nil {
		return nil, err
	}
	if c.LayersToTransform, err = intOrList(raw["layers_to_transform"]); err != nil {
		return nil, err
	}
	if pat, re, err := listOrRegex(raw, "layers_pattern"); err != nil {
		return nil, err
	} else if c.LayersPattern = pat; re != "" {
		c.LayersPattern = []string{re}
	}
	if c.RankPattern, err = patterns(raw["rank_pattern"], "rank_pattern"); err != nil {
		return nil, err
	}
	if c.AlphaPattern, err = patterns(raw["alpha_pattern"], "alpha_pattern"); err != nil {
		return nil, err
	}
	for _, p := range c.RankPattern {
		if p.Value <= 0 || p.Value != math.Trunc(p.Value) {
			return nil, fmt.Errorf("%w: rank_pattern %q: rank %v", ErrConfig, p.Key, p.Value)
		}
	}
	return c, checkKeys(raw)
}

// checkKeys refuses settings that change the merge and that ParseConfig
// does not implement.
func checkKeys(raw map[string]json.RawMessage) error {
	var init any
	if m, ok := raw["init_lora_weights"]; ok {
		json.Unmarshal(m, &init)
	}
	if s, ok := init.(string); ok {
		for _, p := range []string{"pissa", "olora", "corda", "loftq", "lora_ga"} {
			if strings.HasPrefix(strings.ToLower(s), p) {
				return fmt.Errorf("%w: init_lora_weights %q altered the base weights when the adapter was made; merge it onto that altered base, or save the adapter converted (PEFT's path_initial_model_for_weight_conversion)", ErrUnsupported, s)
			}
		}
	}
	if !unset(raw["loftq_config"]) {
		return fmt.Errorf("%w: loftq_config: LoftQ altered the base weights", ErrUnsupported)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if harmless()[k] || unset(raw[k]) {
			continue
		}
		if why, ok := refusedWhenSet[k]; ok {
			return fmt.Errorf("%w: %s is set: %s", ErrUnsupported, k, why)
		}
		return fmt.Errorf("%w: unknown key %q is set (%s); it may change the merge", ErrUnsupported, k, clip(raw[k]))
	}
	return nil
}

// unset reports whether a JSON value is absent or at an off value.
func unset(m json.RawMessage) bool {
	switch string(bytes.TrimSpace(m)) {
	case "", "null", "false", "0", `""`, "[]", "{}":
		return true
	}
	return false
}

// clip returns at most 40 bytes of a JSON value, for messages.
func clip(m json.RawMessage) string {
	if len(m) > 40 {
		return string(m[:40]) + "..."
	}
	return string(m)
}

// listOrRegex reads a key PEFT takes as a list of names or one regular
// expression string.
func listOrRegex(raw map[string]json.RawMessage, key string) ([]string, string, error) {
	m, ok := raw[key]
	if !ok || string(m) == "null" {
		return nil, "", nil
	}
	var s string
	if json.Unmarshal(m, &s) == nil {
		if _, err := regexp.Compile(s); err != nil {
			return nil, "", fmt.Errorf("%w: %s: %v", ErrConfig, key, err)
		}
		return nil, s, nil
	}
	var l []string
	if err := json.Unmarshal(m, &l); err != nil {
		return nil, "", fmt.Errorf("%w: %s: want a list of names or a regular expression", ErrConfig, key)
	}
	return l, "", nil
}

// intOrList reads layers_to_transform: an int or a list of ints.
func intOrList(m json.RawMessage) ([]int, error) {
	if unset(m) && string(m) != "0" {
		return nil, nil
	}
	var i int
	if json.Unmarshal(m, &i) == nil {
		return []int{i}, nil
	}
	var l []int
	if err := json.Unmarshal(m, &l); err != nil {
		return nil, fmt.Errorf("%w: layers_to_transform: want an int or a list of ints", ErrConfig)
	}
	return l, nil
}

// patterns reads rank_pattern or alpha_pattern keeping the file's order
// of keys, which decides which key wins (get_pattern_key returns the
// first match).
func patterns(m json.RawMessage, key string) ([]Pattern, error) {
	if unset(m) {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(m))
	bad := fmt.Errorf("%w: %s: want an object of names to numbers", ErrConfig, key)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, bad
	}
	var out []Pattern
	for dec.More() {
		t, err := dec.Token()
		k, ok := t.(string)
		if err != nil || !ok {
			return nil, bad
		}
		var v float64
		if err := dec.Decode(&v); err != nil {
			return nil, bad
		}
		// get_pattern_key: re.match(rf"(.*\.)?({key})$", name).
		re, err := regexp.Compile(`^(?:.*\.)?(?:` + k + `)$`)
		if err != nil {
			return nil, fmt.Errorf("%w: %s key %q: %v", ErrConfig, key, k, err)
		}
		out = append(out, Pattern{Key: k, Value: v, re: re})
	}
	return out, nil
}

// lookup returns the value of the first pattern matching module.
func lookup(ps []Pattern, module string) (float64, bool) {
	for _, p := range ps {
		if p.re.MatchString(module) {
			return p.Value, true
		}
	}
	return 0, false
}

// Scaling returns the rank, alpha and scaling PEFT gives module (a name
// relative to the base model, "model.layers.0.self_attn.q_proj"):
// rank_pattern and alpha_pattern over r and lora_alpha, then alpha/r, or
// alpha/sqrt(r) with use_rslora.
func (c *Config) Scaling(module string) (r int, alpha, scale float64) {
	r, alpha = c.R, c.Alpha
	if v, ok := lookup(c.RankPattern, module); ok {
		r = int(v)
	}
	if v, ok := lookup(c.AlphaPattern, module); ok {
		alpha = v
	}
	if c.UseRSLoRA {
		return r, alpha, alpha / math.Sqrt(float64(r))
	}
	return r, alpha, alpha / float64(r)
}

// Targets reports whether PEFT would give module a LoRA layer under this
// config (check_target_module_exists): not excluded, not a module to
// save, matched by target_modules (a regular expression matched against
// the whole name, or names matched whole or after a dot; "all-linear"
// matches any), and in layers_to_transform when that is set.
func (c *Config) Targets(module string) bool {
	if c.ExcludeRegex != "" && fullMatch(c.ExcludeRegex, module) || suffixMatch(c.ExcludeModules, module) {
		return false
	}
	for _, m := range c.ModulesToSave {
		if ok, _ := regexp.MatchString(`^(?:|.*\.)`+regexp.QuoteMeta(m)+`(?:$|\..*)`, module); ok {
			return false
		}
	}
	if c.TargetRegex != "" {
		return c.TargetRegex == "all-linear" || fullMatch(c.TargetRegex, module)
	}
	if len(c.TargetModules) == 1 && c.TargetModules[0] == "all-linear" {
		return true
	}
	if !suffixMatch(c.TargetModules, module) {
		return false
	}
	if len(c.LayersToTransform) == 0 || inList(c.TargetModules, module) {
		return true
	}
	pats := c.LayersPattern
	if len(pats) == 0 {
		pats = []string{`[^.]*`}
	}
	for _, p := range pats {
		re, err := regexp.Compile(`^.*?\.(?:` + p + `)\.(\d+)\.`)
		if err != nil {
			continue
		}
		if m := re.FindStringSubmatch(module); m != nil {
			var idx int
			fmt.Sscan(m[1], &idx)
			for _, l := range c.LayersToTransform {
				if l == idx {
					return true
				}
			}
			return false
		}
	}
	return false
}

func fullMatch(expr, s string) bool {
	ok, _ := regexp.MatchString(`^(?:`+expr+`)$`, s)
	return ok
}

func suffixMatch(names []string, module string) bool {
	for _, n := range names {
		if module == n || strings.HasSuffix(module, "."+n) {
			return true
		}
	}
	return false
}

func inList(names []string, module string) bool {
	for _, n := range names {
		if module == n {
			return true
		}
	}
	return false
}
