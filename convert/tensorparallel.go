package convert

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ckpt-dev/ckpt/statedict"
)

// RankFileName is the name of rank's file among world ranks in the output
// directory of TensorParallel: rank-00000-of-00004.safetensors (ext
// ".safetensors" or ".pth").
func RankFileName(rank, world int, ext string) string {
	return fmt.Sprintf("rank-%05d-of-%05d%s", rank, world, ext)
}

// TensorParallel writes one file per rank of a tensor-parallel group of
// world ranks into dir (created if missing): rank r's file holds every
// tensor of ck under its own name, split along the dimension the first
// matching rule names (statedict.ChunkRange: torch.chunk's placement, the
// first ranks get ceil(n/world)) or whole when no rule matches, and ck's
// values. Each file is written by Convert with opts (safetensors unless
// WithFormat(PyTorch)); each split tensor's bytes are read once over all
// ranks, a replicated tensor's once per rank. On error the files already
// written are removed.
func TensorParallel(ctx context.Context, ck *statedict.Checkpoint, dir string, world int, rules []statedict.SplitRule, opts ...Option) ([]*Summary, error) {
	if world < 1 {
		return nil, fmt.Errorf("%w: a tensor-parallel world of %d ranks", ErrOption, world)
	}
	c := &config{}
	for _, o := range opts {
		o(c)
	}
	if c.shard > 0 {
		return nil, fmt.Errorf("%w: shards of tensor-parallel files", ErrOption)
	}
	ext := ".safetensors"
	if c.format == PyTorch {
		ext = ".pth"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var sums []*Summary
	var written []string
	for r := range world {
		part, err := statedict.RankCheckpoint(ck, r, world, rules)
		if err == nil {
			var sum *Summary
			sum, err = Convert(ctx, part, filepath.Join(dir, RankFileName(r, world, ext)), opts...)
			if err == nil {
				sums = append(sums, sum)
				written = append(written, sum.Files...)
				continue
			}
		}
		var errs []error
		for _, f := range written {
			errs = append(errs, os.Remove(f))
		}
		return nil, errors.Join(append([]error{fmt.Errorf("rank %d of %d: %w", r, world, err)}, errs...)...)
	}
	return sums, nil
}
