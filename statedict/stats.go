package statedict

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// ErrNoStats: statistics are not defined for the tensor's dtype (complex,
// quantized, packed sub-byte and bit types), or the tensor has no data
// (meta tensors, wrapper subclass shells).
var ErrNoStats = fmt.Errorf("statedict: no statistics for this dtype")

// Stats summarises a tensor's logical elements.
type Stats struct {
	Count int64   // elements read
	Min   float64 // over finite elements (NaN when there are none)
	Max   float64
	Mean  float64
	NaN   int64 // elements that are NaN
	Inf   int64 // elements that are +Inf or -Inf
}

// ComputeStats reads the tensor's logical elements (honouring offset,
// strides and byte order; half, bfloat16 and float8 decoded) and returns
// their statistics. progress, if not nil, is called with the number of
// bytes read since the previous call.
func ComputeStats(ctx context.Context, t *Tensor, progress func(n int64)) (Stats, error) {
	dec := decoderFor(t.DType)
	if dec == nil || t.Quant != nil {
		return Stats{}, &Error{Tensor: t.Name, Err: fmt.Errorf("%w (%s)", ErrNoStats, t.DType)}
	}
	if t.Storage == nil && t.NumEl() != 0 {
		return Stats{}, &Error{Tensor: t.Name, Err: fmt.Errorf("%w (a tensor without data)", ErrNoStats)}
	}
	st := Stats{Min: math.NaN(), Max: math.NaN(), Mean: math.NaN()}
	if t.NumEl() == 0 {
		return st, nil
	}
	// A broadcast view (expand: stride 0) repeats the elements of the
	// view without those dimensions: read each once and weight it, so the
	// cost is what the storage holds, not what the shape claims.
	full := t
	t, repeat := t.Distinct()
	st, err := computeStats(ctx, t, progress)
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.Tensor = full.Name
		}
		return st, err
	}
	st.Count *= repeat
	st.NaN *= repeat
	st.Inf *= repeat
	return st, nil
}

// Distinct returns the view of t's distinct element positions: t with
// every broadcast dimension (stride 0, size > 1, as Tensor.expand makes)
// reduced to size 1, and how many times each of its elements appears in
// t. For a tensor without broadcast dimensions it is t itself and 1.
func (t *Tensor) Distinct() (*Tensor, int64) {
	repeat := int64(1)
	if t.NumEl() < 0 {
		return t, 1
	}
	var shape []int64
	for d, s := range t.Shape {
		if s > 1 && d < len(t.Strides) && t.Strides[d] == 0 {
			if shape == nil {
				shape = append([]int64(nil), t.Shape...)
			}
			shape[d] = 1
			repeat *= s // no overflow: NumEl fits
		}
	}
	if shape == nil {
		return t, 1
	}
	v := *t
	v.Shape = shape
	return &v, repeat
}

func computeStats(ctx context.Context, t *Tensor, progress func(n int64)) (Stats, error) {
	st := Stats{Min: math.NaN(), Max: math.NaN(), Mean: math.NaN()}
	dec := decoderFor(t.DType)
	rc, err := t.Open()
	if err != nil {
		return st, err
	}
	defer rc.Close()
	es := t.DType.Size()
	buf := make([]byte, 1<<20/es*es)
	var sum, comp float64 // Kahan summation
	finite := int64(0)
	for {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		n, err := io.ReadFull(rc, buf)
		n = n / es * es
		for i := 0; i < n; i += es {
			v := dec(buf[i : i+es])
			st.Count++
			switch {
			case math.IsNaN(v):
				st.NaN++
				continue
			case math.IsInf(v, 0):
				st.Inf++
				continue
			}
			if finite == 0 || v < st.Min {
				st.Min = v
			}
			if finite == 0 || v > st.Max {
				st.Max = v
			}
			finite++
			y := v - comp
			s := sum + y
			comp = (s - sum) - y
			sum = s
		}
		if progress != nil && n > 0 {
			progress(int64(n))
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return st, &Error{Tensor: t.Name, Err: err}
		}
	}
	if st.Count != t.NumEl() {
		return st, &Error{Tensor: t.Name, Err: fmt.Errorf("%w: read %d of %d elements", ErrTruncated, st.Count, t.NumEl())}
	}
	if finite > 0 {
		st.Mean = sum / float64(finite)
	}
	return st, nil
}

