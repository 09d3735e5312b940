package quant

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ckpt-dev/ckpt/dtype"
)

// modelConfig is the part of a Hugging Face config.json that concerns
// quantization.
type modelConfig struct {
	QuantizationConfig json.RawMessage `json:"quantization_config"`
	Quantization       json.RawMessage `json:"quantization"` // MLX
	TorchDType         string          `json:"torch_dtype"`
	DType              string          `json:"dtype"` // transformers >= 4.56 writes dtype
}

// LogicalDType returns the dtype the unquantized model's weights have
// according to config.json (torch_dtype, or transformers' newer dtype):
// float32, float16 or bfloat16, and bfloat16 when it says none of them.
func LogicalDType(config []byte) dtype.DType {
	var mc modelConfig
	if len(config) == 0 || json.Unmarshal(config, &mc) != nil {
		return dtype.BFloat16
	}
	return logicalDType(&mc)
}

func logicalDType(mc *modelConfig) dtype.DType {
	for _, s := range []string{mc.TorchDType, mc.DType} {
		if d, ok := dtype.Parse(strings.TrimPrefix(s, "torch.")); ok {
			switch d {
			case dtype.Float32, dtype.Float16, dtype.BFloat16:
				return d
			}
		}
	}
	return dtype.BFloat16
}

// Detect finds the quantization scheme of a checkpoint and plans its
// groups. config is config.json's content (nil when there is none);
// tensors are the stored tensors. It returns a nil Plan when nothing is
// quantized. It refuses (an *Error naming the scheme and the tensor)
// whatever would otherwise be cast element-wise: a quant_method ckpt does
// not know, a layout it does not read, a companion of the wrong shape, or
// a float8 tensor with a scale beside it and no config to say how to
// apply it.
func Detect(config []byte, tensors []Stored) (*Plan, error) {
	var mc modelConfig
	if len(bytes.TrimSpace(config)) > 0 {
		if err := json.Unmarshal(config, &mc); err != nil {
			return nil, &Error{Err: fmt.Errorf("%w: config.json: %v", ErrConfig, err)}
		}
	}
	dt := logicalDType(&mc)
	byName := false // no config: the scheme is what the names say
	raw, method := mc.QuantizationConfig, ""
	if isNull(raw) && !isNull(mc.Quantization) {
		raw, method = mc.Quantization, "mlx"
	}
	if isNull(raw) {
		if method = byNames(tensors); method == "" {
			return nil, unschemed(tensors, nil)
		}
		raw = json.RawMessage("{}")
		byName = true
	}
	if method == "" {
		var q struct {
			QuantMethod string `json:"quant_method"`
		}
		if err := json.Unmarshal(raw, &q); err != nil {
			return nil, &Error{Err: fmt.Errorf("%w: quantization_config: %v", ErrConfig, err)}
		}
		method = q.QuantMethod
	}
	label := method // the scheme as errors name it
	if byName {
		label = method + " (by tensor names)"
	}
	parse := lookup(method)
	if parse == nil {
		return nil, &Error{Scheme: quoteIfOdd(method), Tensor: firstQuantized(tensors), Err: fmt.Errorf("%w: ckpt does not dequantize quant_method %q (--raw keeps the stored tensors)", ErrUnknownScheme, method)}
	}
	layout, err := parse(Config{Method: method, Raw: raw, DType: dt})
	if err != nil {
		return nil, withScheme(err, label, firstQuantized(tensors))
	}
	groups, err := layout.Plan(tensors)
	if err != nil {
		var e *Error
		if byName && errors.As(err, &e) && e.Scheme == method {
			// The layout names its scheme: say how it was found, and
			// what would say more.
			e.Scheme = label
			e.Err = fmt.Errorf("%w; no config.json was found: give the model's with --config", e.Err)
		}
		return nil, withScheme(err, label, "")
	}
	used := make(map[string]string)
	for _, g := range groups {
		if rc, ok := g.Codec.(*rowsCodec); ok && rc.cols > maxRowElems {
			return nil, &Error{Scheme: label, Tensor: g.Weight.Name, Err: fmt.Errorf("%w: rows of %d elements (ckpt decodes whole rows, at most %d)", ErrUnknownLayout, rc.cols, maxRowElems)}
		}
		names := []string{g.Weight.Name}
		for _, c := range g.Companions {
			names = append(names, c.Name)
		}
		for _, n := range append(names, g.Consumed...) {
			if prev, dup := used[n]; dup && prev != g.Name {
				return nil, &Error{Scheme: label, Tensor: n, Err: fmt.Errorf("%w: used by the weights %s and %s", ErrUnknownLayout, prev, g.Name)}
			}
			used[n] = g.Name
		}
	}
	if err := unschemed(tensors, used); err != nil {
		return nil, withScheme(err, label, "")
	}
	if len(groups) == 0 {
		return nil, nil
	}
	return &Plan{Method: method, DType: dt, Groups: groups}, nil
}

