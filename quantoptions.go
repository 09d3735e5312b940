package ckpt

import "github.com/ckpt-dev/ckpt/statedict"

// WithModelConfig names the model's config.json: its quantization_config
// says how a quantized release's weights are stored (package quant).
// Without it, config.json beside the checkpoint file or in its directory
// is read.
func WithModelConfig(path string) Option {
	return WithOpenOptions(statedict.WithModelConfig(path))
}

// WithRaw keeps a quantized release's stored tensors as they are (codes
// and scales as separate tensors) instead of reading each quantized
// weight as its dequantized values, the default.
func WithRaw() Option { return WithOpenOptions(statedict.WithRaw()) }

// QuantStored is how a dequantized weight is stored (statedict.QuantStored).
type QuantStored = statedict.QuantStored
