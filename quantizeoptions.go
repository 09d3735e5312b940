package ckpt

import (
	"github.com/ckpt-dev/ckpt/convert"
	"github.com/ckpt-dev/ckpt/quant"
)

// QuantizeSpec is a quantize scheme and its parameters
// (quant.QuantizeSpec), as ParseQuantize reads "fp8-block:128x128".
type QuantizeSpec = quant.QuantizeSpec

// QuantizeReport says what ConvertWithQuantize quantized and what it
// left as it was, and why (convert.QuantizeReport).
type QuantizeReport = convert.QuantizeReport

// ErrQuantizeScheme reports a --quantize value ParseQuantize does not know
// (quant.ErrQuantizeScheme).
var ErrQuantizeScheme = quant.ErrQuantizeScheme

// ParseQuantize parses a scheme: fp8-block (DeepSeek's layout, 128x128
// blocks, or fp8-block:RxC), fp8-channel (compressed-tensors
// float-quantized), mxfp4 (gpt-oss experts), nvfp4 (compressed-tensors
// nvfp4-pack-quantized).
func ParseQuantize(s string) (QuantizeSpec, error) { return quant.ParseQuantize(s) }

// ConvertWithQuantize writes the weights quantized in spec's native
// layout, with the upstream ignore rules (convert.WithQuantize).
func ConvertWithQuantize(spec QuantizeSpec) ConvertOption { return convert.WithQuantize(spec) }

// ConvertWithQuantizeIgnore leaves the tensors or modules matching the
// globs unquantized (convert.WithQuantizeIgnore).
func ConvertWithQuantizeIgnore(glob ...string) ConvertOption {
	return convert.WithQuantizeIgnore(glob...)
}