// byNames is the scheme that tensor names alone tell, where there is no
// config: gpt-oss's X_blocks beside X_scales (U8), bitsandbytes'
// self-describing quant_state, and block FP8's X_scale_inv beside a
// float8 X; "" for none.
func byNames(tensors []Stored) string {
	byName := indexStored(tensors)
	for _, t := range tensors {
		if strings.Contains(t.Name, bnbStatePrefix) {
			return "bitsandbytes"
		}
		if base, ok := strings.CutSuffix(t.Name, "_blocks"); ok && t.DType == dtype.Uint8 {
			if s, ok := byName[base+"_scales"]; ok && (s.DType == dtype.Uint8 || s.DType == dtype.Float8E8M0FNU) {
				return "mxfp4"
			}
		}
		// DeepSeek's block FP8: a float8 weight beside a float32
		// weight_scale_inv. The blocks are FineGrainedFP8Config's default
		// 128x128, which the scales' shape must then fit (a weight with
		// other blocks is refused by that check, naming it: --config).
		if isFloat8(t.DType) {
			if s, ok := byName[t.Name+"_scale_inv"]; ok && s.DType == dtype.Float32 {
				return "fp8"
			}
		}
	}
	return ""
}

// packedNames are companions that mark an integer-packed weight whose
// scheme needs parameters (bits, group size) only a config gives: the
// companion's name, the weight beside it and that weight's dtype
// (Invalid: any).
var packedNames = []struct {
	companion, weight string
	dt                dtype.DType
	scheme            string
}{
	{"qzeros", "qweight", dtype.Int32, "gptq/awq"},
	{"weight_packed", "weight_scale", dtype.Invalid, "compressed-tensors"},
	{"biases", "weight", dtype.Uint32, "mlx"},
	{"SCB", "weight", dtype.Int8, "bitsandbytes int8"},
}

// packedCompanion returns the scheme whose companion t is, by names, "" for none.
func packedCompanion(t Stored, byName map[string]Stored) (string, string) {
	for _, p := range packedNames {
		prefix, ok := strings.CutSuffix(t.Name, p.companion)
		if !ok || prefix != "" && !strings.HasSuffix(prefix, ".") {
			continue
		}
		if w, ok := byName[prefix+p.weight]; ok && (p.dt == dtype.Invalid || w.DType == p.dt) {
			return p.scheme, p.companion
		}
	}
	return "", ""
}

// unschemed refuses a float8 tensor that no group took although a scale
// sits beside it (X_scale_inv, X_scale): without a scheme saying how the
// scale applies, an element-wise cast would give wrong values.
func unschemed(tensors []Stored, used map[string]string) error {
	byName := indexStored(tensors)
	for _, t := range tensors {
		if used[t.Name] != "" {
			continue
		}
		if scheme, comp := packedCompanion(t, byName); scheme != "" {
			return &Error{Scheme: scheme + " (by tensor names)", Tensor: t.Name, Err: fmt.Errorf("%w: a quantized weight's %s but no quantization_config says how to read it (give the model's config.json with --config, or --raw to keep the stored tensors)",
				ErrMissingCompanion, comp)}
		}
		if !isFloat8(t.DType) {
			continue
		}
		for _, suf := range []string{"_scale_inv", "_scale"} {
			if _, ok := byName[t.Name+suf]; ok {
				scheme := "fp8 (by tensor names)"
				if suf == "_scale" {
					scheme = "compressed-tensors (by tensor names)"
				}
				return &Error{Scheme: scheme, Tensor: t.Name, Err: fmt.Errorf("%w: %s weight with %s%s beside it but no quantization_config (give the model's config.json with --config, or --raw to keep the stored tensors)",
					ErrMissingCompanion, t.DType, lastPart(t.Name), suf)}
			}
		}
	}
	return nil
}

// firstQuantized names the first tensor that looks quantized (float8, or
// with a scale beside it), else the first tensor.
func firstQuantized(tensors []Stored) string {
	for _, t := range tensors {
		if isFloat8(t.DType) || strings.HasSuffix(t.Name, "_scale") || strings.HasSuffix(t.Name, "_scale_inv") || strings.HasSuffix(t.Name, "scales") {
			return t.Name
		}
	}
	if len(tensors) > 0 {
		return tensors[0].Name
	}
	return ""
}

// withScheme makes err an *Error naming scheme (and tensor when err names none).
func withScheme(err error, scheme, tensor string) error {
	if e, ok := err.(*Error); ok {
		if e.Scheme == "" {
			e.Scheme = scheme
		}
		if e.Tensor == "" {
			e.Tensor = tensor
		}
		return e
	}
	return &Error{Scheme: scheme, Tensor: tensor, Err: err}
}

func isNull(raw json.RawMessage) bool {
	s := bytes.TrimSpace(raw)
	return len(s) == 0 || bytes.Equal(s, []byte("null"))
}

// quoteIfOdd quotes a method name holding anything but letters, digits, - and _.
func quoteIfOdd(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Sprintf("%q", s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}
