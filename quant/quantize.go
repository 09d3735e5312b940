package quant

import (
	"errors"
	"fmt"
	"math"
	"path"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/ckpt-dev/ckpt/dtype"
)

// Quantizing back: a plain (bfloat16, float16 or float32) weight becomes
// the stored tensors of one of the native layouts this package reads. Each
// scheme lives in a quantize_*.go file and follows its upstream quantizer
// step by step, each rounding as upstream rounds (cited there). A weight
// is read in two passes of row blocks: the first computes every scale
// (small: one per block or group), the second the codes; neither holds
// more than one block of rows per worker.

// Quantize schemes, the values of QuantizeSpec.Scheme.
const (
	SchemeFP8Block   = "fp8-block"   // DeepSeek / transformers FineGrainedFP8 layout
	SchemeFP8Channel = "fp8-channel" // compressed-tensors float-quantized, channel strategy
	SchemeMXFP4      = "mxfp4"       // gpt-oss MoE experts
	SchemeNVFP4      = "nvfp4"       // compressed-tensors nvfp4-pack-quantized
)

// ErrQuantizeScheme is returned by ParseQuantize for a scheme or block
// size it does not know.
var ErrQuantizeScheme = errors.New("quant: unknown quantize scheme")

// QuantizeSpec is a parsed --quantize value.
type QuantizeSpec struct {
	Scheme string
	Block  [2]int64 // fp8-block only: rows x columns of a block
}

// ParseQuantize parses "fp8-block", "fp8-block:64x64", "fp8-channel",
// "mxfp4" or "nvfp4".
func ParseQuantize(s string) (QuantizeSpec, error) {
	name, arg, hasArg := strings.Cut(strings.ToLower(strings.TrimSpace(s)), ":")
	switch name {
	case SchemeFP8Block:
		spec := QuantizeSpec{Scheme: name, Block: defaultFP8Block}
		if hasArg {
			a, b, ok := strings.Cut(arg, "x")
			bh, e1 := strconv.ParseInt(a, 10, 64)
			bw, e2 := strconv.ParseInt(b, 10, 64)
			if !ok || e1 != nil || e2 != nil || bh <= 0 || bw <= 0 || bh > 1<<16 || bw > 1<<16 {
				return QuantizeSpec{}, fmt.Errorf("%w: %q: block size as ROWSxCOLS, e.g. fp8-block:128x128 (1 to 65536 each)", ErrQuantizeScheme, s)
			}
			spec.Block = [2]int64{bh, bw}
		}
		return spec, nil
	case SchemeFP8Channel, SchemeMXFP4, SchemeNVFP4:
		if hasArg {
			return QuantizeSpec{}, fmt.Errorf("%w: %q: %s takes no parameter", ErrQuantizeScheme, s, name)
		}
		return QuantizeSpec{Scheme: name}, nil
	}
	return QuantizeSpec{}, fmt.Errorf("%w: %q (fp8-block[:RxC], fp8-channel, mxfp4, nvfp4)", ErrQuantizeScheme, s)
}

// RowReader reads rows [r0, r1) of a weight, seen as a 2-D matrix of
// Rows x Cols (leading dimensions folded into rows), as float32 into dst.
// It may be called from several goroutines. Prepare asks for every row
// once, in ranges handed out in ascending order, each read by the
// goroutine that took it before anything else it does: a reader may serve
// that pass from one stream, in order (convert checks the input's
// checksums so), making a range wait for the ranges before it.
type RowReader func(dst []float32, r0, r1 int64) error

// WeightQuantizer quantizes one weight into a scheme's stored tensors.
type WeightQuantizer interface {
	// Outputs are the stored tensors, the codes first.
	Outputs() []Stored
	// Rows and Cols are the source weight seen as a matrix.
	Rows() int64
	Cols() int64
	// RowAlign is the number of source rows the codes are computed in
	// together; Codes ranges start at multiples of it.
	RowAlign() int64
	// Prepare reads every row once and computes the scales.
	Prepare(read RowReader) error
	// Companion returns the whole bytes of Outputs()[i], i >= 1, after Prepare.
	Companion(i int) []byte
	// CodeSpan is the byte range of the codes of source rows [r0, r1).
	CodeSpan(r0, r1 int64) (begin, end int64)
	// Codes writes the codes of source rows [r0, r1), whose values are
	// src, into dst (CodeSpan's size).
	Codes(dst []byte, src []float32, r0, r1 int64)
}

