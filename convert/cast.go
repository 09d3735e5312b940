package convert

import (
	"encoding/binary"
	"io"
	"math"

	"github.com/ckpt-dev/ckpt/statedict"
)

// toFloat32 decodes one little-endian element of a floating dtype the way
// torch converts it before narrowing: float64 is rounded to float32 first
// (c10 converts double to Half and BFloat16 through float), the others
// are exact.
func toFloat32(d statedict.DType, b []byte) float32 {
	switch d {
	case statedict.Float64:
		return float32(math.Float64frombits(binary.LittleEndian.Uint64(b)))
	case statedict.Float32:
		return math.Float32frombits(binary.LittleEndian.Uint32(b))
	case statedict.Float16:
		return float32(statedict.Float16ToFloat64(binary.LittleEndian.Uint16(b)))
	case statedict.BFloat16:
		return math.Float32frombits(uint32(binary.LittleEndian.Uint16(b)) << 16)
	}
	return float32(statedict.Float8ToFloat64(d, b[0]))
}

// Float32ToBFloat16 rounds f to bfloat16, to nearest even; NaN becomes the
// canonical 0x7fc0 as in c10.
func Float32ToBFloat16(f float32) uint16 {
	if f != f {
		return 0x7fc0
	}
	u := math.Float32bits(f)
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// Float32ToFloat16 rounds f to IEEE half precision, to nearest even,
// with subnormals, overflow to Inf, and NaN as sign|0x7e00 as in c10.
func Float32ToFloat16(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	exp := int(u>>23) & 0xff
	mant := u & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e >= 1 {
		h := uint32(e)<<10 | mant>>13
		rem := mant & 0x1fff
		if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
			h++ // a carry into the exponent is right, up to Inf
		}
		return sign | uint16(h)
	}
	if exp == 0 {
		return sign // float32 subnormals are far below half's range
	}
	m := mant | 0x800000
	shift := uint(14 - e) // value = m * 2^(exp-150) = k * 2^-24
	if shift >= 32 {
		return sign
	}
	k := m >> shift
	rem := m & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rem > half || rem == half && k&1 == 1 {
		k++
	}
	return sign | uint16(k)
}

// putFloat32 encodes f as one element of a target dtype.
func putFloat32(d statedict.DType, b []byte, f float32) {
	switch d {
	case statedict.Float64:
		binary.LittleEndian.PutUint64(b, math.Float64bits(float64(f)))
	case statedict.Float32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(f))
	case statedict.Float16:
		binary.LittleEndian.PutUint16(b, Float32ToFloat16(f))
	case statedict.BFloat16:
		binary.LittleEndian.PutUint16(b, Float32ToBFloat16(f))
	}
}

// castReader converts a stream of little-endian elements of one dtype to
// another, element by element.
type castReader struct {
	r        io.Reader
	from, to statedict.DType
	in       []byte
	out      []byte
	pending  []byte // converted bytes not yet returned
	err      error
}

func newCastReader(r io.Reader, from, to statedict.DType, bufSize int) *castReader {
	n := max(bufSize/from.Size()/4, 1)
	return &castReader{r: r, from: from, to: to, in: make([]byte, n*from.Size()), out: make([]byte, n*to.Size())}
}

func (c *castReader) Read(p []byte) (int, error) {
	for len(c.pending) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		n, err := io.ReadFull(c.r, c.in)
		if err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		fs, ts := c.from.Size(), c.to.Size()
		whole := n / fs
		if n%fs != 0 && err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		for i := range whole {
			putFloat32(c.to, c.out[i*ts:], toFloat32(c.from, c.in[i*fs:]))
		}
		c.pending = c.out[:whole*ts]
		c.err = err
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}
