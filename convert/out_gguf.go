package convert

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ckpt-dev/ckpt/statedict"
)

// GGUF is the GGUF output format (.gguf).
const GGUF Format = "gguf"

// ggufOut writes GGUF files (gguf.go holds the writer, gguf_llama.go the
// Hugging Face architectures).
type ggufOut struct{ baseOutput }

func (o ggufOut) convert(ctx context.Context, c *config, ck *statedict.Checkpoint, out string, start time.Time) (*Summary, error) {
	return c.convertFiles(ctx, ck, out, start, GGUF, o)
}

func (ggufOut) names() (string, string) { return "model", ".gguf" }

func (ggufOut) checkLayout(c *config, out string) error {
	if c.shard > 0 || c.compress != "" || strings.HasSuffix(out, ".index.json") {
		return fmt.Errorf("%w: a GGUF output is one file: no --max-shard-size, --compress or index", ErrOption)
	}
	return nil
}

func (ggufOut) unsupported(t *statedict.Tensor) string {
	if why := unsupportedData(t); why != "" {
		return why
	}
	return ggufUnsupported(t)
}

func (ggufOut) value(any, bool) (any, string) {
	return nil, "GGUF holds tensors and typed metadata only (values go in with --gguf-meta)"
}

func (ggufOut) aliases() aliasing { return aliasDedupe }

func (ggufOut) prepare(c *config, ck *statedict.Checkpoint) error {
	c.ggufTypes = &GGUFTypes{}
	return c.ggufPrepare(ck)
}

func (ggufOut) write(ctx context.Context, c *config, t *tempFile, items []*item, _ []value, _ *tree, _ map[string]string) (int64, error) {
	bw := c.output(t)
	n, err := c.writeGGUF(ctx, bw, items)
	if err == nil {
		err = bw.Flush()
	}
	return n, err
}
