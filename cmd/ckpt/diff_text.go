package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/ckpt-dev/ckpt"
	"github.com/ckpt-dev/ckpt/internal/human"
)

// printDiff renders a diff report as text: a summary, the table of
// tensors (those that differ, or all with --all), the worst tensors, the
// layers and, with --tensor, its histogram.
func printDiff(w io.Writer, r *diffReport, o *diffOptions) {
	rep := r.DiffReport
	fmt.Fprintf(w, "%s vs %s: %d tensors compared, %d bitwise equal, %d differ", clean(r.A), clean(r.B), rep.Compared, rep.BitwiseEqual, rep.Differing)
	if n := len(rep.OnlyInA) + len(rep.OnlyInB); n > 0 {
		fmt.Fprintf(w, ", %d only in A, %d only in B", len(rep.OnlyInA), len(rep.OnlyInB))
	}
	fmt.Fprintln(w)
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", clean(n))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TENSOR\tDTYPE\tSIZE\tMAX ABS\tMAX REL\tRMSE\tCOSINE\tREL FROB\t")
	shown := 0
	for _, t := range rep.Tensors {
		if !o.All && t.BitwiseEqual {
			continue
		}
		shown++
		fmt.Fprintf(tw, "%s\t%s\t%s\t", pairName(t), dtypes(t), human.Bytes(t.Bytes))
		if t.Problem != "" {
			fmt.Fprintf(tw, "\t\t\t\t\t%s\n", clean(t.Problem))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", stat(t.MaxAbs), stat(t.MaxRel), stat(t.RMSE), cos(t.Cosine), stat(t.RelFrobenius), tensorNote(t))
	}
	if shown > 0 {
		tw.Flush()
	}
	for _, n := range rep.OnlyInA {
		fmt.Fprintf(w, "  only in A: %s\n", displayName(n))
	}
	for _, n := range rep.OnlyInB {
		fmt.Fprintf(w, "  only in B: %s\n", displayName(n))
	}
	if len(rep.Worst) > 0 {
		fmt.Fprintf(w, "worst: %s\n", clean(strings.Join(rep.Worst, ", ")))
	}
	if len(rep.Layers) > 0 && rep.Differing > 0 {
		lw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(lw, "LAYER\tTENSORS\tDIFFER\tMAX REL\tREL FROB\tCOSINE\tMIN COSINE\t")
		for _, l := range rep.Layers {
			fmt.Fprintf(lw, "%d\t%d\t%d\t%s\t%s\t%s\t%s\t\n", l.Layer, l.Tensors, l.Differing, stat(l.MaxRel), stat(l.RelFrobenius), cos(l.Cosine), cos(l.MinCosine))
		}
		lw.Flush()
	}
	if o.Tensor != "" {
		if t := findTensor(rep, o.Tensor); t != nil {
			printHistogram(w, t)
		}
	}
	switch {
	case rep.Limits == nil:
	case rep.OK():
		fmt.Fprintln(w, "OK: within the limits")
	default:
		fmt.Fprintf(w, "FAILED: %d tensor(s) past the limits\n", rep.Failed)
	}
}

// pairName is a tensor's matched name and, for a pair read through a
// GGUF file's map, the other side's own name and how it was read:
// "blk.0.ffn_gate_exps.weight (model.layers.0.mlp.experts.gate_up_proj,
// even outputs, transposed)".
func pairName(t *ckpt.TensorDiff) string {
	if t.Via == "" {
		return displayName(t.Name)
	}
	other := t.NameA
	if other == "" {
		other = t.NameB
	}
	return displayName(t.Name) + " (" + clean(other) + ", " + clean(t.Via) + ")"
}

func dtypes(t *ckpt.TensorDiff) string {
	if t.DTypeA == t.DTypeB {
		return t.DTypeA
	}
	return t.DTypeA + "->" + t.DTypeB
}

// stat prints a statistic in 4 significant digits.
func stat(s ckpt.DiffStat) string {
	f := float64(s)
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsNaN(f):
		return "nan"
	}
	return fmt.Sprintf("%.4g", f)
}

// cos prints a cosine similarity in 7 significant digits (they sit near 1).
func cos(s ckpt.DiffStat) string { return fmt.Sprintf("%.7g", float64(s)) }

// tensorNote is the last column: equal bits, NaN/Inf mismatches, failures.
func tensorNote(t *ckpt.TensorDiff) string {
	var parts []string
	if t.BitwiseEqual {
		parts = append(parts, "bitwise equal")
	} else if t.Differing == 0 {
		parts = append(parts, "equal values")
	}
	if t.NaNMismatch > 0 {
		parts = append(parts, fmt.Sprintf("%d NaN mismatch", t.NaNMismatch))
	}
	if t.InfMismatch > 0 {
		parts = append(parts, fmt.Sprintf("%d Inf mismatch", t.InfMismatch))
	}
	if len(t.Failed) > 0 {
		parts = append(parts, "FAIL "+strings.Join(t.Failed, ","))
	}
	return strings.Join(parts, "; ")
}

// printHistogram draws a tensor's histogram of differences as text bars.
func printHistogram(w io.Writer, t *ckpt.TensorDiff) {
	h := t.Histogram
	fmt.Fprintf(w, "differences A-B of %s (by binary order of magnitude):\n", displayName(t.Name))
	if h == nil {
		fmt.Fprintln(w, "  (no values compared)")
		return
	}
	var top int64 = max(h.Zero, 1)
	for i := range h.Neg {
		top = max(top, h.Neg[i], h.Pos[i])
	}
	bar := func(label string, n int64) {
		if n > 0 {
			fmt.Fprintf(w, "  %18s %12d %s\n", label, n, strings.Repeat("#", int(1+39*n/top)))
		}
	}
	for i := len(h.Neg) - 1; i >= 0; i-- {
		bar(fmt.Sprintf("-[2^%d,2^%d)", h.Lo+i-1, h.Lo+i), h.Neg[i])
	}
	bar("0", h.Zero)
	for i := range h.Pos {
		bar(fmt.Sprintf("+[2^%d,2^%d)", h.Lo+i-1, h.Lo+i), h.Pos[i])
	}
}
