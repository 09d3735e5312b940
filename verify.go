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
func Check(ctx context.Context, ck *statedict.Checkpoint, opts ...verify.CheckOption) (*verify.CheckReport, error) {
	return verify.Check(ctx, ck, opts...)
}

// Compare compares every tensor of a and b by name, dtype, shape and
// value, bitwise or within a tolerance, as verify.Compare does:
// differences are in the report, the error is for failures to read.
func Compare(ctx context.Context, a, b *statedict.Checkpoint, opts verify.CompareOptions) (*verify.CompareReport, error) {
	return verify.Compare(ctx, a, b, opts)
}
