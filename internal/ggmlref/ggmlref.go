// Package ggmlref runs ggml's own reference codecs for the tests of
// package ggml. At test time it finds ggml's C sources in the Go module
// cache (the ggml vendored by github.com/ollama/ollama at Version,
// downloaded through the module proxy when absent), compiles
// ggml-quants.c with this package's testdata/driver.c into a temporary executable,
// and exchanges raw little-endian data with it over stdin and stdout.
//
// Without a C compiler or the module the tests skip, unless
// CKPT_REQUIRE_CC=1, which makes that a failure. No ggml code is stored
// in this repository: only the driver, which calls ggml's functions.
package ggmlref

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Module and Version name the Go module whose vendored ggml is the
// reference.
const (
	Module  = "github.com/ollama/ollama"
	Version = "v0.17.4"
	// ggmlDir is ggml's directory inside the module.
	ggmlDir = "ml/backend/ggml/ggml"
)

//go:embed testdata/driver.c
var driverC []byte

// Ref is a compiled driver.
type Ref struct {
	bin string
}

var (
	once     sync.Once
	tmpDir   string
	builtBin map[string]string // by optimization flag
	buildErr error
	skipMsg  string
	mu       sync.Mutex
)

// Cleanup removes the temporary build directory; call it from TestMain
// after m.Run.
func Cleanup() {
	if tmpDir != "" {
		os.RemoveAll(tmpDir)
	}
}

// Sources returns the directory of ggml's sources in the module cache.
func Sources() (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", Module+"@"+Version)
	cmd.Dir = os.TempDir()
	out, err := cmd.Output()
	var m struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &m); jerr == nil && m.Error != "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", Module, Version, m.Error)
	}
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %v", Module, Version, err)
	}
	if m.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: no directory", Module, Version)
	}
	return filepath.Join(m.Dir, ggmlDir), nil
}

func compiler() string {
	if cc := os.Getenv("CC"); cc != "" {
		if p, err := exec.LookPath(cc); err == nil {
			return p
		}
	}
	for _, c := range []string{"gcc", "cc", "clang"} {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	return ""
}

// build compiles the driver with the given optimization flag.
func build(opt string) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	once.Do(func() {
		builtBin = map[string]string{}
		if compiler() == "" {
			skipMsg = "no C compiler (gcc, cc, clang)"
			return
		}
		dir, err := Sources()
		if err != nil {
			skipMsg = err.Error()
			return
		}
		if _, err := os.Stat(filepath.Join(dir, "src", "ggml-quants.c")); err != nil {
			skipMsg = err.Error()
			return
		}
		tmpDir, buildErr = os.MkdirTemp("", "ggmlref")
		if buildErr != nil {
			return
		}
		buildErr = os.WriteFile(filepath.Join(tmpDir, "driver.c"), driverC, 0o600)
	})
	if skipMsg != "" || buildErr != nil {
		return "", buildErr
	}
	if b, ok := builtBin[opt]; ok {
		return b, nil
	}
	dir, err := Sources()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(tmpDir, "driver"+opt)
	// -ffp-contract=off: ggml's reference semantics are unfused float
	// operations (what gcc emits for x86-64 anyway); the Go code keeps
	// the same order of operations. -DNDEBUG as in ggml's release
	// builds: nearest_int's assert would otherwise abort on the inputs
	// (subnormal groups) where release builds return defined bits.
	args := []string{opt, "-DNDEBUG", "-std=gnu11", "-ffp-contract=off", "-Wno-unused-function",
		"-I", filepath.Join(dir, "src"), "-I", filepath.Join(dir, "include"), "-I", filepath.Join(dir, "src", "ggml-cpu"),
		"-o", bin, filepath.Join(tmpDir, "driver.c"), filepath.Join(dir, "src", "ggml-quants.c"), "-lm"}
	out, err := exec.Command(compiler(), args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v\n%s", compiler(), strings.Join(args, " "), err, out)
	}
	builtBin[opt] = bin
	return bin, nil
}

