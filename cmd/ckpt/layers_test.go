package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayers guards the one-way data flow of the architecture: file ->
// statedict (container + pickle) -> remap -> devicecopy or a writer, with
// the CLI on top and nothing importing it. Each package lists the module
// packages and third-party modules it may import.
func TestLayers(t *testing.T) {
	const mod = "github.com/ckpt-dev/ckpt/"
	allowed := map[string][]string{
		"pickle":      {"github.com/nlpodyssey/gopickle/"},
		"safetensors": {},
		"digest":      {"github.com/cespare/xxhash/"},
		"statedict":   {mod + "pickle", mod + "safetensors", "github.com/klauspost/compress/"},
		"remap":       {mod + "statedict"},
		"devicecopy":  {mod + "statedict", mod + "remap", mod + "digest", mod + "kernels", "github.com/ebitengine/purego"},
		"kernels":     {},
		"torchzip":    {mod + "statedict", mod + "pickle"},
		"convert":     {mod + "statedict", mod + "pickle", mod + "safetensors", mod + "digest", mod + "remap", mod + "torchzip", "github.com/klauspost/compress/"},
		// objstore is the only package that imports a cloud client.
		"objstore": {"github.com/minio/minio-go/"},
		"cmd/ckpt": {mod, "github.com/spf13/cobra", "github.com/spf13/pflag"},
		// Test support: imported by _test.go files only (no package's
		// entry above allows it, but cmd/ckpt's module-wide one).
		"internal/testenv": {},
		// A real MinIO server for the object-storage tests.
		"internal/miniotest": {"github.com/minio/minio-go/"},
		// A benchmark harness for the peer that ckpt itself does not use.
		"bench/gopickleload": {"github.com/nlpodyssey/gopickle/"},
		// The S3 download peer of bench/objstore.sh.
		"bench/s3get": {"github.com/minio/minio-go/"},
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", mod+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], mod)
		allow, known := allowed[pkg]
		if !known {
			t.Errorf("package %s has no entry in the layer table: add one", pkg)
			continue
		}
	imports:
		for _, imp := range fields[1:] {
			if !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
				continue // standard library
			}
			for _, a := range allow {
				if strings.HasPrefix(imp, a) {
					continue imports
				}
			}
			t.Errorf("%s imports %s, which its layer does not allow", pkg, imp)
		}
	}
}
