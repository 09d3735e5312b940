package ckpt

import (
	"context"

	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/ckpt-dev/ckpt/verify"
)

// Check recomputes every checksum ck carries (zip records' CRC32s, DCP
// chunks' CRC32s, the digests ckpt convert records in safetensors
// metadata), as verify.Check does: mismatches are in the report, the
// error is for failures to read.
func Check(ctx context.Context, ck *statedict.Checkpoint, opts ...CheckOption) (*CheckReport, error) {
	return verify.Check(ctx, ck, opts...)
}

// Compare compares every tensor of a and b by name, dtype, shape and
// value, bitwise or within a tolerance, as verify.Compare does:
// differences are in the report, the error is for failures to read.
func Compare(ctx context.Context, a, b *statedict.Checkpoint, opts CompareOptions) (*CompareReport, error) {
	return verify.Compare(ctx, a, b, opts)
}

// The report and option types of Check and Compare, named at the door.
type (
	// CheckReport is what Check found (verify.CheckReport).
	CheckReport = verify.CheckReport
	// CompareReport is what Compare found (verify.CompareReport).
	CompareReport = verify.CompareReport
	// CompareOptions are Compare's tolerances and progress callback
	// (verify.CompareOptions).
	CompareOptions = verify.CompareOptions
	// CheckOption configures Check (verify.CheckOption).
	CheckOption = verify.CheckOption
	// Mismatch is one difference a report lists (verify.Mismatch).
	Mismatch = verify.Mismatch
)

// WithCheckProgress reports the bytes Check has read (verify.WithCheckProgress).
func WithCheckProgress(fn func(done, total int64)) CheckOption { return verify.WithCheckProgress(fn) }
