package dtype

import (
	"math"
	"testing"
)

// TestFloat16FastPath compares the branch-free half rounding with F32ToF16
// on every sign, exponent and top-10 mantissa bits, each with the dropped
// 13 bits at every rounding boundary.
func TestFloat16FastPath(t *testing.T) {
	for top := uint32(0); top < 1<<19; top++ {
		for _, low := range []uint32{0, 1, 0xfff, 0x1000, 0x1001, 0x1fff} {
			f := math.Float32frombits(top<<13 | low)
			if got, want := f32ToF16Fast(f), F32ToF16(f); got != want {
				t.Fatalf("%#08x (%g): fast %#04x, want %#04x", top<<13|low, f, got, want)
			}
		}
	}
}

// TestHalfRoundTrip: every half bit pattern decodes and encodes back to
// itself, NaNs to 0x7e00 with their sign.
func TestHalfRoundTrip(t *testing.T) {
	for h := range 1 << 16 {
		want := uint16(h)
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			want = uint16(h)&0x8000 | 0x7e00
		}
		if got := F32ToF16(F16ToF32(uint16(h))); got != want {
			t.Fatalf("%#04x -> %g -> %#04x, want %#04x", h, F16ToF32(uint16(h)), got, want)
		}
	}
}

// TestBF16NaN: the two bfloat16 roundings differ only on NaN.
func TestBF16NaN(t *testing.T) {
	nan := math.Float32frombits(0xffa12345)
	if got := F32ToBF16(nan); got != 0x7fc0 {
		t.Errorf("F32ToBF16(NaN) = %#04x, want c10's 0x7fc0", got)
	}
	if got := F32ToBF16Quiet(nan); got != 0xffe1 {
		t.Errorf("F32ToBF16Quiet(NaN) = %#04x, want ggml's 0xffe1", got)
	}
	for _, f := range []float32{0, -0, 1, 1.00390625, 1.005859375, 3.4e38, float32(math.Inf(-1)), 1e-40} {
		if a, b := F32ToBF16(f), F32ToBF16Quiet(f); a != b {
			t.Errorf("%g: %#04x vs %#04x", f, a, b)
		}
	}
}
