package main

import (
	"github.com/ckpt-dev/ckpt"
	"github.com/spf13/pflag"
)

// quantFlags are --config and --raw, shared by inspect, convert and load.
type quantFlags struct {
	Config string
	Raw    bool
}

func (q *quantFlags) add(f *pflag.FlagSet) {
	f.StringVar(&q.Config, "config", "", "the model's config.json (quantization_config), when it is not beside the checkpoint")
	f.BoolVar(&q.Raw, "raw", false, "keep a quantized release's stored tensors (codes and scales) as they are instead of dequantizing")
}

// options are the facade options the flags ask for.
func (q *quantFlags) options() []ckpt.Option {
	var o []ckpt.Option
	if q.Config != "" {
		o = append(o, ckpt.WithModelConfig(q.Config))
	}
	if q.Raw {
		o = append(o, ckpt.WithRaw())
	}
	return o
}