// decoderFor returns a function that decodes one little-endian element of
// d to float64, or nil when d has no real value per element.
func decoderFor(d DType) func([]byte) float64 {
	le := binary.LittleEndian
	switch d {
	case Float64:
		return func(b []byte) float64 { return math.Float64frombits(le.Uint64(b)) }
	case Float32:
		return func(b []byte) float64 { return float64(math.Float32frombits(le.Uint32(b))) }
	case Float16:
		return func(b []byte) float64 { return Float16ToFloat64(le.Uint16(b)) }
	case BFloat16:
		return func(b []byte) float64 { return float64(math.Float32frombits(uint32(le.Uint16(b)) << 16)) }
	case Int64:
		return func(b []byte) float64 { return float64(int64(le.Uint64(b))) }
	case Int32:
		return func(b []byte) float64 { return float64(int32(le.Uint32(b))) }
	case Int16:
		return func(b []byte) float64 { return float64(int16(le.Uint16(b))) }
	case Int8:
		return func(b []byte) float64 { return float64(int8(b[0])) }
	case Uint8, Bool:
		return func(b []byte) float64 { return float64(b[0]) }
	case Uint16:
		return func(b []byte) float64 { return float64(le.Uint16(b)) }
	case Uint32:
		return func(b []byte) float64 { return float64(le.Uint32(b)) }
	case Uint64:
		return func(b []byte) float64 { return float64(le.Uint64(b)) }
	case Float8E4M3FN, Float8E5M2, Float8E4M3FNUZ, Float8E5M2FNUZ, Float8E8M0FNU:
		return func(b []byte) float64 { return Float8ToFloat64(d, b[0]) }
	}
	return nil
}

// Float16ToFloat64 decodes an IEEE 754 half-precision value.
func Float16ToFloat64(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	man := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(man, -24)
	case 0x1f:
		if man != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	}
	return sign * math.Ldexp(1+man/1024, exp-15)
}

// Float8ToFloat64 decodes one byte of a float8 dtype as torch defines them:
// e4m3fn (bias 7, no infinities, NaN = S.1111.111), e5m2 (IEEE-like, bias
// 15), the fnuz variants (bias 8 and 16, no infinities, NaN = 0x80, no
// negative zero) and e8m0fnu (an unsigned power of two, 0xFF = NaN).
func Float8ToFloat64(d DType, b byte) float64 {
	var expBits, manBits, bias int
	switch d {
	case Float8E8M0FNU:
		if b == 0xff {
			return math.NaN()
		}
		return math.Ldexp(1, int(b)-127)
	case Float8E4M3FN:
		expBits, manBits, bias = 4, 3, 7
		if b&0x7f == 0x7f {
			return math.NaN()
		}
	case Float8E5M2:
		expBits, manBits, bias = 5, 2, 15
		if b&0x7c == 0x7c {
			if b&0x03 != 0 {
				return math.NaN()
			}
			if b&0x80 != 0 {
				return math.Inf(-1)
			}
			return math.Inf(1)
		}
	case Float8E4M3FNUZ:
		expBits, manBits, bias = 4, 3, 8
		if b == 0x80 {
			return math.NaN()
		}
	case Float8E5M2FNUZ:
		expBits, manBits, bias = 5, 2, 16
		if b == 0x80 {
			return math.NaN()
		}
	default:
		return math.NaN()
	}
	sign := 1.0
	if b&0x80 != 0 {
		sign = -1
	}
	exp := int(b>>manBits) & (1<<expBits - 1)
	man := float64(int(b) & (1<<manBits - 1))
	scale := float64(int(1) << manBits)
	if exp == 0 {
		return sign * math.Ldexp(man/scale, 1-bias)
	}
	return sign * math.Ldexp(1+man/scale, exp-bias)
}
