package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/ckpt-dev/ckpt/internal/human"

	"github.com/ckpt-dev/ckpt"
	"github.com/spf13/cobra"
)

func init() { commands = append(commands, command{"convert", newConvertCmd}) }

type convertOptions struct {
	cmd         *cobra.Command
	In, Out     string
	To          string
	Quant       quantFlags
	MapLocation string
	DType       string
	Strip       []string
	Rename      []string
	Only        []string
	MaxShard    string
	MaxMat      string // --max-materialized
	Compress    string
	Force       bool
	Sync        bool // --sync
	DropFloats  bool
	Attributes  bool // --attributes
	JSON        bool
	TP          int           // --tensor-parallel
	Split       string        // --split
	GGUFType    string        // --gguf-type
	GGUFMeta    []string      // --gguf-meta
	GGUFMetaF   string        // --gguf-meta-file
	GGUFHFDir   string        // --gguf-hf-dir
	DCPRanks    int           // --dcp-ranks
	DCPFormat   string        // --dcp-format
	Part        string        // --part
	PartCount   int           // --part-count
	PartWait    string        // --part-wait
	partNote    string        // which part --part chose, and from what
	Quantize    quantizeFlags // --quantize, --ignore
}

func newConvertCmd(s *streams) *cobra.Command {
	opts := &convertOptions{}
	cmd := &cobra.Command{
		Use:     "convert IN OUT",
		Short:   "Convert between PyTorch and safetensors, streaming, with casts, renames, retagging and sharding",
		Long:    convertLong,
		Example: convertExample,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.In, opts.Out = args[0], args[1]
			if err := opts.checkModeFlags(cmd); err != nil {
				return err
			}
			copts, err := opts.options()
			if err != nil {
				return err
			}
			if opts.partNote != "" {
				fmt.Fprintln(s.Err, opts.partNote)
			}
			if opts.TP != 0 || opts.Split != "" && opts.To != "dcp" {
				return runConvertTP(cmd.Context(), s, opts, copts)
			}
			return runConvert(cmd.Context(), s, opts, copts)
		},
	}
	f := cmd.Flags()
	opts.Quant.add(f)
	opts.Quantize.add(f)
	f.StringVar(&opts.To, "to", "", "output format: safetensors, pth, gguf or dcp (default: from OUT's extension)")
	f.StringVar(&opts.GGUFType, "gguf-type", "", "gguf: type of the weights: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k (1-D tensors and norms stay f32; default: as the input)")
	f.StringArrayVar(&opts.GGUFMeta, "gguf-meta", nil, "gguf: metadata KEY=VALUE or KEY:TYPE=VALUE (repeatable; general.architecture is required)")
	f.StringVar(&opts.GGUFMetaF, "gguf-meta-file", "", "gguf: metadata from a JSON file (an object of KEY: VALUE, or inspect --json's gguf.metadata list)")
	f.StringVar(&opts.GGUFHFDir, "gguf-hf-dir", "", "gguf: Hugging Face model directory whose config.json maps a Llama/Mistral/Qwen2 model to llama.cpp's names, q/k layout and keys (default: IN itself or IN's directory; none: keep the names)")
	f.StringVar(&opts.MapLocation, "map-location", "", "retag storages for .pth output (cpu, cuda:1, cuda:0=cuda:1,...)")
	f.StringVar(&opts.DType, "dtype", "", "cast floating tensors: bf16, f16, f32, f64 (integer, bool and step tensors stay)")
	f.StringArrayVar(&opts.Strip, "strip-prefix", nil, "remove this prefix from names (repeatable: module., _orig_mod.)")
	f.StringArrayVar(&opts.Rename, "rename", nil, "REGEX=REPLACEMENT applied to names (repeatable, in order)")
	f.StringArrayVar(&opts.Only, "only", nil, "keep only tensors and values whose source name matches this glob (repeatable)")
	f.StringVar(&opts.MaxShard, "max-shard-size", "", "split into shards of at most this size (5GB, 500MB; decimal units)")
	f.StringVar(&opts.MaxMat, "max-materialized", "", "safetensors: refuse an output holding more tensor data than this (default: 64x IN's storage bytes, at least 1GiB; views such as expand() are written at full size)")
	f.StringVar(&opts.Compress, "compress", "", "compress the output: zstd")
	f.BoolVar(&opts.Force, "force", false, "replace an existing OUT")
	f.BoolVar(&opts.Sync, "sync", false, "have OUT on the disk before exiting (written behind, then fsync)")
	f.BoolVar(&opts.DropFloats, "drop-floats", false, "pth: leave out floats (and bytes, sets, complex, torch.device) so torch 1.13's weights_only=True loader reads OUT")
	f.BoolVar(&opts.Attributes, "attributes", false, "TorchScript input: also write plain tensor attributes (not parameters or buffers; inspect flags them attr)")
	f.BoolVar(&opts.JSON, "json", false, "print the summary as one JSON object (schema in docs/cli-json.md)")
	f.IntVar(&opts.TP, "tensor-parallel", 0, "write W per-rank files rank-0000R-of-0000W.safetensors into the directory OUT (see --split)")
	f.StringVar(&opts.Split, "split", "", splitHelp)
	addPartFlags(f, opts)
	return cmd
}

// pthOnlyFlags act only on a PyTorch output; pthOnlyWhy says why.
var pthOnlyFlags = []string{"map-location", "drop-floats"}

