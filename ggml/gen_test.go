package ggml_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/ggmlref"
)

// TestTablesUpToDate regenerates tables.go from ggml-common.h and
// compares it with the committed file. It needs the module (see
// internal/ggmlref) and skips without it unless CKPT_REQUIRE_CC=1.
func TestTablesUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	if _, err := ggmlref.Sources(); err != nil {
		if os.Getenv("CKPT_REQUIRE_CC") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	out := filepath.Join(t.TempDir(), "tables.go")
	if b, err := exec.Command("go", "run", "./internal/gen", "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("go run ./internal/gen: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("tables.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, have) {
		t.Error("tables.go differs from the generator's output; run go generate ./ggml")
	}
}
