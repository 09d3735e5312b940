package quant

import (
	"fmt"
	"github.com/ckpt-dev/ckpt/internal/par"

	"github.com/ckpt-dev/ckpt/dtype"
)

// DequantizeTo writes logical elements [first, first+n) of c's weight
// into dst as little-endian elements of dt (n = len(dst)/dt.Size()),
// from codes (the bytes c.CodeSpan named for that range) and the
// companions. The bytes are those of c.Dequantize followed by
// dtype.EncodeFloat32(dt, ...): the float32 products rounded to dt as
// torch's .to(dt) rounds them. Block FP8 and MXFP4 write bfloat16,
// float16 and float32 in one pass from tables of every code's encoded
// value (each table entry is that same product, rounded the same way);
// other codecs decode through a pooled float32 buffer.
func DequantizeTo(c Codec, dt dtype.DType, dst []byte, first int64, codes []byte, comps [][]byte) error {
	es := dt.Size()
	if es <= 0 || len(dst)%es != 0 {
		return fmt.Errorf("%w: %d bytes of %s", ErrCodecBuffer, len(dst), dt)
	}
	if f, ok := c.(encoder); ok {
		if done, err := f.dequantizeTo(dt, dst, first, codes, comps); done || err != nil {
			return err
		}
	}
	n := len(dst) / es
	p := f32Bufs.Get(n)
	defer f32Bufs.Put(p)
	fs := *p
	if err := c.Dequantize(fs, first, codes, comps); err != nil {
		return err
	}
	dtype.EncodeFloat32(dt, dst, fs)
	return nil
}

// encoder is a Codec with a one-pass path to an output dtype; done is
// false when it has none for dt (the caller then stages in float32).
type encoder interface {
	dequantizeTo(dt dtype.DType, dst []byte, first int64, codes []byte, comps [][]byte) (done bool, err error)
}

// f32Bufs holds the float32 staging buffers of this package (decoding
// and quantizing): a free list the collector does not empty, so a long
// conversion reuses the same few buffers (a fresh page is a page fault).
var f32Bufs = &par.FreeList[float32]{Max: 16}