var pthOnlyWhy = map[string]string{
	"map-location": "safetensors has no device tags; every tensor loads where the reader puts it",
	"drop-floats":  "safetensors keeps non-tensor values as metadata strings, which any loader reads",
}

type convertReport struct {
	In   string  `json:"in"`
	Out  string  `json:"out"`
	GBps float64 `json:"gb_per_s"`
	// Requests counts the HTTP requests made reading a URL source.
	Requests *int64 `json:"requests,omitempty"`
	*ckpt.ConvertSummary
}

func runConvert(ctx context.Context, s *streams, o *convertOptions, copts []ckpt.ConvertOption) error {
	var st *ckpt.ObjectStore
	ck, err := ckpt.Open(ctx, o.In, append(o.Quant.options(), ckpt.WithObjectStore(func(s *ckpt.ObjectStore) { st = s }))...)
	if err != nil {
		return err
	}
	defer ck.Close()
	var total int64
	for _, st := range ck.Storages {
		total += st.NBytes
	}
	bar := newProgress(s, "convert", total, o.JSON)
	sum, err := ckpt.Convert(ctx, ck, o.Out, append(copts, ckpt.ConvertWithProgress(bar.Add))...)
	bar.Done()
	if errors.Is(err, ckpt.ErrOutputFormat) || errors.Is(err, ckpt.ErrConvertOption) {
		return usageError{err: err}
	}
	if errors.Is(err, ckpt.ErrOutputTooLarge) {
		return fmt.Errorf("%s: %w", o.In, err)
	}
	if err != nil {
		return err
	}
	if sum.Format == ckpt.OutputSafetensors {
		for _, f := range pthOnlyFlags {
			if o.cmd != nil && o.cmd.Flags().Changed(f) {
				fmt.Fprintf(s.Err, "ckpt: warning: --%s had no effect: the output is safetensors (%s)\n", f, pthOnlyWhy[f])
			}
		}
	}
	rep := convertReport{In: o.In, Out: o.Out, ConvertSummary: sum, Requests: requests(st)}
	if sum.Seconds > 0 {
		rep.GBps = float64(sum.Bytes) / sum.Seconds / 1e9
	}
	if o.JSON {
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printConvert(s.Out, &rep)
	return nil
}

func printConvert(w io.Writer, r *convertReport) {
	fmt.Fprintf(w, "%s -> %s (%s)\n", clean(r.In), clean(r.Out), r.Format)
	fmt.Fprintf(w, "tensors: %d, data: %s, casts: %d, renamed: %d, aliases: %d, values kept: %d\n",
		r.Tensors, human.Bytes(r.Bytes), r.Casts, r.Renamed, len(r.Aliases), len(r.Values))
	if r.Format == ckpt.OutputPyTorch {
		if r.Structure == "tree" {
			fmt.Fprintln(w, "structure: as saved (nested dicts, lists, tuples and keys kept)")
		} else {
			fmt.Fprintln(w, "structure: flat state dict of dotted names")
		}
	}
	fmt.Fprintf(w, "time: %s\n", durationAndRate(r.Bytes, seconds(r.Seconds)))
	if !r.Synced {
		fmt.Fprintln(w, "not synced: the kernel finishes writing it out, as after cp (--sync waits for the disk)")
	}
	printGGUFReport(w, r.GGUF)
	printGGUFTypes(w, r.GGUFTypes)
	printQuantize(w, r.Quantize)
	for _, f := range r.Files {
		fmt.Fprintf(w, "wrote %s\n", clean(f))
	}
	if r.Index != "" {
		fmt.Fprintf(w, "wrote %s\n", clean(r.Index))
	}
	if len(r.Aliases) > 0 {
		fmt.Fprintln(w, "tied weights stored once:")
		tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
		for _, a := range sortedKeys(r.Aliases) {
			fmt.Fprintf(tw, "  %s\t-> %s\n", displayName(a), displayName(r.Aliases[a]))
		}
		tw.Flush()
	}
	if r.Floats > 0 {
		fmt.Fprintf(w, "%d float values kept: torch.load(weights_only=True) reads them on torch>=2.0, not on torch 1.13 (use --drop-floats there)\n", r.Floats)
	}
	if r.Torch2Values > 0 {
		fmt.Fprintf(w, "%d bytes, set, complex or torch.device values kept: torch.load(weights_only=True) reads them on recent torch 2.x, not on torch 1.13 (use --drop-floats there)\n", r.Torch2Values)
	}
	if len(r.Torch2DTypes) > 0 {
		fmt.Fprintf(w, "tensors of dtypes torch 1.13 lacks (%s): the output loads on torch 2.x versions that have them (float8: 2.1+, uint16-64: 2.3+)\n", strings.Join(r.Torch2DTypes, ", "))
	}
	if len(r.RecentCodes) > 0 {
		fmt.Fprintf(w, "safetensors dtype codes newer readers only know (%s): safetensors 0.4.5 refuses the file, C64 needs 0.7+\n", strings.Join(r.RecentCodes, ", "))
	}
	if len(r.Dropped) > 0 {
		fmt.Fprintf(w, "dropped %d (not in the output):\n", len(r.Dropped))
		tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
		for _, d := range r.Dropped {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", displayName(d.Name), clean(d.Type), clean(d.Reason))
		}
		tw.Flush()
	}
}
