package convert

import (
	"encoding/binary"
	"io"
	"math"
	"runtime"
	"sync"

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

// decode decodes len(dst) little-endian elements of d from src: one loop
// per dtype, so that the dtype is not looked at per element.
func decode(d statedict.DType, dst []float32, src []byte) {
	switch d {
	case statedict.Float32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case statedict.BFloat16:
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
		}
	case statedict.Float64:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(src[8*i:])))
		}
	case statedict.Float16:
		table := halfTable()
		for i := range dst {
			dst[i] = table[binary.LittleEndian.Uint16(src[2*i:])]
		}
	default:
		n := d.Size()
		for i := range dst {
			dst[i] = toFloat32(d, src[n*i:])
		}
	}
}

// halfTable maps every float16 bit pattern to its float32 value.
var halfTable = sync.OnceValue(func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for h := range t {
		t[h] = float32(statedict.Float16ToFloat64(uint16(h)))
	}
	return &t
})

// float32ToFloat16Fast is Float32ToFloat16 with the common case, a result
// in half's normal range (or rounding up to Inf), done without branches;
// the rest goes to Float32ToFloat16.
func float32ToFloat16Fast(f float32) uint16 {
	u := math.Float32bits(f)
	abs := u & 0x7fffffff
	if abs-0x38800000 >= 0x47800000-0x38800000 { // outside [2^-14, 2^16)
		return Float32ToFloat16(f)
	}
	// Rebias the exponent (127 -> 15), round the 13 dropped mantissa
	// bits to nearest even; a carry into the exponent is right, up to
	// Inf at 65520.
	v := abs - (127-15)<<23
	return uint16(u>>16)&0x8000 | uint16((v+0xfff+(v>>13)&1)>>13)
}

// encode encodes src as little-endian elements of d into dst.
func encode(d statedict.DType, dst []byte, src []float32) {
	switch d {
	case statedict.BFloat16:
		for i, f := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], Float32ToBFloat16(f))
		}
	case statedict.Float16:
		for i, f := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], float32ToFloat16Fast(f))
		}
	case statedict.Float32:
		for i, f := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(f))
		}
	default:
		n := d.Size()
		for i, f := range src {
			putFloat32(d, dst[n*i:], f)
		}
	}
}

const (
	// castChunk is the number of elements a castReader converts at a
	// time; castPiece the fewest given to one goroutine.
	castChunk = 256 << 10
	castPiece = 32 << 10
)

// castReader converts a stream of little-endian elements of one dtype to
// another, a chunk at a time, the chunk split across the CPUs.
type castReader struct {
	r        io.Reader
	from, to statedict.DType
	in       []byte
	mid      []float32
	out      []byte
	pending  []byte // converted bytes not yet returned
	err      error
}

func newCastReader(r io.Reader, from, to statedict.DType) *castReader {
	return &castReader{r: r, from: from, to: to, in: make([]byte, castChunk*from.Size()),
		mid: make([]float32, castChunk), out: make([]byte, castChunk*to.Size())}
}

// convert casts the first n elements of c.in to c.out.
func (c *castReader) convert(n int) {
	fs, ts := c.from.Size(), c.to.Size()
	part := func(lo, hi int) {
		decode(c.from, c.mid[lo:hi], c.in[lo*fs:hi*fs])
		encode(c.to, c.out[lo*ts:hi*ts], c.mid[lo:hi])
	}
	workers := min(runtime.GOMAXPROCS(0), n/castPiece)
	if workers <= 1 {
		part(0, n)
		return
	}
	var wg sync.WaitGroup
	step := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += step {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			part(lo, hi)
		}(lo, min(lo+step, n))
	}
	wg.Wait()
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
		fs := c.from.Size()
		whole := n / fs
		if n%fs != 0 && err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		c.convert(whole)
		c.pending = c.out[:whole*c.to.Size()]
		c.err = err
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}
