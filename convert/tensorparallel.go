package convert

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"time"

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
//
// With WithDestination, dir is a prefix in the Destination ("" or ending
// in "/") and the files are its objects; without it, dir is a local
// directory, and a URL (anything with "://") is refused with ErrOption
// before anything is written: ckpt.ConvertTensorParallel writes to
// s3://, gs:// and az:// URLs.
func TensorParallel(ctx context.Context, ck *statedict.Checkpoint, dir string, world int, rules []statedict.SplitRule, opts ...Option) ([]*Summary, error) {
	if world < 1 {
		return nil, fmt.Errorf("%w: a tensor-parallel world of %d ranks", ErrOption, world)
	}
	c := newConfig(opts)
	if c.shard > 0 {
		return nil, fmt.Errorf("%w: shards of tensor-parallel files", ErrOption)
	}
	if err := c.checkLocal(dir); err != nil {
		return nil, err
	}
	ext := ".safetensors"
	if o, ok := outputs[c.format]; ok {
		ext = o.rankExt()
	}
	join := filepath.Join
	if c.dest != nil {
		join = path.Join
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var sums []*Summary
	var written []string // names in dir's file system or Destination
	for r := range world {
		part, err := statedict.RankCheckpoint(ck, r, world, rules)
		if err == nil {
			var sum *Summary
			name := join(dir, RankFileName(r, world, ext))
			sum, err = Convert(ctx, part, name, opts...)
			if err == nil {
				sums = append(sums, sum)
				written = append(written, name)
				continue
			}
		}
		errs := []error{fmt.Errorf("rank %d of %d: %w", r, world, err)}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		for _, f := range written {
			if c.dest != nil {
				errs = append(errs, c.dest.Remove(rctx, f))
			} else {
				errs = append(errs, os.Remove(f))
			}
		}
		return nil, errors.Join(errs...)
	}
	return sums, nil
}
