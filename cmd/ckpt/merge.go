package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ckpt-dev/ckpt"
	"github.com/spf13/cobra"
)

func init() { commands = append(commands, command{"merge", newMergeCmd}) }

type mergeOptions struct {
	Base, Out string
	Adapters  []string // --adapter and the positional ADAPTERs, PATH[:WEIGHT]
	convert   convertOptions
	JSON      bool
}

func newMergeCmd(s *streams) *cobra.Command {
	o := &mergeOptions{convert: convertOptions{DCPFormat: "torch"}}
	cmd := &cobra.Command{
		Use:   "merge BASE [ADAPTER[:WEIGHT]...] OUT",
		Short: "Merge PEFT LoRA adapters into a base checkpoint, tensor by tensor",
		Long: `merge writes BASE with LoRA adapters merged into its weights, as PEFT's
merge_and_unload leaves them. BASE is anything ckpt reads (local or URL);
each ADAPTER is a PEFT directory (adapter_config.json and
adapter_model.safetensors or adapter_model.bin; a .bin is read, never
executed), local or URL, given positionally or with --adapter, with an
optional weight after the last ":" (default 1).

The rule, with several adapters: W' = W + sum over adapters of
w_i * scaling_i * B_i @ A_i, laid out as W (transposed for fan_in_fan_out
and for embeddings). scaling is lora_alpha/r, or lora_alpha/sqrt(r) with
use_rslora, r and alpha taken from rank_pattern/alpha_pattern where they
match. This is what PEFT's add_weighted_adapter gives with
combination_type="cat", not "linear" (which scales A and B by square roots
of the weights and adds cross terms). DoRA (use_dora) is merged alone at
weight 1: m / ||W + delta|| * (W + delta), the norm per output feature.
modules_to_save and trained biases (bias "all"/"lora_only") replace the
base tensor whole; lora_bias adds scaling * lora_B.bias to the bias.

Refused before anything is written, with no OUT left: an adapter module
the base lacks or that is not in target_modules (PEFT loads with
strict=False and skips them; ckpt does not), shapes that do not fit the
base or the rank, a peft_type other than LORA, and settings that change
the math and are not implemented (unknown keys set, layer_replication, ...).

Each tensor is read, merged in float32 on all cores and written before
the next: only it and its adapter pair are in memory. The output keeps
the base's dtypes unless --dtype; its format follows OUT or --to as in
'ckpt convert'. A quantized base is merged dequantized and written so;
--quantize SCHEME (as 'ckpt convert --quantize') quantizes the output,
each merged weight from its merged values.

--quantize same keeps a quantized base quantized as it is: the weights no
adapter touches are copied as the base stores them (codes and scales, the
same bytes), each merged weight is quantized from its merged values with
the base's scheme and block size (byte for byte what --quantize
fp8-block:RxC etc. writes for it), tensors the base stores unquantized stay
so, and a directory OUT gets the base's config.json, quantization_config
unchanged. The schemes are those --quantize writes (block FP8 with any
block size, compressed-tensors fp8-channel and nvfp4, gpt-oss mxfp4); a
base in another (GPTQ, AWQ, bitsandbytes, MLX, GGUF types) is refused
before anything is written. A dense base with --quantize same is merged
dense, as without it. Rules: docs/merge.md.`,
		Example: `  ckpt merge llama/ lora/ merged.safetensors
  ckpt merge model.safetensors --adapter style:0.7 --adapter tone:-0.35 out.safetensors
  ckpt merge --json s3://bucket/base/ s3://bucket/lora/ merged/`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Base, o.Out = args[0], args[len(args)-1]
			o.Adapters = append(append([]string{}, args[1:len(args)-1]...), o.Adapters...)
			if len(o.Adapters) == 0 {
				return usagef("merge needs at least one adapter (positional or --adapter)")
			}
			o.convert.cmd = cmd
			return runMerge(cmd.Context(), s, o)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.Adapters, "adapter", nil, "a PEFT adapter directory, PATH or PATH:WEIGHT (repeatable)")
	f.StringVar(&o.convert.To, "to", "", "output format: safetensors, pth, gguf or dcp (default: from OUT)")
	f.StringVar(&o.convert.DType, "dtype", "", "write floating tensors as bf16, f16, f32 or f64 (default: the base's)")
	f.StringVar(&o.convert.MaxShard, "max-shard-size", "", "split the output into shards of at most this size (5GB, 500MB)")
	f.BoolVar(&o.convert.Force, "force", false, "replace an existing output")
	f.BoolVar(&o.convert.Sync, "sync", false, "have the output on the disk before exiting")
	o.convert.Quantize.add(f) // merged weights quantized with their deltas
	f.Lookup("quantize").Usage = "write the weights quantized: same (as the base: untouched weights copied as stored, merged ones requantized; a dense base stays dense), or a scheme as 'ckpt convert --quantize': fp8-block[:RxC], fp8-channel, mxfp4, nvfp4"
	f.BoolVar(&o.JSON, "json", false, "print one JSON object (schema in docs/cli-json.md)")
	return cmd
}

func runMerge(ctx context.Context, s *streams, o *mergeOptions) error {
	var adapters []ckpt.MergeAdapter
	for _, a := range o.Adapters {
		ma, err := ckpt.ParseMergeAdapter(a)
		if err != nil {
			return usageError{err: err}
		}
		adapters = append(adapters, ma)
	}
	o.convert.Out = o.Out
	var mopts []ckpt.MergeOption
	if strings.EqualFold(strings.TrimSpace(o.convert.Quantize.Scheme), "same") {
		if len(o.convert.Quantize.Ignore) > 0 {
			return usagef("--ignore cannot be combined with --quantize same, which keeps the base's quantized weights as they are")
		}
		o.convert.Quantize.Scheme = ""
		mopts = append(mopts, ckpt.MergeWithQuantizeSame())
	}
	copts, err := o.convert.options()
	if err != nil {
		return err
	}
	rep, err := ckpt.Merge(ctx, o.Base, o.Out, adapters, append(mopts, ckpt.MergeWithConvertOptions(copts...))...)
	if errors.Is(err, ckpt.ErrOutputFormat) || errors.Is(err, ckpt.ErrConvertOption) || errors.Is(err, ckpt.ErrMergeOption) {
		return usageError{err: err}
	}
	if err != nil {
		return err
	}
	if o.JSON {
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printMerge(s.Out, rep)
	return nil
}

func printMerge(w io.Writer, r *ckpt.MergeReport) {
	for i, a := range r.Adapters {
		rs := ""
		if a.RSLoRA {
			rs = ", rsLoRA"
		}
		if a.DoRA {
			rs += ", DoRA"
		}
		fmt.Fprintf(w, "adapter %d: %s weight %g, r %d, alpha %g%s: %d modules, %d replaced\n", i, clean(a.Path), a.Weight, a.R, a.Alpha, rs, a.Modules, a.Replaced)
	}
	fmt.Fprintf(w, "%s -> %s (%s): %d tensors merged, %d replaced, %d written\n", clean(r.Base), clean(firstFile(r.Output.Files)), r.Output.Format, r.Merged, r.Replaced, r.Output.Tensors)
	if q := r.Output.Quantize; q != nil {
		fmt.Fprintf(w, "quantized: %d weights as %s (%d copied as the base stores them), %d float tensors left unquantized\n", q.Quantized, q.Scheme, q.Copied, len(q.Skipped))
	}
	fmt.Fprintf(w, "time: %s\n", durationAndRate(r.Output.Bytes, seconds(r.Seconds)))
}

func firstFile(f []string) string {
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
