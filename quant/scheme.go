package quant

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"

	"github.com/ckpt-dev/ckpt/dtype"
)

// Errors of detection and layout planning; every error Detect returns
// wraps one of them in an *Error naming the scheme and the tensor.
var (
	// ErrUnknownScheme: config.json names a quant_method (or a
	// compressed-tensors format) ckpt cannot dequantize.
	ErrUnknownScheme = errors.New("quant: unknown quantization scheme")
	// ErrUnknownLayout: the scheme is known but its parameters or the
	// stored tensors are laid out in a way ckpt does not read (a block
	// size of 0, a weight that is not 2-D, an unknown strategy).
	ErrUnknownLayout = errors.New("quant: unknown quantized layout")
	// ErrCompanionShape: a companion tensor (a scale) has the wrong shape
	// or dtype for its weight.
	ErrCompanionShape = errors.New("quant: companion tensor of the wrong shape")
	// ErrMissingCompanion: a weight the scheme quantizes lacks its scale,
	// or a scale-like companion sits beside a float8 weight with no scheme
	// (no config.json) to say how to apply it.
	ErrMissingCompanion = errors.New("quant: quantized weight without its scheme or companion")
	// ErrConfig: config.json (or its quantization block) is not valid JSON
	// of the expected shape.
	ErrConfig = errors.New("quant: malformed quantization config")
)

// Error is the typed error of detection: the scheme and the tensor it
// concerns, and the cause.
type Error struct {
	Scheme string // "fp8", "compressed-tensors float-quantized", ...
	Tensor string // stored tensor name, "" when none
	Err    error
}

// Error reads `scheme S: tensor "T": cause`.
func (e *Error) Error() string {
	s := ""
	if e.Scheme != "" {
		s = "scheme " + e.Scheme + ": "
	}
	if e.Tensor != "" {
		s += fmt.Sprintf("tensor %q: ", e.Tensor)
	}
	return s + e.Err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Stored is one tensor as the checkpoint stores it.
type Stored struct {
	Name  string
	DType dtype.DType
	Shape []int64
	// Read returns the tensor's bytes (little-endian, C order) for the
	// few small tensors whose values a scheme needs to plan its groups:
	// compressed-tensors' weight_shape, bitsandbytes' quant_state JSON.
	// nil when the caller cannot read data; a scheme then refuses.
	Read func() ([]byte, error)
}

// NumEl is the product of the shape (-1 when it overflows or a size is negative).
func (s Stored) NumEl() int64 { return numel(s.Shape) }

// Codec dequantizes one group's stored codes. Elements are the logical
// tensor's, in C order; companions are the whole stored bytes
// (little-endian, C order) of Group.Companions, in that order.
type Codec interface {
	// CodeSpan returns the byte range [begin, end) of the stored weight
	// that holds logical elements [first, first+n).
	CodeSpan(first, n int64) (begin, end int64)
	// Dequantize writes the float32 values of logical elements
	// [first, first+len(dst)) into dst, from codes (the bytes CodeSpan
	// named for that range) and the companions.
	Dequantize(dst []float32, first int64, codes []byte, companions [][]byte) error
}

// Group is one quantized weight: the stored tensors it is made of and the
// logical tensor they stand for.
type Group struct {
	Name       string      // the logical tensor's name (the unquantized model's): "X.weight"
	DType      dtype.DType // the logical dtype (config's torch_dtype, else bfloat16)
	Shape      []int64     // the logical shape
	Weight     Stored      // the stored codes
	Companions []Stored    // scales (and zero points), consumed; read whole
	Consumed   []string    // other stored tensors the scheme uses up (activation scales)
	Scheme     string      // human description: "fp8 e4m3, 128x128 blocks, scales in weight_scale_inv"
	Codec      Codec
}

// Plan is what Detect finds: the scheme and each quantized weight's group.
type Plan struct {
	Method string      // quant_method: "fp8", "compressed-tensors"
	DType  dtype.DType // logical dtype of the dequantized weights
	Groups []*Group
}

// Schemes returns the distinct scheme descriptions of the plan's groups
// with how many weights each covers, sorted by description.
func (p *Plan) Schemes() []SchemeCount {
	n := map[string]int{}
	for _, g := range p.Groups {
		n[g.Scheme]++
	}
	out := make([]SchemeCount, 0, len(n))
	for s, c := range n {
		out = append(out, SchemeCount{Scheme: s, Tensors: c})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Scheme < out[j].Scheme })
	return out
}

// SchemeCount is one scheme of a Plan and the number of weights it quantizes.
type SchemeCount struct {
	Scheme  string `json:"scheme"`
	Tensors int    `json:"tensors"`
}

// Config is what a Layout parser receives: the quantization block and the
// model-wide facts around it.
type Config struct {
	Method string          // quant_method as written
	Raw    json.RawMessage // the whole quantization_config object
	DType  dtype.DType     // the logical dtype (torch_dtype, else bfloat16)
}

// A Layout groups stored tensors for one parsed scheme.
type Layout interface {
	// Plan returns a group for every weight the scheme quantizes among
	// tensors (which it must not modify), or an error naming the tensor
	// whose layout it refuses.
	Plan(tensors []Stored) ([]*Group, error)
}

// LayoutFunc parses a scheme's quantization_config into a Layout.
type LayoutFunc func(cfg Config) (Layout, error)

var (
	regMu    sync.RWMutex
	registry = map[string]LayoutFunc{}
)

// Register makes a scheme known under its quant_method. It panics when
// the method is registered twice, as registries in init functions do.
func Register(method string, f LayoutFunc) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[method]; dup {
		panic("quant: Register called twice for " + method)
	}
	registry[method] = f
}

func lookup(method string) LayoutFunc {
	regMu.RLock()
	defer regMu.RUnlock()
	return registry[method]
}

// numel is the product of shape, -1 when it overflows 2^62 or a size is negative.
func numel(shape []int64) int64 {
	n := int64(1)
	for _, s := range shape {
		if s < 0 {
			return -1
		}
		if s != 0 && n > (1<<62)/s {
			return -1
		}
		n *= s
	}
	return n
}

// shapeText writes a shape as torch prints it: [2, 3].
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
