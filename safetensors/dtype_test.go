package safetensors

import "testing"

// TestRecent: the codes safetensors 0.4 readers know are not recent; the
// ones added since are.
func TestRecent(t *testing.T) {
	for _, c := range []string{"BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64", "I64", "U64"} {
		if Recent(c) {
			t.Errorf("%s marked recent", c)
		}
	}
	for _, c := range []string{"F4", "F6_E2M3", "F6_E3M2", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "C64"} {
		if !Recent(c) {
			t.Errorf("%s not marked recent", c)
		}
	}
}
