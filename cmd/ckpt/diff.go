package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ckpt-dev/ckpt"
	"github.com/spf13/cobra"
)

func init() { commands = append(commands, command{"diff", newDiffCmd}) }

type diffOptions struct {
	A, B                         string
	Rename, RenameA, RenameB     []string
	Strip, StripA, StripB        []string
	NoGGUFNames                  bool
	Atol, Rtol, MinCosine        float64
	JSON, All                    bool
	HTML, Tensor                 string
	Top                          int
	tolerance, cosine, hasTensor bool
}

// errDiffLimits makes diff exit 1 after printing its report.
var errDiffLimits = errors.New("diff: past the limits")

func newDiffCmd(s *streams) *cobra.Command {
	opts := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Measure how two checkpoints differ, tensor by tensor",
		Long: `diff compares every tensor of A and B (any two things ckpt opens: torch files,
safetensors, sharded directories, GGUF, DCP, URLs), values as float64, and
reports per tensor: equal bits or not, max absolute and relative error
(|A-B|/|B|), RMSE, cosine similarity, relative Frobenius norm ||A-B||/||B||,
NaN/Inf mismatches, shape and dtype changes; tensors only in A or B; the
worst tensors and per-layer aggregates (layers.N, h.N, blocks.N, blk.N).

Names are matched after --strip-prefix (each side's prefixes removed) and
then --rename REGEX=REPLACEMENT; --a-*/--b-* apply to one side. A GGUF file
of an architecture llama.cpp's converter maps (llama, qwen2, gpt-oss) is
matched with its Hugging Face source as 'ckpt convert' wrote it (llama.cpp's
names, q/k rows permuted back, gpt-oss's gate_up_proj compared as its gate
and up halves, expert weights read transposed), and the report says so;
--no-gguf-names turns that off.

Without limits diff only reports (exit 0). With --atol/--rtol (an element
fails past |A-B| <= atol + rtol*|B|, as torch.allclose and 'ckpt verify')
and/or --min-cosine (a tensor fails below it) it is a check: exit 1 when
a tensor fails, has another shape, or is on one side only.

'ckpt verify A B' stays the quick yes/no: bitwise, or within --atol/--rtol,
listing what differs; diff is the measurement. Both pair tensors alike.

--html FILE writes one self-contained page (no network): a sortable table,
per-layer relative error and cosine similarity plots, and a histogram of a
tensor's differences (click a row; --tensor NAME picks the first shown).`,
		Example: `  ckpt diff model.pt model.safetensors
  ckpt diff llama/ llama.gguf
  ckpt diff --b-strip-prefix module. base.safetensors ddp.pt --json
  ckpt diff --atol 1e-2 --min-cosine 0.999 model.safetensors model-fp8.safetensors
  ckpt diff base/ finetuned/ --html report.html --tensor model.layers.3.mlp.up_proj.weight`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.A, opts.B = args[0], args[1]
			f := cmd.Flags()
			opts.tolerance = f.Changed("atol") || f.Changed("rtol")
			opts.cosine = f.Changed("min-cosine")
			opts.hasTensor = f.Changed("tensor")
			if opts.Atol < 0 || opts.Rtol < 0 {
				return usagef("--atol and --rtol must not be negative")
			}
			if opts.cosine && (opts.MinCosine < -1 || opts.MinCosine > 1) {
				return usagef("--min-cosine must be from -1 to 1")
			}
			diffOpts, err := diffFlags(opts)
			if err != nil {
				return err
			}
			return runDiff(cmd.Context(), s, opts, diffOpts)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&opts.Rename, "rename", nil, "rename REGEX=REPLACEMENT on both sides before matching (repeatable)")
	f.StringArrayVar(&opts.RenameA, "a-rename", nil, "rename rule for A's names only (repeatable)")
	f.StringArrayVar(&opts.RenameB, "b-rename", nil, "rename rule for B's names only (repeatable)")
	f.StringArrayVar(&opts.Strip, "strip-prefix", nil, "strip this prefix from names on both sides (repeatable)")
	f.StringArrayVar(&opts.StripA, "a-strip-prefix", nil, "strip this prefix from A's names (repeatable)")
	f.StringArrayVar(&opts.StripB, "b-strip-prefix", nil, "strip this prefix from B's names (repeatable)")
	f.BoolVar(&opts.NoGGUFNames, "no-gguf-names", false, "match a GGUF file by its own names, without llama.cpp's map")
	f.Float64Var(&opts.Atol, "atol", 0, "check: fail a tensor with an element past |A-B| <= atol + rtol*|B|")
	f.Float64Var(&opts.Rtol, "rtol", 0, "check: relative tolerance (see --atol)")
	f.Float64Var(&opts.MinCosine, "min-cosine", 0, "check: fail a tensor whose cosine similarity is below this")
	f.BoolVar(&opts.JSON, "json", false, "print one JSON object (schema in docs/cli-json.md)")
	f.BoolVar(&opts.All, "all", false, "list every tensor, bitwise-equal ones too")
	f.StringVar(&opts.HTML, "html", "", "write a self-contained HTML report to this file")
	f.StringVar(&opts.Tensor, "tensor", "", "the tensor whose histogram the HTML page shows first (and the text report prints)")
	f.IntVar(&opts.Top, "top", 10, "how many worst tensors the summary names")
	return cmd
}

