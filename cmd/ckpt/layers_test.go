package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestLayers guards the one-way data flow of the architecture: file ->
// statedict (container + pickle) -> remap -> devicecopy or a writer, with
// the CLI on top and nothing importing it. Each package lists the module
// packages and third-party modules it may import.
func TestLayers(t *testing.T) {
	const mod = "github.com/ckpt-dev/ckpt/"
	const rootPkg = "github.com/ckpt-dev/ckpt"
	allowed := map[string][]string{
		"pickle": {mod + "internal/dcpclass", "github.com/nlpodyssey/gopickle/"},
		// dtype: the DType table and element codecs (standard library, and
		// golang.org/x/sys/cpu: whether the AVX2 casts run).
		"dtype": {"golang.org/x/sys/cpu"},
		// The class names of DCP's .metadata, for pickle and dcp (none).
		"internal/dcpclass": {},
		"safetensors":       {},
		// digest: golang.org/x/sys/cpu tells whether the CPU has the
		// AVX-512 that ChunkSums' vector path needs.
		"digest":    {"github.com/cespare/xxhash/", "golang.org/x/sys/cpu"},
		"statedict": {mod + "dtype", mod + "quant", mod + "internal/par", mod + "internal/ieeecrc", mod + "pickle", mod + "safetensors", mod + "dcp", mod + "torchzip", mod + "gguf", mod + "ggml", mod + "internal/human", "github.com/klauspost/compress/"},
		// ggml: the numeric codecs of ggml's types (standard library
		// only); gguf: the GGUF container, read and written.
		"ggml": {mod + "dtype"},
		// quant: the quantization schemes of quantized releases (dtype and
		// the standard library; ggml where a scheme shares its codecs;
		// internal/par's free lists; golang.org/x/sys/cpu: whether the AVX2
		// decodes run).
		"quant":             {mod + "dtype", mod + "ggml", mod + "internal/par", "golang.org/x/sys/cpu"},
		"ggml/internal/gen": {},
		"gguf":              {mod + "ggml"},
		// Compiles ggml's reference C in tests (standard library only).
		"internal/ggmlref": {},
		"remap":            {mod + "statedict"},
		// lora: PEFT adapters' config, names and merge math
		// (golang.org/x/sys/cpu: whether the AVX2 kernel runs).
		"lora": {mod + "dtype", mod + "statedict", mod + "internal/par", "golang.org/x/sys/cpu"},
		// Splitting work over the CPUs (standard library only).
		"internal/par": {},
		// The zip checksum, four folding chains with AVX-512 VPCLMULQDQ
		// (golang.org/x/sys/cpu: whether they run).
		"internal/ieeecrc": {"golang.org/x/sys/cpu"},
		"devicecopy":       {mod + "dtype", mod + "internal/ieeecrc", mod + "statedict", mod + "remap", mod + "digest", mod + "kernels", mod + "cuda", "golang.org/x/sys/unix"}, // unix: memfd_create (memfile.go)
		"kernels":          {},
		"scan":             {mod + "dtype", mod + "pickle", mod + "statedict", mod + "dcp", mod + "torchzip", mod + "gguf", "github.com/klauspost/compress/"},
		"torchzip":         {mod + "dtype", mod + "pickle", mod + "internal/ieeecrc"},
		"dcp":              {mod + "dtype", mod + "pickle", mod + "internal/dcpclass", mod + "torchzip"},
		"convert":          {mod + "internal/par", mod + "internal/ieeecrc", mod + "dtype", mod + "verify", mod + "internal/atomicfile", mod + "statedict", mod + "pickle", mod + "safetensors", mod + "gguf", mod + "ggml", mod + "digest", mod + "remap", mod + "torchzip", mod + "dcp", mod + "quant", mod + "internal/human", mod + "internal/llamacpp", mod + "internal/fadvise", "github.com/klauspost/compress/"},
		// The driver binding (purego), NVML, inventory, environment, the
		// devices report.
		"cuda": {"github.com/ebitengine/purego"},

		// verify: ckpt verify's Check and Compare, ckpt diff's Diff
		// (golang.org/x/sys/cpu: whether its AVX2 kernels run;
		// internal/par: the expert slabs' free list).
		"verify": {mod + "statedict", mod + "internal/ieeecrc", mod + "digest", mod + "dtype", mod + "internal/llamacpp", mod + "internal/par", mod + "internal/fadvise", "golang.org/x/sys/cpu"},
		// internal/llamacpp: llama.cpp's names and q/k permutation (convert, verify).
		"internal/llamacpp": {},
		// internal/atomicfile: convert's atomic local outputs, written
		// behind (golang.org/x/sys/unix: copy_file_range,
		// sync_file_range).
		"internal/atomicfile": {mod + "internal/human", mod + "internal/par", mod + "internal/fadvise", "golang.org/x/sys/unix"},
		// internal/fadvise: read-ahead and drop hints (standard library only).
		"internal/fadvise": {},
		// objstore is the only package that imports a cloud client:
		// minio-go (s3://), Google's credentials (gs://: the JSON API
		// itself is objstore's own client over net/http, not
		// cloud.google.com/go/storage, whose dependencies cost every
		// command ~17 ms of start-up), Azure's azblob (az://).
		"objstore": {mod + "internal/par", "github.com/minio/minio-go/", "golang.org/x/oauth2",
			"github.com/Azure/azure-sdk-for-go/sdk/"},
		// The root package ckpt owns the orchestration (open, plan,
		// pre-flight, load, upload, saved digests).
		// It also builds the reports (LoadReport, InspectReport), which
		// show pickle values and GGUF metadata, and is the door to scan and
		// to the devices report (cuda).
		rootPkg: {mod + "dtype", mod + "verify", mod + "statedict", mod + "remap", mod + "cuda", mod + "devicecopy", mod + "convert", mod + "digest", mod + "objstore", mod + "internal/human", mod + "scan", mod + "quant",
			mod + "pickle", mod + "gguf", mod + "lora"},
		// The CLI: the ckpt facade, byte counts for rendering, and cobra.
		"cmd/ckpt": {rootPkg + "$", mod + "internal/human", "github.com/spf13/cobra", "github.com/spf13/pflag"},
		// The example service: the facade only.
		"examples/tensorserver": {rootPkg + "$", mod + "statedict"},
		// Test support: imported by _test.go files only (no package's
		// entry above allows it, but cmd/ckpt's module-wide one).
		"internal/testenv": {},
		// make test's reader of go test -json (standard library only).
		"internal/testsummary": {},
		// The fake libcuda the GPU tests load (built with the C compiler).
		"internal/fakecuda": {"github.com/ebitengine/purego"},
		// Byte counts and file kinds for messages (standard library only).
		"internal/human": {},
		// Hostile web and S3 servers on loopback for tests (standard library only).
		"internal/hostileserver": {},
		// Server processes for tests (standard library only).
		"internal/testproc": {},
		// A real MinIO server for the object-storage tests.
		"internal/miniotest": {mod + "internal/testproc", "github.com/minio/minio-go/"},
		// fake-gcs-server and Azurite for the gs:// and az:// tests.
		"internal/cloudemu": {mod + "internal/testproc", "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"},
		// The hostile-input corpus generator (zstd for the zstd bombs).
		"internal/hostile":     {"github.com/klauspost/compress/"},
		"internal/hostile/gen": {mod + "internal/hostile"},
		// A benchmark harness for the peer that ckpt itself does not use.
		"bench/gopickleload": {"github.com/nlpodyssey/gopickle/"},
		// The S3 download peer of bench/objstore.sh.
		"bench/s3get": {"github.com/minio/minio-go/"},
		// The set-up of bench/objstore_emu.sh: uploads the input to Azurite
		// (and fake-gcs-server, over plain HTTP), signs a SAS for rclone.
		"bench/emuput": {"github.com/Azure/azure-sdk-for-go/sdk/"},
		// The library side of bench/host_load.sh.
		"bench/hostload": {rootPkg + "$"},
		// Counts the bytes a tensor-parallel rank reads (bench/dcp.sh).
		"bench/rankread": {mod + "statedict"},
		// The regression guard's doc updater (bench/guard.sh; standard library only).
		"bench/guardcmp": {},
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
				if exact, ok := strings.CutSuffix(a, "$"); ok && imp == exact || !ok && strings.HasPrefix(imp, a) {
					continue imports
				}
			}
			t.Errorf("%s imports %s, which its layer does not allow", pkg, imp)
		}
	}
}

