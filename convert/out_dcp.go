package convert

import (
	"context"
	"time"

	"github.com/ckpt-dev/ckpt/statedict"
)

// DCP is torch.distributed.checkpoint's FileSystemWriter layout: a
// directory with .metadata and __R_0.distcp files (see WithDCPRanks). A
// nested input ({"model": ..., "optim": ...} saved with torch.save, or a
// DCP directory) keeps its nesting: the fqns, planner_data paths and
// whole-leaf values torch's default save planner would give it
// (Summary.Structure "tree"; docs/dcp-write.md).
const DCP Format = "dcp"

// dcpOut writes DCP directories with its own pipeline (convertDCP in
// dcp_write.go, convertDCPSafetensors in dcp_hf.go): one file per rank
// and the .metadata, not the shards of convertFiles.
type dcpOut struct{ baseOutput }

func (dcpOut) convert(ctx context.Context, c *config, ck *statedict.Checkpoint, out string, start time.Time) (*Summary, error) {
	return c.convertDCP(ctx, ck, out, start)
}

func (dcpOut) unsupported(t *statedict.Tensor) string { return unsupportedTorch(t) }

func (dcpOut) value(v any, dropFloats bool) (any, string) { return plainValue(v, false, dropFloats) }