// diffFlags turns the name rules and limits into facade options.
func diffFlags(o *diffOptions) ([]ckpt.DiffOption, error) {
	var out []ckpt.DiffOption
	for _, r := range []struct {
		side ckpt.Side
		list []string
	}{{ckpt.BothSide, o.Strip}, {ckpt.SideA, o.StripA}, {ckpt.SideB, o.StripB}} {
		for _, p := range r.list {
			out = append(out, ckpt.DiffWithStripPrefix(r.side, p))
		}
	}
	for _, r := range []struct {
		side ckpt.Side
		list []string
	}{{ckpt.BothSide, o.Rename}, {ckpt.SideA, o.RenameA}, {ckpt.SideB, o.RenameB}} {
		for _, s := range r.list {
			rn, err := ckpt.ParseRename(s)
			if err != nil {
				return nil, usagef("--rename: %v", err)
			}
			out = append(out, ckpt.DiffWithRename(r.side, rn))
		}
	}
	if o.NoGGUFNames {
		out = append(out, ckpt.DiffWithoutGGUFNames())
	}
	if o.tolerance || o.cosine {
		out = append(out, ckpt.DiffWithLimits(ckpt.DiffLimits{Tolerance: o.tolerance, Atol: o.Atol, Rtol: o.Rtol,
			MinCosineSet: o.cosine, MinCosine: o.MinCosine}))
	}
	if o.Top < 0 {
		return nil, usagef("--top must not be negative")
	}
	return append(out, ckpt.DiffWithWorst(o.Top)), nil
}

type diffReport struct {
	A  string `json:"a"`
	B  string `json:"b"`
	OK bool   `json:"ok"`
	// Selected is --tensor's name, the histogram the HTML page shows first.
	Selected string `json:"selected,omitempty"`
	*ckpt.DiffReport
}

func runDiff(ctx context.Context, s *streams, o *diffOptions, opts []ckpt.DiffOption) error {
	bar := newStageBars(s, o.JSON)
	opts = append(opts, ckpt.DiffWithProgress(bar.update))
	rep, err := ckpt.Diff(ctx, o.A, o.B, opts...)
	bar.done()
	if err != nil {
		return err
	}
	out := diffReport{A: o.A, B: o.B, OK: rep.OK(), Selected: o.Tensor, DiffReport: rep}
	if o.hasTensor && findTensor(rep, o.Tensor) == nil {
		return usagef("--tensor %q: no such tensor on both sides", o.Tensor)
	}
	if o.HTML != "" {
		if err := writeDiffHTML(o.HTML, &out); err != nil {
			return err
		}
	}
	if o.JSON {
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		printDiff(s.Out, &out, o)
	}
	if !rep.OK() {
		return fmt.Errorf("%w: %d tensor(s) failed", errDiffLimits, rep.Failed)
	}
	return nil
}

// findTensor returns the report's tensor named name (matched, A's or B's
// name), or nil.
func findTensor(rep *ckpt.DiffReport, name string) *ckpt.TensorDiff {
	for _, t := range rep.Tensors {
		if t.Name == name || t.NameA == name || t.NameB == name {
			return t
		}
	}
	return nil
}