// TestCLIIsThin guards that cmd/ckpt only parses flags, renders and picks
// exit codes, while what a service would also need stays in the library:
//
//   - among the module's packages it imports only the root package ckpt
//     (the facade) and internal/human (byte counts for rendering), so
//     every command is flags, one facade call and rendering;
//   - it calls none of the steps of a load or an inspection itself (the
//     root package ckpt does), and opens checkpoints through ckpt.Open
//     (the one place a source string becomes a checkpoint);
//   - it declares no JSON form of its own: a struct type with json tags is
//     a report the library should marshal (docs/cli-json.md is the schema
//     of the library's types), except the few top-level envelopes listed;
//   - no file exceeds cliFileBudget lines (flags, help and rendering of one
//     command fit; more means logic that belongs in the library), except
//     the files listed, which are over it today.
func TestCLIIsThin(t *testing.T) {
	forbidden := map[string]map[string]bool{
		"github.com/ckpt-dev/ckpt/statedict":  {"Open": true, "NewReader": true, "ComputeStats": true},
		"github.com/ckpt-dev/ckpt/remap":      {"NewPlan": true, "DetectStrays": true},
		"github.com/ckpt-dev/ckpt/devicecopy": {"Preflight": true, "LoadHost": true, "Upload": true},
		"github.com/ckpt-dev/ckpt/digest":     {"ParseMetadata": true},
		"github.com/ckpt-dev/ckpt/verify":     {"Check": true, "Compare": true},
	}
	// Struct types with json tags that cmd/ckpt may declare: envelopes that
	// put a command's arguments around library results.
	envelopes := map[string]bool{
		"convertReport": true, "tpReport": true, "verifyReport": true, "versionInfo": true, "diffReport": true,
	}
	// The module packages a command file may import: the facade, and
	// byte counts for rendering.
	facadeOnly := map[string]bool{"github.com/ckpt-dev/ckpt": true, "github.com/ckpt-dev/ckpt/internal/human": true}
	// Files allowed over the line budget: none today.
	overBudget := map[string]bool{}
	const cliFileBudget = 250
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n := fset.File(f.Pos()).LineCount(); n > cliFileBudget && !overBudget[name] {
			t.Errorf("%s has %d lines, over the budget of %d for a command file: move logic to the library or rendering to its own file", name, n, cliFileBudget)
		}
		local := map[string]string{} // local package name -> import path
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/ckpt-dev/ckpt") && !facadeOnly[path] {
				t.Errorf("%s imports %s: a command calls the root package ckpt only (add the facade function or type there)", name, path)
			}
			n := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				n = imp.Name.Name
			}
			local[n] = path
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if st, ok := ts.Type.(*ast.StructType); ok && hasJSONTags(st) && !envelopes[ts.Name.Name] {
					t.Errorf("%s: cmd/ckpt declares the JSON form %s; give the library type its JSON form (MarshalJSON or tags) instead", fset.Position(ts.Pos()), ts.Name.Name)
				}
				return true
			}
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			if forbidden[local[id.Name]][sel.Sel.Name] {
				t.Errorf("%s: cmd/ckpt calls %s.%s itself; call the ckpt package instead", fset.Position(sel.Pos()), id.Name, sel.Sel.Name)
			}
			return true
		})
	}
}

