package ckpt

import (
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// TestParseCastDType: the four floating dtypes a conversion casts to
// parse, in torch's spellings and ckpt's short ones; every other dtype
// and any non-name is refused.
func TestParseCastDType(t *testing.T) {
	for name, want := range map[string]dtype.DType{
		"bf16": dtype.BFloat16, "bfloat16": dtype.BFloat16, "torch.bfloat16": dtype.BFloat16,
		"f16": dtype.Float16, "half": dtype.Float16, "float16": dtype.Float16,
		"f32": dtype.Float32, "float": dtype.Float32, "torch.float32": dtype.Float32,
		"f64": dtype.Float64, "double": dtype.Float64,
	} {
		if d, ok := ParseCastDType(name); !ok || d != want {
			t.Errorf("ParseCastDType(%q) = %v, %v; want %v, true", name, d, ok, want)
		}
	}
	for _, name := range []string{"int8", "int64", "long", "bool", "uint8", "float8_e4m3fn", "complex64", "", "f17"} {
		if d, ok := ParseCastDType(name); ok {
			t.Errorf("ParseCastDType(%q) = %v, true; want refused", name, d)
		}
	}
}