func get(tb testing.TB, opt string) *Ref {
	tb.Helper()
	bin, err := build(opt)
	if err != nil {
		tb.Fatal(err)
	}
	if skipMsg != "" {
		if os.Getenv("CKPT_REQUIRE_CC") == "1" {
			tb.Fatalf("ggml reference unavailable and CKPT_REQUIRE_CC=1: %s", skipMsg)
		}
		tb.Skipf("ggml reference unavailable (set CKPT_REQUIRE_CC=1 to fail): %s", skipMsg)
	}
	return &Ref{bin: bin}
}

// Build returns the reference driver compiled as for correctness tests
// (-O2), skipping or failing tb when it cannot be built.
func Build(tb testing.TB) *Ref { return get(tb, "-O2") }

// BuildBench returns the driver compiled with -O3, as ggml's release
// builds compile it, for timing.
func BuildBench(tb testing.TB) *Ref { return get(tb, "-O3") }

func (r *Ref) run(tb testing.TB, in []byte, args ...string) []byte {
	tb.Helper()
	cmd := exec.Command(r.bin, args...)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("driver %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// Sizes returns ggml's block size and block bytes (sizeof the C block
// struct) of every type the driver knows, by type id.
func (r *Ref) Sizes(tb testing.TB) map[uint32][2]int64 {
	tb.Helper()
	m := map[uint32][2]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(r.run(tb, nil, "sizes"))), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			tb.Fatalf("driver sizes: line %q", line)
		}
		id, _ := strconv.ParseUint(f[0], 10, 32)
		bs, _ := strconv.ParseInt(f[1], 10, 64)
		ts, _ := strconv.ParseInt(f[2], 10, 64)
		m[uint32(id)] = [2]int64{bs, ts}
	}
	return m
}

// Dequantize runs ggml's dequantizer of type id on src, n elements.
func (r *Ref) Dequantize(tb testing.TB, id uint32, src []byte, n int) []float32 {
	tb.Helper()
	out := r.run(tb, src, "deq", strconv.FormatUint(uint64(id), 10), strconv.Itoa(n))
	if len(out) != 4*n {
		tb.Fatalf("driver deq %d: %d bytes, want %d", id, len(out), 4*n)
	}
	y := make([]float32, n)
	for i := range y {
		y[i] = math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:]))
	}
	return y
}

// Quantize runs ggml's reference quantizer of type id on x.
func (r *Ref) Quantize(tb testing.TB, id uint32, x []float32) []byte {
	tb.Helper()
	in := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(in[4*i:], math.Float32bits(v))
	}
	return r.run(tb, in, "q", strconv.FormatUint(uint64(id), 10), strconv.Itoa(len(x)))
}

// Bench times ggml's codec (op "deq" or "q") of type id over mb MiB of
// float32 data, best of iters passes, and returns seconds per pass and
// the element count.
func (r *Ref) Bench(tb testing.TB, op string, id uint32, mb, iters int) (float64, int64) {
	tb.Helper()
	out := strings.Fields(string(r.run(tb, nil, "bench", op, strconv.FormatUint(uint64(id), 10), strconv.Itoa(mb), strconv.Itoa(iters))))
	if len(out) != 2 {
		tb.Fatalf("driver bench: output %q", out)
	}
	s, err1 := strconv.ParseFloat(out[0], 64)
	n, err2 := strconv.ParseInt(out[1], 10, 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("driver bench: output %q", out)
	}
	return s, n
}

// Valid runs ggml_validate_row_data on each of the nblocks blocks of
// type id in src and returns its verdicts.
func (r *Ref) Valid(tb testing.TB, id uint32, src []byte, nblocks int) []bool {
	tb.Helper()
	cmd := exec.Command(r.bin, "valid", strconv.FormatUint(uint64(id), 10), strconv.Itoa(nblocks))
	cmd.Stdin = bytes.NewReader(src)
	out, err := cmd.Output() // ggml reports each invalid block on stderr
	if err != nil || len(out) != nblocks {
		tb.Fatalf("driver valid %d: %v, %d bytes", id, err, len(out))
	}
	v := make([]bool, nblocks)
	for i, c := range out {
		v[i] = c == '1'
	}
	return v
}
