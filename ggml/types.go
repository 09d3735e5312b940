package ggml

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// Type is a ggml tensor element type, numbered as ggml's enum ggml_type
// (and so as the type field of a GGUF tensor record).
type Type uint32

// The ggml types. Ids 4, 5 (Q4_2, Q4_3), 31-33 (Q4_0_4_4, Q4_0_4_8,
// Q4_0_8_8) and 36-38 (IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8) were removed
// from ggml and have no constant; Type.Known reports false for them.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
)

// QK_K is the number of elements of a K-quant (and IQ, TQ) super-block.
const QK_K = 256

// Sentinel errors; every error this package returns wraps one of them
// (errors.Is), and errors about a type are a *TypeError.
var (
	// ErrUnknownType: the id is not a ggml type this package knows
	// (a removed id, or one newer than this package).
	ErrUnknownType = errors.New("unknown ggml type")
	// ErrUnsupported: the type is known but the operation is not
	// implemented for it (Quantize of most IQ types, big-endian block data).
	ErrUnsupported = errors.New("operation not supported for this ggml type")
	// ErrBlockMultiple: an element count is not a multiple of the type's
	// block size.
	ErrBlockMultiple = errors.New("element count not a multiple of the block size")
	// ErrSize: the byte and element slices do not describe the same
	// number of blocks.
	ErrSize = errors.New("byte length does not match element count")
	// ErrOverflow: a size does not fit in an int64.
	ErrOverflow = errors.New("size overflows int64")
)

// TypeError is the error returned for an operation on one type.
type TypeError struct {
	Op   string // "dequantize", "quantize", "row size", "parse"
	Type Type
	Name string // for ParseType: the name given
	Msg  string // detail, may be empty
	Err  error  // one of the sentinel errors
}

// Error returns "ggml: OP TYPE: REASON (DETAIL)".
func (e *TypeError) Error() string {
	var b strings.Builder
	b.WriteString("ggml: ")
	b.WriteString(e.Op)
	b.WriteString(" ")
	if e.Op == "parse" {
		b.WriteString(strconv.QuoteToASCII(e.Name))
	} else {
		b.WriteString(e.Type.String())
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	if e.Msg != "" {
		b.WriteString(" (")
		b.WriteString(e.Msg)
		b.WriteString(")")
	}
	return b.String()
}

// Unwrap returns the sentinel error.
func (e *TypeError) Unwrap() error { return e.Err }

type traits struct {
	name      string
	blockSize int64
	typeSize  int64
}

var typeTraits = [...]traits{
	F32:     {"f32", 1, 4},
	F16:     {"f16", 1, 2},
	Q4_0:    {"q4_0", 32, 18},
	Q4_1:    {"q4_1", 32, 20},
	Q5_0:    {"q5_0", 32, 22},
	Q5_1:    {"q5_1", 32, 24},
	Q8_0:    {"q8_0", 32, 34},
	Q8_1:    {"q8_1", 32, 36},
	Q2_K:    {"q2_K", QK_K, 84},
	Q3_K:    {"q3_K", QK_K, 110},
	Q4_K:    {"q4_K", QK_K, 144},
	Q5_K:    {"q5_K", QK_K, 176},
	Q6_K:    {"q6_K", QK_K, 210},
	Q8_K:    {"q8_K", QK_K, 292},
	IQ2_XXS: {"iq2_xxs", QK_K, 66},
	IQ2_XS:  {"iq2_xs", QK_K, 74},
	IQ3_XXS: {"iq3_xxs", QK_K, 98},
	IQ1_S:   {"iq1_s", QK_K, 50},
	IQ4_NL:  {"iq4_nl", 32, 18},
	IQ3_S:   {"iq3_s", QK_K, 110},
	IQ2_S:   {"iq2_s", QK_K, 82},
	IQ4_XS:  {"iq4_xs", QK_K, 136},
	I8:      {"i8", 1, 1},
	I16:     {"i16", 1, 2},
	I32:     {"i32", 1, 4},
	I64:     {"i64", 1, 8},
	F64:     {"f64", 1, 8},
	IQ1_M:   {"iq1_m", QK_K, 56},
	BF16:    {"bf16", 1, 2},
	TQ1_0:   {"tq1_0", QK_K, 54},
	TQ2_0:   {"tq2_0", QK_K, 66},
	MXFP4:   {"mxfp4", 32, 17},
}

// Types returns every known type in id order.
func Types() []Type {
	var ts []Type
	for i := range typeTraits {
		if typeTraits[i].name != "" {
			ts = append(ts, Type(i))
		}
	}
	return ts
}

// Known reports whether t is a type this package knows.
func (t Type) Known() bool {
	return int64(t) < int64(len(typeTraits)) && typeTraits[t].name != ""
}

// String returns ggml's name of the type ("f32", "q4_K", "iq2_xxs"), or
// "type(N)" for an unknown id.
func (t Type) String() string {
	if t.Known() {
		return typeTraits[t].name
	}
	return "type(" + strconv.FormatUint(uint64(t), 10) + ")"
}

// ParseType returns the type named s, matched without regard to case
// ("Q4_K", "q4_k", "BF16").
func ParseType(s string) (Type, error) {
	for i := range typeTraits {
		if n := typeTraits[i].name; n != "" && strings.EqualFold(n, s) {
			return Type(i), nil
		}
	}
	return 0, &TypeError{Op: "parse", Name: s, Err: ErrUnknownType}
}

// BlockSize returns the number of elements in one block of t (1 for the
// plain types), or 0 for an unknown type.
func (t Type) BlockSize() int64 {
	if !t.Known() {
		return 0
	}
	return typeTraits[t].blockSize
}

// TypeSize returns the number of bytes of one block of t, or 0 for an
// unknown type.
func (t Type) TypeSize() int64 {
	if !t.Known() {
		return 0
	}
	return typeTraits[t].typeSize
}

// Quantized reports whether t stores elements in blocks of more than one.
func (t Type) Quantized() bool { return t.BlockSize() > 1 }

// RowBytes returns the number of bytes n elements of t take. It fails
// with ErrUnknownType, with ErrBlockMultiple when n is negative or not a
// multiple of the block size, and with ErrOverflow when the size does
// not fit in an int64.
func (t Type) RowBytes(n int64) (int64, error) {
	if !t.Known() {
		return 0, &TypeError{Op: "row size", Type: t, Err: ErrUnknownType}
	}
	tr := typeTraits[t]
	if n < 0 || n%tr.blockSize != 0 {
		return 0, &TypeError{Op: "row size", Type: t, Msg: fmt.Sprintf("%d elements, block size %d", n, tr.blockSize), Err: ErrBlockMultiple}
	}
	hi, lo := bits.Mul64(uint64(n/tr.blockSize), uint64(tr.typeSize))
	if hi != 0 || lo > 1<<63-1 {
		return 0, &TypeError{Op: "row size", Type: t, Msg: fmt.Sprintf("%d elements", n), Err: ErrOverflow}
	}
	return int64(lo), nil
}

// check validates that src holds exactly the blocks for dst's elements.
func check(op string, t Type, nbytes, n int) error {
	want, err := t.RowBytes(int64(n))
	if err != nil {
		e := err.(*TypeError)
		e.Op = op
		return e
	}
	if int64(nbytes) != want {
		return &TypeError{Op: op, Type: t, Msg: fmt.Sprintf("%d bytes for %d elements, want %d", nbytes, n, want), Err: ErrSize}
	}
	return nil
}
