package main

import (
	"context"
	"encoding/json"
	"path"

	"github.com/ckpt-dev/ckpt"
	"github.com/spf13/cobra"
)

func init() { commands = append(commands, command{"inspect", newInspectCmd}) }

type inspectOptions struct {
	Path   string
	JSON   bool
	Stats  bool
	Filter string
	Quant  quantFlags
}

func newInspectCmd(s *streams) *cobra.Command {
	opts := &inspectOptions{}
	cmd := &cobra.Command{
		Use:   "inspect PATH",
		Short: "Show what a checkpoint holds: tensors, dtypes, shapes, devices, values",
		Long: `Inspect reads a checkpoint's metadata (never its tensor data, unless --stats)
and shows a summary, one row per tensor, the non-tensor values, and any
foreign objects. Nothing in the file is executed.

PATH may be a torch zip (.pt/.pth/.bin), a legacy or tar torch file, a
safetensors file, a Hugging Face index.json, a directory holding one of
those, or a gzip/zstd-compressed file. The format is found from the content.

A torch.distributed.checkpoint (DCP) directory (.metadata plus __R_N.distcp
files) shows as one checkpoint: global shapes, and per tensor its number of
chunks and the ranks that saved them; chunks that leave a gap, overlap, reach
outside the shape or sit in a missing file flag the tensor BAD-CHUNKS and
are listed under Warnings.`,
		Example: `  ckpt inspect model.pt
  ckpt inspect --json checkpoints/last.ckpt | jq '.summary'
  ckpt inspect --filter 'optimizer.*' --stats run/epoch7.pth
  ckpt inspect ./llama-7b/   # a directory with model.safetensors.index.json
  ckpt inspect ./step_1000/  # a torch.distributed.checkpoint directory`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Path = args[0]
			if opts.Filter != "" {
				if _, err := path.Match(opts.Filter, ""); err != nil {
					return usagef("--filter %q: %v", opts.Filter, err)
				}
			}
			return runInspect(cmd.Context(), s, opts)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.JSON, "json", false, "print one JSON object (schema in docs/cli-json.md)")
	f.BoolVar(&opts.Stats, "stats", false, "read the data and add min, max, mean and NaN/Inf counts per tensor")
	f.StringVar(&opts.Filter, "filter", "", "only tensors whose name matches this glob (* matches dots too)")
	opts.Quant.add(f)
	return cmd
}

// The report types are the library's (ckpt.Inspect); these names are
// the CLI's and its tests' short forms.
type (
	inspectReport = ckpt.InspectReport
	inspectTensor = ckpt.InspectTensor
	inspectObject = ckpt.InspectObject
)

func runInspect(ctx context.Context, s *streams, opts *inspectOptions) error {
	var st *ckpt.ObjectStore
	ck, err := ckpt.Open(ctx, opts.Path, append(opts.Quant.options(), ckpt.WithObjectStore(func(s *ckpt.ObjectStore) { st = s }))...)
	if err != nil {
		return err
	}
	defer ck.Close()
	rep := ckpt.Inspect(ck, opts.Path, func(name string) bool { return matchName(opts.Filter, name) })
	if opts.Stats {
		if err := addStats(ctx, s, ck, rep, opts.JSON); err != nil {
			return err
		}
	}
	rep.Requests = requests(st)
	if opts.JSON {
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printInspect(s.Out, rep, opts.Filter)
	return nil
}

// matchName reports whether name matches the --filter glob ("" matches all).
func matchName(glob, name string) bool {
	if glob == "" {
		return true
	}
	ok, _ := path.Match(glob, name)
	return ok
}

// addStats computes the statistics of the report's tensors, with a
// progress bar on stderr unless quiet.
func addStats(ctx context.Context, s *streams, ck *ckpt.Checkpoint, rep *inspectReport, quiet bool) error {
	bar := newProgress(s, "stats", rep.StatsBytes(), quiet)
	defer bar.Done()
	return rep.AddStats(ctx, ck, bar.Add)
}