// hasJSONTags reports whether a struct type (or one nested in it) has a
// field with a json tag.
func hasJSONTags(st *ast.StructType) bool {
	found := false
	ast.Inspect(st, func(n ast.Node) bool {
		if f, ok := n.(*ast.Field); ok && f.Tag != nil && strings.Contains(f.Tag.Value, "json:") {
			found = true
		}
		return !found
	})
	return found
}

// TestArchitectureGraph holds docs/architecture.md's import graph to what
// go list says: each product package (test support, benchmarks, examples
// and generators left out) with the module's packages it imports.
func TestArchitectureGraph(t *testing.T) {
	const mod = "github.com/ckpt-dev/ckpt"
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", mod+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	short := func(p string) string {
		if p == mod {
			return "ckpt"
		}
		return strings.TrimPrefix(p, mod+"/")
	}
	support := regexp.MustCompile(`^(bench/|examples/|internal/(test|hostile|cloudemu|miniotest|ggmlref|fakecuda)|.*/internal/gen$)`)
	var want []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := short(fields[0])
		if support.MatchString(pkg) {
			continue
		}
		var deps []string
		for _, imp := range fields[1:] {
			if imp == mod || strings.HasPrefix(imp, mod+"/") {
				deps = append(deps, short(imp))
			}
		}
		sort.Strings(deps)
		want = append(want, strings.TrimSpace(pkg+": "+strings.Join(deps, " ")))
	}
	sort.Strings(want)
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "```imports\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("docs/architecture.md has no ```imports block")
	}
	if got := strings.TrimSpace(block); got != strings.Join(want, "\n") {
		t.Errorf("docs/architecture.md's import graph is not what go list says; the block should read:\n%s", strings.Join(want, "\n"))
	}
}
