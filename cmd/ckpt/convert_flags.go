package main

import (
	"strings"

	"github.com/ckpt-dev/ckpt/convert"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/spf13/cobra"
)

// checkModeFlags refuses flags that would do nothing for the output format
// known from --to or OUT's name; an output whose format only Convert finds
// (a directory) gets a warning after the conversion instead.
func (o *convertOptions) checkModeFlags(cmd *cobra.Command) error {
	o.cmd = cmd
	lower := strings.ToLower(o.Out)
	st := o.To == "safetensors" || o.To == "" && (strings.HasSuffix(strings.TrimSuffix(strings.TrimSuffix(lower, ".zst"), ".index.json"), ".safetensors"))
	if !st {
		return nil
	}
	for _, f := range pthOnlyFlags {
		if cmd.Flags().Changed(f) {
			return usagef("--%s does nothing for a safetensors output (%s); leave it out, or write a .pth", f, pthOnlyWhy[f])
		}
	}
	return nil
}

// options turns the flags into convert options, reporting bad values as
// usage errors.
func (o *convertOptions) options() ([]convert.Option, error) {
	var out []convert.Option
	switch o.To {
	case "":
	case "safetensors":
		out = append(out, convert.WithFormat(convert.Safetensors))
	case "pth", "pt", "torch":
		out = append(out, convert.WithFormat(convert.PyTorch))
	case "gguf":
		out = append(out, convert.WithFormat(convert.GGUF))
	case "dcp":
		out = append(out, convert.WithFormat(convert.DCP))
	default:
		return nil, usagef("--to %q: want safetensors, pth, gguf or dcp", o.To)
	}
	popts, err := o.partOptions()
	if err != nil {
		return nil, err
	}
	out = append(out, popts...)
	gopts, err := o.ggufOptions()
	if err != nil {
		return nil, err
	}
	out = append(out, gopts...)
	if o.MapLocation != "" || o.cmd != nil && o.cmd.Flags().Changed("map-location") {
		r, err := remap.Parse(o.MapLocation)
		if err != nil {
			return nil, mapLocationError("convert", o.MapLocation, err)
		}
		out = append(out, convert.WithRules(r))
	}
	if o.DType != "" {
		d, ok := dtype.Parse(o.DType)
		if !ok || (d != dtype.Float64 && d != dtype.Float32 && d != dtype.Float16 && d != dtype.BFloat16) {
			return nil, usagef("--dtype %q: want bf16, f16, f32 or f64", o.DType)
		}
		out = append(out, convert.WithDType(d))
	}
	out = append(out, convert.WithStripPrefix(o.Strip...), convert.WithOnly(o.Only...), convert.WithForce(o.Force), convert.WithSync(o.Sync),
		convert.WithDropFloats(o.DropFloats), convert.WithAttributes(o.Attributes))
	for _, r := range o.Rename {
		rn, err := convert.ParseRename(r)
		if err != nil {
			return nil, usagef("--rename: %v", err)
		}
		out = append(out, convert.WithRename(rn))
	}
	if o.MaxShard != "" {
		n, err := convert.ParseSize(o.MaxShard)
		if err != nil {
			return nil, usagef("--max-shard-size: %v", err)
		}
		out = append(out, convert.WithMaxShardSize(n))
	}
	if o.MaxMat != "" {
		n, err := convert.ParseSize(o.MaxMat)
		if err != nil {
			return nil, usagef("--max-materialized: %v", err)
		}
		out = append(out, convert.WithMaxMaterialized(n))
	}
	if o.Compress != "" {
		if o.Compress != "zstd" {
			return nil, usagef("--compress %q: only zstd", o.Compress)
		}
		out = append(out, convert.WithCompress(o.Compress))
	}
	return out, nil
}
