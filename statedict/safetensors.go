package statedict

import (
	"fmt"
	"io"
	"strconv"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/safetensors"
)

// readSafetensors adapts a safetensors file: every tensor is a contiguous
// cpu tensor over a storage of its own.
func readSafetensors(r io.ReaderAt, size int64, cfg *config) (*Checkpoint, error) {
	f, err := safetensors.Parse(r, size, safetensors.WithMaxHeaderSize(cfg.maxHeader), safetensors.WithMaxTensors(cfg.maxTensors))
	if err != nil {
		return nil, &Error{Record: "header", Err: err}
	}
	ck := &Checkpoint{Format: FormatSafetensors, ByteOrder: "little", Metadata: f.Metadata}
	if !cfg.shard && dcp.ChunksAway(f.Metadata) {
		ck.Warnings = append(ck.Warnings, "the file holds chunks of a safetensors DCP checkpoint (its DCP_SHARDING_INFO places them away from the origin): open its directory for the whole tensors")
	}
	for _, ti := range f.Tensors {
		dt, ok := dtype.FromSafetensors(ti.DType)
		if !ok {
			return nil, &Error{Record: "header", Tensor: ti.Name, Err: fmt.Errorf("%w: safetensors dtype %s has no torch equivalent ckpt reads", ErrUnsupported, ti.DType)}
		}
		shape, ok := dtype.TorchShape(dt, ti.Shape)
		if !ok {
			return nil, &Error{Record: "header", Tensor: ti.Name, Err: fmt.Errorf("%w: safetensors %s tensor of shape %s: %s packs %d values per element and needs %s", ErrUnsupported, ti.DType, shapeText(ti.Shape), dt, dtype.ValuesPerElement(dt), lastDimRule(dt))}
		}
		n := ti.End - ti.Begin
		s := &Storage{Key: ti.Name, Location: "cpu", DType: dt, NBytes: n, Record: "data",
			src: &sectionSource{r: r, off: f.DataOffset + ti.Begin, n: n}}
		t := &Tensor{Name: ti.Name, DType: dt, Shape: shape, Strides: contiguousStrides(shape),
			Device: "cpu", Storage: s, Layout: Strided}
		ck.Tensors = append(ck.Tensors, t)
		ck.Storages = append(ck.Storages, s)
	}
	return ck, nil
}

// shapeText writes a shape as Python does: [2, 3], [] for 0-dim.
func shapeText(shape []int64) string {
	b := []byte{'['}
	for i, s := range shape {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, s, 10)
	}
	return string(append(b, ']'))
}

// lastDimRule says what last dimension a packed dtype's safetensors shape needs.
func lastDimRule(d dtype.DType) string {
	if k := dtype.ValuesPerElement(d); k != 2 {
		return fmt.Sprintf("a last dimension that is a multiple of %d", k)
	}
	return "an even last dimension"
}
