package ckpt

import (
	"context"

	"github.com/ckpt-dev/ckpt/verify"
)

// Diff opens a and b (anything Open opens: files, directories, URLs) and
// measures how their tensors differ, as verify.Diff does: per tensor,
// bitwise equality, max absolute and relative error, RMSE, cosine
// similarity, relative Frobenius norm of the difference, NaN/Inf
// mismatches, shape and dtype changes; tensors on one side only; the
// worst tensors and per-layer aggregates. A Llama-family GGUF file is
// matched with its source as ckpt convert wrote it (the report's notes say
// so). With DiffWithLimits it is a check: DiffReport.Failed counts the
// tensors past the limits. The error is for failures to open or read, not
// for differences.
func Diff(ctx context.Context, a, b string, opts ...DiffOption) (*DiffReport, error) {
	var cfg diffConfig
	for _, o := range opts {
		o(&cfg)
	}
	ca, err := Open(ctx, a, cfg.open...)
	if err != nil {
		return nil, err
	}
	defer ca.Close()
	cb, err := Open(ctx, b, cfg.open...)
	if err != nil {
		return nil, err
	}
	defer cb.Close()
	return verify.Diff(ctx, ca, cb, cfg.diff...)
}

// DiffOption configures Diff.
type DiffOption func(*diffConfig)

type diffConfig struct {
	open []Option
	diff []verify.DiffOption
}

func diffOpt(o verify.DiffOption) DiffOption {
	return func(c *diffConfig) { c.diff = append(c.diff, o) }
}

// The report and option types of Diff, named at the door.
type (
	// DiffReport is what Diff measured (verify.DiffReport).
	DiffReport = verify.DiffReport
	// TensorDiff is one tensor's measures (verify.TensorDiff).
	TensorDiff = verify.TensorDiff
	// LayerDiff aggregates one layer's tensors (verify.LayerDiff).
	LayerDiff = verify.LayerDiff
	// DiffHistogram bins one tensor's differences (verify.Histogram).
	DiffHistogram = verify.Histogram
	// DiffStat is a statistic, null in JSON when not finite (verify.Stat).
	DiffStat = verify.Stat
	// DiffLimits make Diff a check (verify.Limits).
	DiffLimits = verify.Limits
	// Side names the checkpoints a name rule applies to (verify.Side).
	Side = verify.Side
)

// The sides of DiffWithStripPrefix and DiffWithRename.
const (
	SideA    = verify.SideA
	SideB    = verify.SideB
	BothSide = verify.Both
)

// DiffWithStripPrefix strips p from the names of side before matching
// (verify.WithStripPrefix).
func DiffWithStripPrefix(side Side, p string) DiffOption {
	return diffOpt(verify.WithStripPrefix(side, p))
}

// DiffWithRename applies a rename rule (ParseRename) to the names of side
// before matching, after prefixes are stripped (verify.WithRename).
func DiffWithRename(side Side, r Rename) DiffOption {
	return diffOpt(verify.WithRename(side, r.Pattern, r.Replacement))
}

// DiffWithoutGGUFNames matches a Llama-family GGUF file by its own names
// (verify.WithoutGGUFNames).
func DiffWithoutGGUFNames() DiffOption { return diffOpt(verify.WithoutGGUFNames()) }

// DiffWithLimits makes Diff a check (verify.WithLimits).
func DiffWithLimits(l DiffLimits) DiffOption { return diffOpt(verify.WithLimits(l)) }

// DiffWithWorst sets how many tensors the report's Worst names
// (verify.WithWorst).
func DiffWithWorst(n int) DiffOption { return diffOpt(verify.WithWorst(n)) }

// DiffWithChunkElements sets the elements decoded at a time per comparing
// goroutine (verify.WithChunkElements).
func DiffWithChunkElements(n int64) DiffOption { return diffOpt(verify.WithChunkElements(n)) }

// DiffWithProgress has fn called with the bytes of A compared, as stage
// "diff".
func DiffWithProgress(fn func(Progress)) DiffOption {
	return diffOpt(verify.WithDiffProgress(func(done, total int64) {
		fn(Progress{Stage: StageDiff, Done: done, Total: total})
	}))
}

// DiffWithOpenOptions passes options to the Open of both sides (an
// object store's settings, for instance).
func DiffWithOpenOptions(opts ...Option) DiffOption {
	return func(c *diffConfig) { c.open = append(c.open, opts...) }
}

// StageDiff is Diff's progress stage.
const StageDiff Stage = "diff"
