package convert

import (
	"context"
	"io"
	"time"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/ckpt-dev/ckpt/torchzip"
)

// PyTorch is torch.save's zip format (.pt, .pth, .bin, .ckpt): the
// source's object tree where it can be kept (Summary.Structure), views of
// one storage kept as views.
const PyTorch Format = "pth"

// pthOut writes torch.save zip files (write.go and tree.go hold the
// pickle and storage writers).
type pthOut struct{ baseOutput }

func (o pthOut) convert(ctx context.Context, c *config, ck *statedict.Checkpoint, out string, start time.Time) (*Summary, error) {
	return c.convertFiles(ctx, ck, out, start, PyTorch, o)
}

func (pthOut) names() (string, string) { return "pytorch_model", ".bin" }

func (pthOut) unsupported(t *statedict.Tensor) string { return unsupportedTorch(t) }

// unsupportedTorch says why a tensor cannot be written to a torch pickle
// (.pth, DCP), or "".
func unsupportedTorch(t *statedict.Tensor) string {
	if why := unsupportedData(t); why != "" {
		return why
	}
	if t.Storage.DType.StorageClass() == "" && !torchzip.Torch2DType(t.Storage.DType) {
		return "torch has no storage for " + t.Storage.DType.String()
	}
	return ""
}

func (pthOut) value(v any, dropFloats bool) (any, string) { return plainValue(v, false, dropFloats) }

func (pthOut) aliases() aliasing { return aliasRestore }

func (pthOut) keepsTree() bool { return true }

func (pthOut) storageShards() bool { return true }

func (pthOut) countsFloats() bool { return true }

func (pthOut) rankExt() string { return ".pth" }

func (pthOut) write(ctx context.Context, c *config, t *tempFile, items []*item, values []value, tr *tree, _ map[string]string) (int64, error) {
	bw := c.output(t)
	var w io.Writer = bw
	var enc io.WriteCloser
	if c.compress == "zstd" {
		var err error
		if enc, err = newZstd(bw); err != nil {
			return 0, err
		}
		w = enc
	}
	n, err := c.writePth(ctx, w, items, values, tr)
	if err == nil && enc != nil {
		err = enc.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	return n, err
}

func (pthOut) tally(sum *Summary, d dtype.DType) {
	if torchzip.Torch2DType(d) {
		sum.Torch2DTypes = append(sum.Torch2DTypes, d.String())
	}
}
