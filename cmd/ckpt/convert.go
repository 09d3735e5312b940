package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ckpt-dev/ckpt/internal/human"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/ckpt-dev/ckpt"
	"github.com/ckpt-dev/ckpt/convert"
	"github.com/ckpt-dev/ckpt/objstore"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/spf13/cobra"
)

func init() { commands = append(commands, newConvertCmd) }

type convertOptions struct {
	cmd         *cobra.Command
	In, Out     string
	To          string
	MapLocation string
	DType       string
	Strip       []string
	Rename      []string
	Only        []string
	MaxShard    string
	MaxMat      string // --max-materialized
	Compress    string
	Force       bool
	DropFloats  bool
	Attributes  bool // --attributes
	JSON        bool
	TP          int      // --tensor-parallel
	Split       string   // --split
	GGUFType    string   // --gguf-type
	GGUFMeta    []string // --gguf-meta
	GGUFMetaF   string   // --gguf-meta-file
	GGUFHFDir   string   // --gguf-hf-dir
	DCPRanks    int      // --dcp-ranks
	Part        string   // --part
	PartCount   int      // --part-count
	PartWait    string   // --part-wait
	partNote    string   // which part --part chose, and from what
}

func newConvertCmd(s *streams) *cobra.Command {
	opts := &convertOptions{}
	cmd := &cobra.Command{
		Use:   "convert IN OUT",
		Short: "Convert between PyTorch and safetensors, streaming, with casts, renames, retagging and sharding",
		Long: `Convert writes IN (anything inspect reads) to OUT as safetensors or a PyTorch zip,
tensor by tensor, in memory bounded by a few buffers plus IN's pickle, at disk
speed: on Linux the output is written with direct I/O, so it does not fill the
page cache, and it is synced before it is renamed into place.

OUT's format comes from --to or its extension (.safetensors; .pt .pth .bin .ckpt).
OUT may be a directory (created if missing) or a *.index.json path; with --max-shard-size the output
is split into model-0000i-of-0000n.safetensors (or pytorch_model-...bin) shards
plus an index.json in the Hugging Face layout.

To safetensors, tied weights are stored once (dropped aliases are recorded in
__metadata__), views are copied out contiguous (an output past
--max-materialized, by default 64x IN's storage bytes and at least 1 GiB, is
refused before anything is written: a broadcast view made by expand() would
be written at its full size), non-tensor values go to
__metadata__ ("ckpt.objects") and each tensor's xxh64c digest to "ckpt.digests"
for 'ckpt verify'. To .pth, tied weights stay tied and location tags follow
--map-location (default: as saved; "cpu" fixes "Attempting to deserialize
object on a CUDA device"). A .pth output from a PyTorch input keeps the
input's structure (nested dicts, int keys, lists, tuples, floats: a training
checkpoint's ckpt["model"] and ckpt["optimizer"] load as before) unless
--strip-prefix, --rename, --only or --max-shard-size change names, which
give a flat state dict of dotted names. torch.load(weights_only=True) reads
floats on torch >= 2.0; --drop-floats leaves them out for torch 1.13.
Anything the output cannot carry is listed.

` + tpHelp + `

--to dcp writes OUT as a torch.distributed.checkpoint directory (.metadata and
__R_0.distcp files, torch 2.6's FileSystemWriter layout) that dcp.load reads in
any world size: --dcp-ranks R writes it as R ranks would, --split RULES chunks
the matching tensors over the ranks. --part I/N (or auto: torchrun, Slurm, an
Indexed Job) writes only process I's files of a DCP or sharded safetensors
output; part 0 writes the index once the others' files exist (docs/dcp-write.md).

OUT is written to a temporary file beside it and renamed into place when
complete: an interrupted convert never leaves a partial OUT (on Linux the
temporary file is unnamed, so even kill -9 leaves nothing). An existing OUT
is replaced only with --force, and only if it is a regular file: a device
(/dev/null), FIFO or socket is refused. A symbolic link at OUT is written
through, as cp does: its target is replaced and the link kept. OUT may be an
s3://, gs:// or az:// URL: the output is streamed to the bucket with no local
copy, each object appearing only when complete (a prefix ending in "/" takes
directory and sharded outputs).`,
		Example: `  ckpt convert model.pt model.safetensors
  ckpt convert --map-location cpu gpu_run.pt cpu_run.pt
  ckpt convert --dtype bf16 --strip-prefix module. ddp.pt model.safetensors
  ckpt convert --max-shard-size 5GB big.pt out/model.safetensors.index.json
  ckpt convert --compress zstd model.safetensors model.safetensors.zst
  ckpt convert ./dcp_checkpoint/ model.safetensors      # torch.distributed.checkpoint directory
  ckpt convert model.safetensors.index.json dcp/ --to dcp --dcp-ranks 8 --part auto   # under torchrun/srun
  ckpt convert model.safetensors tp4/ --tensor-parallel 4 \
      --split '*.q_proj.weight=0,*.k_proj.weight=0,*.v_proj.weight=0,*.o_proj.weight=1'`,
		Args: cobra.ExactArgs(2),
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
		d, ok := statedict.ParseDType(o.DType)
		if !ok || (d != statedict.Float64 && d != statedict.Float32 && d != statedict.Float16 && d != statedict.BFloat16) {
			return nil, usagef("--dtype %q: want bf16, f16, f32 or f64", o.DType)
		}
		out = append(out, convert.WithDType(d))
	}
	out = append(out, convert.WithStripPrefix(o.Strip...), convert.WithOnly(o.Only...), convert.WithForce(o.Force),
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

type convertReport struct {
	In   string  `json:"in"`
	Out  string  `json:"out"`
	GBps float64 `json:"gb_per_s"`
	// Requests counts the HTTP requests made reading a URL source.
	Requests *int64 `json:"requests,omitempty"`
	*convert.Summary
}

func runConvert(ctx context.Context, s *streams, o *convertOptions, copts []convert.Option) error {
	var st *objstore.Store
	ck, err := ckpt.Open(ctx, o.In, ckpt.WithObjectStore(func(s *objstore.Store) { st = s }))
	if err != nil {
		return err
	}
	defer ck.Close()
	var total int64
	for _, st := range ck.Storages {
		total += st.NBytes
	}
	bar := newProgress(s, "convert", total, o.JSON)
	sum, err := ckpt.Convert(ctx, ck, o.Out, append(copts, convert.WithProgress(bar.Add))...)
	bar.Done()
	if errors.Is(err, convert.ErrFormat) || errors.Is(err, convert.ErrOption) {
		return usageError{err: err}
	}
	if errors.Is(err, convert.ErrTooLarge) {
		return fmt.Errorf("%s: %w", o.In, err)
	}
	if err != nil {
		return err
	}
	if sum.Format == convert.Safetensors {
		for _, f := range pthOnlyFlags {
			if o.cmd != nil && o.cmd.Flags().Changed(f) {
				fmt.Fprintf(s.Err, "ckpt: warning: --%s had no effect: the output is safetensors (%s)\n", f, pthOnlyWhy[f])
			}
		}
	}
	rep := convertReport{In: o.In, Out: o.Out, Summary: sum, Requests: requests(st)}
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
	if r.Format == convert.PyTorch {
		if r.Structure == "tree" {
			fmt.Fprintln(w, "structure: as saved (nested dicts, lists, tuples and keys kept)")
		} else {
			fmt.Fprintln(w, "structure: flat state dict of dotted names")
		}
	}
	fmt.Fprintf(w, "time: %s\n", durationAndRate(r.Bytes, seconds(r.Seconds)))
	printGGUFReport(w, r.GGUF)
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
