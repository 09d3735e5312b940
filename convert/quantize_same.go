package convert

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ckpt-dev/ckpt/ggml"
	"github.com/ckpt-dev/ckpt/quant"
	"github.com/ckpt-dev/ckpt/statedict"
)

// ErrQuantizeSame: WithQuantizeSame on an input whose quantization ckpt
// cannot write back (GPTQ, AWQ, bitsandbytes, MLX, a compressed-tensors
// strategy --quantize does not write, GGUF types) or that mixes schemes.
// Convert refuses it before anything is written.
var ErrQuantizeSame = errors.New("--quantize same: the input's scheme cannot be written back")

// WithQuantizeSame writes the output quantized as the input is (ckpt
// merge --quantize same): each weight the input stores quantized is
// written as its stored tensors (codes, scales and the activation scales
// beside them), byte for byte, unless a transform (WithTransform)
// replaces its values; then it is quantized from the new values with the
// input's scheme and block size, the activation scales kept. Tensors the
// input stores dense stay dense. The scheme is the input's when it is one
// WithQuantize writes (fp8-block with its block size, fp8-channel, nvfp4,
// mxfp4); any other (GPTQ, AWQ, bitsandbytes, MLX, ...) is refused with
// ErrQuantizeSame. An input with no quantized weight is converted as
// without the option. A directory output gets the input's config.json
// with its quantization_config unchanged (the one WithQuantize writes when
// the input had none). It cannot be combined with WithQuantize or
// WithQuantizeIgnore.
func WithQuantizeSame() Option { return func(c *options) { c.quantSame = true } }

// validateSame refuses options WithQuantizeSame cannot be combined with.
func (c *options) validateSame() error {
	switch {
	case !c.quantSame:
	case c.quantize != nil:
		return fmt.Errorf("%w: --quantize same and a named scheme cannot be combined", ErrOption)
	case len(c.quantIgnore) > 0:
		return fmt.Errorf("%w: --ignore cannot be combined with --quantize same, which keeps the input's quantized weights", ErrOption)
	}
	return nil
}

// resolveSame sets the scheme WithQuantizeSame writes: the input's, or
// none (a plain conversion) for an input without quantized weights.
func (c *config) resolveSame(ck *statedict.Checkpoint) error {
	if !c.quantSame {
		return nil
	}
	var spec *quant.QuantizeSpec
	var from string // the tensor spec came from
	for _, t := range ck.Tensors {
		if t.GGML != nil {
			if typ, err := ggml.ParseType(t.GGML.Type); err == nil && typ.Quantized() {
				return &TensorError{Name: t.Name, Err: fmt.Errorf("%w: GGUF type %s (a GGUF output keeps ggml types: --to gguf, --gguf-type)", ErrQuantizeSame, t.GGML.Type)}
			}
		}
		qs := t.QuantStored
		if qs == nil || !c.selected(t.Name) {
			continue
		}
		s, ok := sameScheme(qs)
		if !ok {
			return &TensorError{Name: t.Name, Err: fmt.Errorf("%w: it is stored as %s (quant_method %q); "+
				"write it dequantized (no --quantize; --dtype to cast) or name a scheme (--quantize fp8-block[:RxC], fp8-channel, nvfp4 or mxfp4)",
				ErrQuantizeSame, qs.Scheme, qs.Method)}
		}
		if spec != nil && s != *spec {
			return &TensorError{Name: t.Name, Err: fmt.Errorf("%w: it is stored as %s where %q is %s (one scheme is written)",
				ErrQuantizeSame, specText(s), from, specText(*spec))}
		}
		spec, from = &s, t.Name
	}
	c.quantize = spec
	return nil
}

// sameScheme is the scheme of quant.ParseQuantize a weight read
// dequantized is stored in, when --quantize writes that layout: the
// description quant's reader gives the weight names it.
func sameScheme(qs *statedict.QuantStored) (quant.QuantizeSpec, bool) {
	switch qs.Method {
	case "fp8":
		var bh, bw int64
		if _, err := fmt.Sscanf(qs.Scheme, "fp8 e4m3, %dx%d blocks,", &bh, &bw); err != nil ||
			qs.Scheme != fmt.Sprintf("fp8 e4m3, %dx%d blocks, scales in weight_scale_inv", bh, bw) {
			return quant.QuantizeSpec{}, false
		}
		return quant.QuantizeSpec{Scheme: quant.SchemeFP8Block, Block: [2]int64{bh, bw}}, true
	case "compressed-tensors":
		switch qs.Scheme {
		case "compressed-tensors float-quantized e4m3, per channel, scales in weight_scale":
			return quant.QuantizeSpec{Scheme: quant.SchemeFP8Channel}, true
		case "compressed-tensors nvfp4-pack-quantized, e2m1 in groups of 16, e4m3 scales in weight_scale, global scale in weight_global_scale":
			return quant.QuantizeSpec{Scheme: quant.SchemeNVFP4}, true
		}
	case "mxfp4":
		var base string
		if _, err := fmt.Sscanf(qs.Scheme, "mxfp4 (gpt-oss), e2m1 in groups of 32, e8m0 scales in %s", &base); err == nil {
			return quant.QuantizeSpec{Scheme: quant.SchemeMXFP4}, true
		}
	}
	return quant.QuantizeSpec{}, false
}

// specText writes spec as --quantize takes it.
func specText(s quant.QuantizeSpec) string {
	if s.Scheme == quant.SchemeFP8Block {
		return fmt.Sprintf("%s:%dx%d", s.Scheme, s.Block[0], s.Block[1])
	}
	return s.Scheme
}

// asStored returns the tensors t, a weight read dequantized, is stored as
// (codes, companions, consumed activation scales), for WithQuantizeSame
// to write as they are.
func asStored(t *statedict.Tensor) ([]*statedict.Tensor, error) {
	st := t.QuantStored.StoredTensors()
	for _, s := range st {
		if s == nil || s.Storage == nil {
			return nil, &TensorError{Name: t.Name, Err: fmt.Errorf("%w: a stored tensor without data", ErrQuantizeSame)}
		}
	}
	return st, nil
}

// sameOutputs checks that q, the quantizer of a weight WithQuantizeSame
// quantizes again (its values were transformed), writes the tensors the
// input stores it as (names, dtypes, shapes), and returns the stored
// tensors it does not write (activation scales), kept as they are.
func sameOutputs(t *statedict.Tensor, q quant.WeightQuantizer) ([]*statedict.Tensor, error) {
	st, err := asStored(t)
	if err != nil {
		return nil, err
	}
	outs := q.Outputs()
	if len(outs) > len(st) {
		return nil, &TensorError{Name: t.Name, Err: fmt.Errorf("%w: the input stores it as %d tensors, the quantizer writes %d", ErrQuantizeSame, len(st), len(outs))}
	}
	for i, o := range outs {
		s := st[i]
		if o.Name != s.Name || o.DType != s.DType || !slices.Equal(o.Shape, s.Shape) {
			return nil, &TensorError{Name: t.Name, Err: fmt.Errorf("%w: the input stores %q as %s %v, the quantizer writes %q as %s %v",
				ErrQuantizeSame, s.Name, s.DType, s.Shape, o.Name, o.DType, o.Shape)}
		}
	}
	return st[len(outs):], nil
}
