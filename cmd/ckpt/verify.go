package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/ckpt-dev/ckpt"
	"github.com/spf13/cobra"
)

func init() { commands = append(commands, command{"verify", newVerifyCmd}) }

type verifyOptions struct {
	A, B       string
	Atol, Rtol float64
	JSON       bool
}

// errMismatch makes verify exit 1 after printing its report.
var errMismatch = errors.New("verify: mismatch")

func newVerifyCmd(s *streams) *cobra.Command {
	opts := &verifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify A [B]",
		Short: "Check a checkpoint's checksums, or compare two checkpoints tensor by tensor",
		Long: `With one argument, verify recomputes every checksum A carries: the CRC32 of each
zip record, and the xxh64c digests 'ckpt convert' records in safetensors
metadata. Each mismatch is reported by tensor name.

With two, it compares every tensor of A and B by name, dtype, shape and value:
bitwise, or within --atol/--rtol (|a-b| <= atol + rtol*|b|, after casting both
to float64, which also allows different dtypes). Aliases a safetensors
conversion dropped are resolved to the tensor kept in their place, and a GGUF
file 'ckpt convert' wrote from a llama, qwen2 or gpt-oss model is matched with
its source (llama.cpp's names, splits and permutation undone), as 'ckpt diff'
matches them; its wider float tensors (F32 norms of a bfloat16 model) are
compared by value.
verify answers yes or no; 'ckpt diff' measures how far apart two checkpoints
are (errors, cosine similarity, per layer, an HTML report).

Exit status 1 on any mismatch or difference.`,
		Example: `  ckpt verify model.safetensors
  ckpt verify model.pt model.safetensors
  ckpt verify --atol 1e-2 model.pt model-bf16.safetensors`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.A = args[0]
			if len(args) == 2 {
				opts.B = args[1]
			} else if cmd.Flags().Changed("atol") || cmd.Flags().Changed("rtol") {
				return usagef("--atol and --rtol need two checkpoints")
			}
			if opts.Atol < 0 || opts.Rtol < 0 {
				return usagef("--atol and --rtol must not be negative")
			}
			tol := cmd.Flags().Changed("atol") || cmd.Flags().Changed("rtol")
			return runVerify(cmd.Context(), s, opts, tol)
		},
	}
	f := cmd.Flags()
	f.Float64Var(&opts.Atol, "atol", 0, "absolute tolerance for value comparison (two checkpoints)")
	f.Float64Var(&opts.Rtol, "rtol", 0, "relative tolerance for value comparison (two checkpoints)")
	f.BoolVar(&opts.JSON, "json", false, "print one JSON object (schema in docs/cli-json.md)")
	return cmd
}

type verifyReport struct {
	A  string `json:"a"`
	B  string `json:"b,omitempty"`
	OK bool   `json:"ok"`
	*ckpt.CheckReport
	*ckpt.CompareReport
}

func runVerify(ctx context.Context, s *streams, o *verifyOptions, tol bool) error {
	var open []ckpt.Option
	if o.B == "" {
		// Check checks a dequantized weight by its stored codes and
		// scales (QuantStored.StoredTensors), so an ordinary open gives
		// the same report; the raw open is kept so that a release whose
		// scheme ckpt refuses to dequantize still has its checksums
		// verified.
		open = append(open, ckpt.WithRaw())
	}
	a, err := ckpt.Open(ctx, o.A, open...)
	if err != nil {
		return err
	}
	defer a.Close()
	rep := verifyReport{A: o.A, B: o.B}
	var bad int
	bar := newStageBars(s, o.JSON)
	progress := func(done, total int64) { bar.update(ckpt.Progress{Stage: "verify", Done: done, Total: total}) }
	if o.B == "" {
		rep.CheckReport, err = ckpt.Check(ctx, a, ckpt.WithCheckProgress(progress))
		bar.done()
		if err != nil {
			return err
		}
		bad = len(rep.CheckReport.Mismatches)
	} else {
		b, err := ckpt.Open(ctx, o.B)
		if err != nil {
			return err
		}
		defer b.Close()
		rep.CompareReport, err = ckpt.Compare(ctx, a, b, ckpt.CompareOptions{Tolerance: tol, Atol: o.Atol, Rtol: o.Rtol, Progress: progress})
		bar.done()
		if err != nil {
			return err
		}
		bad = len(rep.CompareReport.Differences)
	}
	rep.OK = bad == 0
	if o.JSON {
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printVerify(s.Out, &rep)
	}
	if bad > 0 {
		return fmt.Errorf("%w: %d problem(s) found", errMismatch, bad)
	}
	return nil
}

func printVerify(w io.Writer, r *verifyReport) {
	var list []ckpt.Mismatch
	if c := r.CheckReport; c != nil {
		fmt.Fprintf(w, "%s: %d CRC32s and %d digests recomputed", clean(r.A), c.CRC32s, c.Digests)
		if len(c.Unverified) > 0 {
			fmt.Fprintf(w, "; %d tensors carry no checksum", len(c.Unverified))
		}
		fmt.Fprintln(w)
		list = c.Mismatches
	} else {
		fmt.Fprintf(w, "%s vs %s: %d tensors compared\n", clean(r.A), clean(r.B), r.CompareReport.Compared)
		list = r.CompareReport.Differences
	}
	for _, m := range list {
		fmt.Fprintf(w, "  %s: %s: %s\n", displayName(m.Name), m.Kind, clean(m.Detail))
	}
	if r.OK {
		fmt.Fprintln(w, "OK")
	}
}
