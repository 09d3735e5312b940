package quant

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ckpt-dev/ckpt/dtype"
)

// This file holds what the scheme codecs (mxfp4.go, nvfp4.go, packed.go,
// gptq.go, awq.go, bnb.go, mlx.go) share: the description of a stored
// tensor their layout checks take, their typed errors, and the readers of
// packed fields and scales. The codecs are plain functions over byte
// slices: a layout check turns stored shapes and dtypes into a layout
// value (or a *CodecLayoutError naming the tensor), and the layout's
// DequantRows decodes a range of the logical weight's rows, so that a
// caller streams a weight without ever expanding its scales.

// CodecTensor describes one stored tensor for a codec's layout check:
// its name (used in errors only), element type and shape as stored.
type CodecTensor struct {
	Name  string
	DType dtype.DType
	Shape []int64
}

// ErrCodecLayout is wrapped by every *CodecLayoutError: the stored
// tensors of a quantized weight do not have a layout the scheme writes.
var ErrCodecLayout = errors.New("quant: quantized weight layout not recognized")

// ErrCodecBuffer is returned by a DequantRows when a row range or a byte
// slice does not match the layout it was checked against.
var ErrCodecBuffer = errors.New("quant: buffer does not match the layout")

// CodecLayoutError names the scheme, the stored tensor and what is wrong
// with it. It unwraps to ErrCodecLayout.
type CodecLayoutError struct {
	Scheme string // "mxfp4", "nvfp4", "gptq", ...
	Tensor string // the stored tensor's name, as the caller gave it
	Reason string
}

// Error renders the one-line message; the tensor name is quoted (%q), so
// control characters from a hostile file come out escaped.
func (e *CodecLayoutError) Error() string {
	return fmt.Sprintf("%s: tensor %q: %s", e.Scheme, e.Tensor, e.Reason)
}

// Unwrap returns ErrCodecLayout.
func (e *CodecLayoutError) Unwrap() error { return ErrCodecLayout }

// codecMaxElems bounds every logical size a layout check accepts, so that
// products of dimensions cannot overflow int on any platform we build.
const codecMaxElems = 1 << 46

func codecErr(scheme string, t CodecTensor, format string, a ...any) error {
	return &CodecLayoutError{Scheme: scheme, Tensor: t.Name, Reason: fmt.Sprintf(format, a...)}
}

// codecShape checks that t has the given dtype (any of them) and rank,
// and that its dimensions are non-negative with a bounded product; it
// returns the dimensions as ints.
func codecShape(scheme string, t CodecTensor, rank int, dts ...dtype.DType) ([]int, error) {
	ok := len(dts) == 0
	for _, d := range dts {
		ok = ok || t.DType == d
	}
	if !ok {
		return nil, codecErr(scheme, t, "dtype %s, want %s", t.DType, codecDTypeList(dts))
	}
	if rank >= 0 && len(t.Shape) != rank {
		return nil, codecErr(scheme, t, "shape %v, want %d dimensions", t.Shape, rank)
	}
	dims := make([]int, len(t.Shape))
	n := int64(1)
	for i, d := range t.Shape {
		if d < 0 || d > codecMaxElems || (d > 0 && n > codecMaxElems/d) {
			return nil, codecErr(scheme, t, "shape %v out of range", t.Shape)
		}
		n *= d
		dims[i] = int(d)
	}
	return dims, nil
}

func codecDTypeList(dts []dtype.DType) string {
	s := ""
	for i, d := range dts {
		if i > 0 {
			s += " or "
		}
		s += d.String()
	}
	return s
}

// codecScaleDTypes are the element types a scale, bias or zero point in
// floating point may be stored as.
var codecScaleDTypes = []dtype.DType{dtype.Float32, dtype.Float16, dtype.BFloat16}

// codecCeilDiv is ceil(a/b) for a >= 0, b > 0.
func codecCeilDiv(a, b int) int { return (a + b - 1) / b }

// codecRows checks a DequantRows call: 0 <= r0 <= r1 <= rows, dst holds
// (r1-r0)*cols elements, and each buffer has its expected byte length.
func codecRows(dst []float32, r0, r1, rows, cols int, bufs ...codecBuf) error {
	if r0 < 0 || r1 < r0 || r1 > rows {
		return fmt.Errorf("%w: rows [%d, %d) of %d", ErrCodecBuffer, r0, r1, rows)
	}
	if len(dst) != (r1-r0)*cols {
		return fmt.Errorf("%w: dst has %d elements, rows [%d, %d) need %d", ErrCodecBuffer, len(dst), r0, r1, (r1-r0)*cols)
	}
	for _, b := range bufs {
		if len(b.b) != b.want {
			return fmt.Errorf("%w: %s has %d bytes, want %d", ErrCodecBuffer, b.what, len(b.b), b.want)
		}
	}
	return nil
}

type codecBuf struct {
	what string
	b    []byte
	want int
}

// codecField returns the bits-wide field (bits <= 8) that starts at bit
// pos of a stream of little-endian 32-bit words, word k of which starts
// at byte off + k*stride of b: element i of a dense packing is the field
// at pos = i*bits, a field may straddle two words (3, 5, 6 and 7 bits),
// and stride is 4 for words along a row and 4*cols for words down a
// column (GPTQ's qweight).
func codecField(b []byte, off, stride, pos, bits int) uint32 {
	k := pos >> 5
	sh := uint(pos & 31)
	w := uint64(binary.LittleEndian.Uint32(b[off+k*stride:]))
	if int(sh)+bits > 32 {
		w |= uint64(binary.LittleEndian.Uint32(b[off+(k+1)*stride:])) << 32
	}
	return uint32(w>>sh) & (1<<uint(bits) - 1)
}

// codecFloats decodes n floating elements of d from b (a scale, bias or
// zero-point tensor) into a new slice; used for the small per-row slices
// of companions, never for anything the size of the weight.
func codecFloats(d dtype.DType, b []byte, n int) []float32 {
	out := make([]float32, n)
	if d.IsFloat() && d.Size() >= 2 {
		dtype.DecodeFloat32(d, out, b[:n*d.Size()])
		return out
	}
	for i := range out {
		out[i] = dtype.ToFloat32(d, b[i:])
	}
	return out
}
