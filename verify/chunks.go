package verify

import (
	"context"
	"errors"
	"strings"

	"github.com/ckpt-dev/ckpt/statedict"
)

// checkChunks recomputes the CRC32 of every chunk of a DCP checkpoint's
// tensors (Check's stored units) (Tensor.VerifyChunks), adding them to rep.
func checkChunks(ctx context.Context, tensors []*statedict.Tensor, rep *CheckReport, covered map[string]bool) error {
	for _, t := range tensors {
		if t.Chunks() == nil {
			continue
		}
		n, err := t.VerifyChunks(ctx)
		switch {
		case errors.Is(err, statedict.ErrChunkCRC):
			rep.CRC32s++
			covered[t.Name] = true
			rep.Mismatches = append(rep.Mismatches, Mismatch{Name: t.Name, Kind: "crc32",
				Detail: strings.TrimPrefix(err.Error(), "statedict: ")})
		case err != nil:
			return &statedict.Error{Tensor: t.Name, Err: err}
		case n > 0:
			rep.CRC32s += n
			covered[t.Name] = true
		}
	}
	return nil
}