// Skip says why a tensor is left as it is; "" means it is quantized.
type Skip string

// NewQuantizer returns the quantizer of the tensor named name of the
// given dtype and shape under spec, or a reason to leave it unquantized:
// upstream's ignore rules (norms, embeddings, lm_head, MoE routers and
// gates, biases, 1-D tensors), the extra globs of ignore (path.Match
// syntax on the tensor name and on its module name), and shapes the
// scheme cannot take (upstream leaves those as they are too).
func NewQuantizer(spec QuantizeSpec, name string, dt dtype.DType, shape []int64, ignore []string) (WeightQuantizer, Skip) {
	switch dt {
	case dtype.BFloat16, dtype.Float16, dtype.Float32:
	default:
		return nil, Skip("not a float16, bfloat16 or float32 tensor")
	}
	module := strings.TrimSuffix(name, ".weight")
	for _, g := range ignore {
		if ok, _ := path.Match(g, name); ok {
			return nil, Skip("--ignore " + g)
		}
		if ok, _ := path.Match(g, module); ok {
			return nil, Skip("--ignore " + g)
		}
	}
	if spec.Scheme == SchemeMXFP4 {
		return newMXFP4Quantizer(name, shape)
	}
	if spec.Scheme == SchemeFP8Block && fusedExperts(name, shape) {
		return newStackedFP8Block(name, shape, spec.Block)
	}
	if why := linearSkip(name); why != "" {
		return nil, why
	}
	if len(shape) != 2 || shape[0] <= 0 || shape[1] <= 0 {
		return nil, Skip(fmt.Sprintf("shape %s: a 2-D Linear weight is quantized", shapeText(shape)))
	}
	switch spec.Scheme {
	case SchemeFP8Block:
		return newFP8BlockQuantizer(name, shape, spec.Block)
	case SchemeFP8Channel:
		return newFP8ChannelQuantizer(name, dt, shape)
	case SchemeNVFP4:
		return newNVFP4Quantizer(name, dt, shape)
	}
	return nil, Skip("unknown scheme " + spec.Scheme)
}

// linearSkip applies the rules by which the upstream quantizers pick the
// Linear layers they quantize: only "X.weight" of a Linear, never the
// embeddings, the norms, lm_head (transformers' get_modules_to_not_convert;
// llm-compressor's recipes ignore ["lm_head"]) or a MoE router / gate
// (DeepSeek-V3 keeps mlp.gate in bfloat16; llm-compressor's MoE examples
// ignore "re:.*mlp.gate$").
func linearSkip(name string) Skip {
	if !strings.HasSuffix(name, ".weight") {
		return "not a Linear weight (name does not end in .weight)"
	}
	m := strings.TrimSuffix(name, ".weight")
	last := lastPart(m)
	low := strings.ToLower(m)
	switch {
	case strings.Contains(low, "norm"):
		return "norm"
	case strings.Contains(low, "embed") || last == "wte" || last == "wpe":
		return "embedding"
	case last == "lm_head" || last == "output" && !strings.Contains(m, "."):
		return "lm_head"
	case last == "gate" || last == "router" || strings.HasSuffix(low, ".router") || strings.Contains(low, "shared_expert_gate"):
		return "MoE router / gate"
	}
	return ""
}

// ModuleOf is the module name of a weight ("a.b.weight" -> "a.b").
func ModuleOf(name string) string { return strings.TrimSuffix(name, ".weight") }

// forRowChunks runs q.Prepare's per-chunk work on all cores: fn is
// called for aligned row ranges covering [0, rows), handed out in
// ascending order, each read (as RowReader says) before fn runs on it,
// each worker with its own buffer of source values.
func forRowChunks(q WeightQuantizer, read RowReader, fn func(src []float32, r0, r1 int64)) error {
	rows, cols, align := q.Rows(), q.Cols(), q.RowAlign()
	// chunk: whole aligned blocks, about 4 MiB of float32 each.
	per := max(1, (1<<20)/max(1, cols*align)) * align
	return parallelRows(rows, per, func(r0, r1 int64, buf *[]float32) error {
		src := growF32(buf, (r1-r0)*cols)
		if err := read(src, r0, r1); err != nil {
			return err
		}
		fn(src, r0, r1)
		return nil
	})
}

