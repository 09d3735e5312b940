package main

import (
	"fmt"
	"io"

	"github.com/ckpt-dev/ckpt"
	"github.com/spf13/pflag"
)

// quantizeFlags are convert's --quantize and --ignore.
type quantizeFlags struct {
	Scheme string   // --quantize
	Ignore []string // --ignore
}

func (q *quantizeFlags) add(f *pflag.FlagSet) {
	f.StringVar(&q.Scheme, "quantize", "", "write the weights quantized: fp8-block (DeepSeek layout; fp8-block:64x64 for other blocks), fp8-channel (compressed-tensors), mxfp4 (gpt-oss experts), nvfp4 (compressed-tensors); norms, embeddings, lm_head and routers stay")
	f.StringArrayVar(&q.Ignore, "ignore", nil, "with --quantize: leave tensors or modules matching this glob unquantized (repeatable)")
}

func (q *quantizeFlags) options() ([]ckpt.ConvertOption, error) {
	if q.Scheme == "" {
		if len(q.Ignore) > 0 {
			return nil, usagef("--ignore needs --quantize")
		}
		return nil, nil
	}
	spec, err := ckpt.ParseQuantize(q.Scheme)
	if err != nil {
		return nil, usageError{err: err}
	}
	return []ckpt.ConvertOption{ckpt.ConvertWithQuantize(spec), ckpt.ConvertWithQuantizeIgnore(q.Ignore...)}, nil
}

// printQuantize writes the quantize report of a conversion.
func printQuantize(w io.Writer, r *ckpt.QuantizeReport) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "quantized: %d weights to %s, %d float tensors left as they are\n", r.Quantized, r.Scheme, len(r.Skipped))
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "  kept %s: %s\n", displayName(s.Name), clean(s.Reason))
	}
	if r.Config != "" {
		fmt.Fprintf(w, "wrote %s (quantization_config)\n", clean(r.Config))
	}
}
