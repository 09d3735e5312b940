package statedict

import (
	"fmt"
	"io"

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
	for _, ti := range f.Tensors {
		dt, ok := DTypeFromSafetensors(ti.DType)
		if !ok {
			return nil, &Error{Record: "header", Tensor: ti.Name, Err: fmt.Errorf("%w: safetensors dtype %s has no torch equivalent ckpt reads", ErrUnsupported, ti.DType)}
		}
		n := ti.End - ti.Begin
		s := &Storage{Key: ti.Name, Location: "cpu", DType: dt, NBytes: n, Record: "data",
			src: &sectionSource{r: r, off: f.DataOffset + ti.Begin, n: n}}
		t := &Tensor{Name: ti.Name, DType: dt, Shape: ti.Shape, Strides: contiguousStrides(ti.Shape),
			Device: "cpu", Storage: s, Layout: Strided}
		ck.Tensors = append(ck.Tensors, t)
		ck.Storages = append(ck.Storages, s)
	}
	return ck, nil
}
