package main

import (
	"strings"

	"github.com/ckpt-dev/ckpt"
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
func (o *convertOptions) options() ([]ckpt.ConvertOption, error) {
	var out []ckpt.ConvertOption
	switch o.To {
	case "":
	case "safetensors":
		out = append(out, ckpt.ConvertWithFormat(ckpt.OutputSafetensors))
	case "pth", "pt", "torch":
		out = append(out, ckpt.ConvertWithFormat(ckpt.OutputPyTorch))
	case "gguf":
		out = append(out, ckpt.ConvertWithFormat(ckpt.OutputGGUF))
	case "dcp":
		out = append(out, ckpt.ConvertWithFormat(ckpt.OutputDCP))
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
	qopts, err := o.Quantize.options()
	if err != nil {
		return nil, err
	}
	out = append(out, qopts...)
	if o.MapLocation != "" || o.cmd != nil && o.cmd.Flags().Changed("map-location") {
		r, err := ckpt.ParseMapLocation(o.MapLocation)
		if err != nil {
			return nil, mapLocationError("convert", o.MapLocation, err)
		}
		out = append(out, ckpt.ConvertWithRules(r))
	}
	if o.DType != "" {
		d, ok := ckpt.ParseCastDType(o.DType)
		if !ok {
			return nil, usagef("--dtype %q: want bf16, f16, f32 or f64", o.DType)
		}
		out = append(out, ckpt.ConvertWithDType(d))
	}
	out = append(out, ckpt.ConvertWithStripPrefix(o.Strip...), ckpt.ConvertWithOnly(o.Only...), ckpt.ConvertWithForce(o.Force), ckpt.ConvertWithSync(o.Sync),
		ckpt.ConvertWithDropFloats(o.DropFloats), ckpt.ConvertWithAttributes(o.Attributes))
	for _, r := range o.Rename {
		rn, err := ckpt.ParseRename(r)
		if err != nil {
			return nil, usagef("--rename: %v", err)
		}
		out = append(out, ckpt.ConvertWithRename(rn))
	}
	if o.MaxShard != "" {
		n, err := ckpt.ParseSize(o.MaxShard)
		if err != nil {
			return nil, usagef("--max-shard-size: %v", err)
		}
		out = append(out, ckpt.ConvertWithMaxShardSize(n))
	}
	if o.MaxMat != "" {
		n, err := ckpt.ParseSize(o.MaxMat)
		if err != nil {
			return nil, usagef("--max-materialized: %v", err)
		}
		out = append(out, ckpt.ConvertWithMaxMaterialized(n))
	}
	if o.Compress != "" {
		if o.Compress != "zstd" {
			return nil, usagef("--compress %q: only zstd", o.Compress)
		}
		out = append(out, ckpt.ConvertWithCompress(o.Compress))
	}
	return out, nil
}
