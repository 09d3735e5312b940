package convert

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/atomicfile"
	"github.com/ckpt-dev/ckpt/safetensors"
	"github.com/ckpt-dev/ckpt/statedict"
)

// Safetensors is the safetensors format: one file, or shards and an
// index.json (WithMaxShardSize), optionally zstd-compressed.
const Safetensors Format = "safetensors"

// safetensorsOut writes safetensors (write.go holds the writer).
type safetensorsOut struct{ baseOutput }

func (o safetensorsOut) convert(ctx context.Context, c *config, ck *statedict.Checkpoint, out string, start time.Time) (*Summary, error) {
	return c.convertFiles(ctx, ck, out, start, Safetensors, o)
}

func (safetensorsOut) names() (string, string) { return "model", ".safetensors" }

func (safetensorsOut) unsupported(t *statedict.Tensor) string {
	if why := unsupportedData(t); why != "" {
		return why
	}
	if code, ok := t.DType.Safetensors(); !ok || !knownSafetensors(code) {
		return "safetensors has no dtype for " + t.DType.String()
	}
	if _, ok := dtype.SafetensorsShape(t.DType, t.Shape); !ok {
		return "safetensors cannot hold a 0-dim " + t.DType.String() + " tensor (packed values, no last dimension)"
	}
	return ""
}

func (safetensorsOut) value(v any, dropFloats bool) (any, string) {
	return plainValue(v, true, dropFloats)
}

func (safetensorsOut) aliases() aliasing { return aliasDedupe }

func (safetensorsOut) splits() bool { return true }

func (safetensorsOut) checkPlan(c *config, ck *statedict.Checkpoint, items []*item) error {
	return c.checkMaterialized(ck, items)
}

// metadata is the plan's, and a GGUF input's header, which rides along
// for a GGUF rebuilt from this output (see GGUFKey).
func (safetensorsOut) metadata(c *config, p *plan) (map[string]string, error) {
	md, err := p.metadata()
	if err != nil || c.ggufKeep == nil {
		return md, err
	}
	b, err := json.Marshal(c.ggufKeep)
	if err != nil {
		return nil, err
	}
	md[GGUFKey] = string(b)
	return md, nil
}

func (safetensorsOut) headLen(c *config, items []*item, md map[string]string) (int64, error) {
	if c.compress != "" {
		return 0, nil
	}
	return safetensorsHeadLen(items, md)
}

func (safetensorsOut) write(ctx context.Context, c *config, t *tempFile, items []*item, _ []value, _ *tree, md map[string]string) (int64, error) {
	if c.compress != "zstd" {
		return c.writeSafetensors(ctx, t, items, md)
	}
	// The digests are patched into the header after the data, so the
	// plain file is written first, then compressed.
	var plain *tempFile
	var err error
	if c.dest != nil {
		// Staged in the local temporary directory.
		plain, err = createTemp(filepath.Join(os.TempDir(), "ckpt-plain.safetensors"), atomicfile.Unlimited())
	} else {
		plain, err = createTemp(t.final, atomicfile.Unlimited())
	}
	if err != nil {
		return 0, err
	}
	defer plain.discard()
	n, err := c.writeSafetensors(ctx, plain, items, md)
	if err != nil {
		return 0, err
	}
	bw := c.output(t)
	if err := compressFile(ctx, bw, plain.file.OS()); err != nil {
		return 0, err
	}
	return n, bw.Flush()
}

// sizes is each shard's header, digests included (their length does not
// depend on their values), then its tensors' bytes.
func (o safetensorsOut) sizes(c *config, p *plan, groups [][]*item) ([]int64, error) {
	if c.compress != "" {
		return o.baseOutput.sizes(c, p, groups)
	}
	md, err := o.metadata(c, p)
	if err != nil {
		return nil, err
	}
	sizes := make([]int64, len(groups))
	for i, g := range groups {
		n, err := safetensorsHeadLen(g, md)
		if err != nil {
			return nil, err
		}
		for _, it := range g {
			n += it.nbytes()
		}
		sizes[i] = n
	}
	return sizes, nil
}

func (safetensorsOut) tally(sum *Summary, d dtype.DType) {
	if code, _ := d.Safetensors(); safetensors.Recent(code) {
		sum.RecentCodes = append(sum.RecentCodes, code)
	}
}

// The header of a safetensors output whose data is at least padMin bytes
// is padded with trailing spaces (the format allows any whitespace after
// the JSON; the reference writer pads to 8) so that the data starts at a
// multiple of headerAlign. Tensors copied in the kernel then land on
// page-aligned output offsets: a tensor whose input offset is also
// page-aligned (the first of a safetensors input padded alike) is copied
// page for page, as cp copies, and the others write one partial page per
// source page instead of two; measured on the 2-core VM, 1 GB copied from
// 64 bytes into a file to a page-aligned offset took 0.34 CPU-s against
// 0.36-0.37 to an offset 100 bytes in, and 0.27-0.28 congruent
// (docs/benchmarks.md). Smaller outputs keep the reference writer's
// 8-byte padding, so that a page of spaces is never a large part of one.
const headerAlign = 4096

// padMin is the least data padded for; a variable, for tests.
var padMin int64 = 1 << 20

// dataLen is the size of the data section holding items.
func dataLen(items []*item) int64 {
	var n int64
	for _, it := range items {
		n += it.nbytes()
	}
	return n
}

// headerOpts returns the safetensors writer options for a data section
// of data bytes: the page alignment above from padMin bytes on.
func headerOpts(data int64) []safetensors.WriterOption {
	if data < padMin {
		return nil
	}
	return []safetensors.WriterOption{safetensors.WithDataAlign(headerAlign)}
}
