package ggufcheck

import (
	"os"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/ggmlref"
)

// TestMain removes the build directory of ggml's C reference, which the
// tests of quantized releases compile (quant_test.go).
func TestMain(m *testing.M) {
	code := m.Run()
	ggmlref.Cleanup()
	os.Exit(code)
}