// parallelRows calls fn for [r, min(r+per, rows)) ranges on
// GOMAXPROCS workers and returns the first error.
func parallelRows(rows, per int64, fn func(r0, r1 int64, buf *[]float32) error) error {
	n := (rows + per - 1) / per
	workers := min(int64(runtime.GOMAXPROCS(0)), n)
	next := make(chan int64, n)
	for i := int64(0); i < n; i++ {
		next <- i * per
	}
	close(next)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for w := int64(0); w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := f32Bufs.Get(0)
			defer f32Bufs.Put(buf)
			for r0 := range next {
				if err := fn(r0, min(rows, r0+per), buf); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

func growF32(b *[]float32, n int64) []float32 {
	if int64(cap(*b)) < n {
		*b = make([]float32, n)
	}
	return (*b)[:n]
}

// QuantizeRows computes the codes of source rows [r0, r1) (r0 a multiple
// of RowAlign) into dst on all cores, reading the rows with read.
func QuantizeRows(q WeightQuantizer, read RowReader, dst []byte, r0, r1 int64) error {
	base, _ := q.CodeSpan(r0, r1)
	align, cols := q.RowAlign(), q.Cols()
	per := max(1, (1<<18)/max(1, cols*align)) * align
	return parallelRows(r1-r0, per, func(a, b int64, buf *[]float32) error {
		a, b = a+r0, b+r0
		src := growF32(buf, (b-a)*cols)
		if err := read(src, a, b); err != nil {
			return err
		}
		s, e := q.CodeSpan(a, b)
		q.Codes(dst[s-base:e-base], src, a, b)
		return nil
	})
}

// e4m3FromF32 converts f to float8_e4m3fn as c10's
// fp8e4m3fn_from_fp32_value does (c10/util/Float8_e4m3fn.h): round to
// nearest even; magnitudes from 480 up (and NaN, Inf) become NaN (0x7f
// with the sign); below 2^-6 the float32 addition of 2^14 rounds the
// subnormal.
func e4m3FromF32(f float32) byte {
	bits := math.Float32bits(f)
	sign := byte(bits >> 24 & 0x80)
	abs := bits & 0x7fffffff
	var r uint32
	switch {
	case abs >= 1087<<20:
		r = 0x7f
	case abs < 121<<23:
		const denorm = 141 << 23
		r = math.Float32bits(math.Float32frombits(abs)+math.Float32frombits(denorm)) - denorm
	default:
		odd := abs >> 20 & 1
		abs = abs - (127-7)<<23 + 0x7ffff
		abs += odd
		r = abs >> 20
	}
	return byte(r) | sign
}

// roundTo rounds a float32 to dt's precision when dt is bfloat16 or
// float16 (torch's arithmetic on such tensors: computed in float32,
// rounded to nearest even), and returns it unchanged for float32.
func roundTo(dt dtype.DType, f float32) float32 {
	switch dt {
	case dtype.BFloat16:
		return dtype.BF16ToF32(dtype.F32ToBF16(f))
	case dtype.Float16:
		return dtype.F16ToF32(dtype.F32ToF16(f))
	}
	return f
}

// clamp is torch.clamp(x, lo, hi): NaN stays NaN.
func clamp(x, lo, hi float32) float32 {
	if x < lo {
		return lo
	}
	if x > hi {
		return hi
	}
	return x
}

// absMax is the largest magnitude of v, NaN when v holds a NaN (torch's
// amax propagates NaN).
func absMax(v []float32) float32 {
	// On the bits with the sign cleared, unsigned order is magnitude
	// order and every NaN is above +Inf: an integer max, no branches.
	var m uint32
	for _, x := range v {
		m = max(m, math.Float32bits(x)&0x7fffffff)
	}
	if m > 0x7f800000 { // a NaN: the first one, as a scan that stops at it
		for _, x := range v {
			if x != x {
				return float32(math.Abs(float64(x)))
			}
		}
	}
	return math.Float32frombits(m)
}
