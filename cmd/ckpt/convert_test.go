package main

import (
	"bytes"
	"fmt"
	"runtime"

	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/ckpt-dev/ckpt/torchzip"
)

func TestConvertAndVerify(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "t.safetensors")
	code, out, errs := runCLI(t, "convert", fx+"tied.pt", st)
	if code != exitOK || !strings.Contains(out, "lm_head.weight") || !strings.Contains(out, "tied weights stored once") {
		t.Fatalf("convert: %d %q %q", code, out, errs)
	}
	code, out, _ = runCLI(t, "verify", st)
	if code != exitOK || !strings.Contains(out, "OK") {
		t.Errorf("verify: %d %q", code, out)
	}
	code, out, _ = runCLI(t, "verify", fx+"tied.pt", st)
	if code != exitOK || !strings.Contains(out, "OK") {
		t.Errorf("verify two: %d %q", code, out)
	}
	// An existing OUT needs --force: exit 1, OUT untouched.
	code, _, errs = runCLI(t, "convert", fx+"training.pt", st)
	if code != exitError || !strings.Contains(errs, "--force") {
		t.Errorf("existing: %d %q", code, errs)
	}
	code, out, errs = runCLI(t, "convert", "--json", "--force", "--dtype", "bf16", fx+"training.pt", st)
	if code != exitOK {
		t.Fatalf("json: %d %s", code, errs)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"in", "out", "format", "files", "tensors", "bytes", "aliases", "casts", "renamed", "values", "dropped", "synced", "seconds", "gb_per_s"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("json lacks %q: %s", k, out)
		}
	}
	// OUT is left to the kernel's write-back unless --sync.
	if rep["synced"] != false {
		t.Errorf("small OUT without --sync: synced %v", rep["synced"])
	}
	code, out, errs = runCLI(t, "convert", "--force", "--sync", "--dtype", "bf16", fx+"training.pt", st)
	if code != exitOK || strings.Contains(out, "not synced") {
		t.Errorf("--sync: %d %q %s", code, out, errs)
	}
	code, out, errs = runCLI(t, "convert", "--force", "--dtype", "bf16", fx+"training.pt", st)
	if code != exitOK || !strings.Contains(out, "not synced: the kernel finishes writing it out") {
		t.Errorf("without --sync: %d %q %s", code, out, errs)
	}
	// Differences: exit 1 and each named.
	code, out, _ = runCLI(t, "verify", fx+"training.pt", st)
	if code != exitError || !strings.Contains(out, "dtype") {
		t.Errorf("verify differing: %d %q", code, out)
	}
	code, out, _ = runCLI(t, "verify", "--json", "--rtol", "0.01", fx+"training.pt", st)
	if code != exitOK || !strings.Contains(out, `"ok": true`) {
		t.Errorf("verify with tolerance: %d %q", code, out)
	}
}

// TestConvertTreeSummary: a training checkpoint to .pth keeps its
// structure, says how many floats it kept and what that means for
// weights_only loading; --drop-floats leaves them out and says so.
func TestConvertTreeSummary(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runCLI(t, "convert", "--map-location", "cpu", fx+"training.pt", filepath.Join(dir, "a.pt"))
	note := "6 float values kept: torch.load(weights_only=True) reads them on torch>=2.0, not on torch 1.13 (use --drop-floats there)"
	if code != exitOK || !strings.Contains(out, note) || !strings.Contains(out, "structure: as saved") {
		t.Fatalf("convert: %d %q %q", code, out, errs)
	}
	code, out, errs = runCLI(t, "convert", "--json", "--drop-floats", fx+"training.pt", filepath.Join(dir, "b.pt"))
	if code != exitOK {
		t.Fatalf("--drop-floats: %d %q", code, errs)
	}
	var rep struct {
		Structure string
		Floats    int
		Dropped   []struct{ Name, Reason string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Structure != "tree" || rep.Floats != 0 || len(rep.Dropped) != 8 || !strings.Contains(out, `"optimizer.param_groups.0.lr"`) {
		t.Errorf("--drop-floats: %s", out)
	}
	code, out, _ = runCLI(t, "convert", "--strip-prefix", "model.", fx+"training.pt", filepath.Join(dir, "c.pt"))
	if code != exitOK || !strings.Contains(out, "structure: flat state dict") {
		t.Errorf("flat: %d %q", code, out)
	}
}

func TestVerifyCorrupt(t *testing.T) {
	dir := t.TempDir()
	pt := filepath.Join(dir, "t.pt")
	if code, _, errs := runCLI(t, "convert", fx+"tied.pt", pt); code != exitOK {
		t.Fatal(errs)
	}
	ck, err := statedict.Open(pt)
	if err != nil {
		t.Fatal(err)
	}
	rec := ck.Tensor("embed.weight").Storage.Record
	ck.Close()
	b, _ := os.ReadFile(pt)
	// Flip a byte inside the record's payload: find it after its name.
	i := bytes.Index(b, []byte(rec))
	j := i + len(rec) + bytes.Index(b[i+len(rec):], []byte("ZZ"))
	for b[j] == 'Z' {
		j++
	}
	b[j+3] ^= 0x40
	if err := os.WriteFile(pt, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI(t, "verify", pt)
	if code != exitError || !strings.Contains(out, "embed.weight: crc32") {
		t.Errorf("verify corrupt: %d %q", code, out)
	}
}

func TestConvertUsage(t *testing.T) {
	for _, args := range [][]string{
		{"convert", "a"},
		{"convert", "--dtype", "int8", "a", "b.pt"},
		{"convert", "--to", "onnx", "a", "b"},
		{"convert", "--rename", "(=x", "a", "b.pt"},
		{"convert", "--max-shard-size", "lots", "a", "b.pt"},
		{"convert", "--map-location", "gpu", "a", "b.pt"},
		{"verify", "--atol", "1", "a"},
	} {
		if code, _, _ := runCLI(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

var (
	cliOnce sync.Once
	cliDir  string // holds the binary; removed by TestMain
	cliBin  string
	cliErr  error
)

// buildCLI builds the ckpt binary once for the tests that run it as a
// separate process, and returns its path.
func buildCLI(t *testing.T) string {
	t.Helper()
	cliOnce.Do(func() {
		if cliDir, cliErr = os.MkdirTemp("", "ckpt-cli-test-"); cliErr != nil {
			return
		}
		cliBin = filepath.Join(cliDir, "ckpt")
		if out, err := exec.Command("go", "build", "-o", cliBin, ".").CombinedOutput(); err != nil {
			cliErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cliBin
}

// bigCheckpoint writes a torch zip of n bytes of float32 zeros in one
// storage, streamed.
func bigCheckpoint(t *testing.T, path string, n int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st := &torchzip.StorageRef{Key: "0", DType: dtype.Float32, Location: "cpu", NumEl: n / 4}
	pkl, err := torchzip.EncodeStateDict([]torchzip.Entry{{Name: "w", Tensor: &torchzip.TensorRef{Storage: st, Shape: []int64{n / 4}, Strides: []int64{1}}}})
	if err != nil {
		t.Fatal(err)
	}
	zw := torchzip.NewWriter(f)
	if err := zw.WriteRecord("data.pkl", int64(len(pkl)), bytes.NewReader(pkl)); err != nil {
		t.Fatal(err)
	}
	if err := zw.WriteRecord("data/0", n, io.LimitReader(zeros{}, n)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestConvertKilled runs the real binary on a large input, kills it with
// SIGKILL while it writes, and checks that OUT does not exist; SIGINT
// also leaves no temporary file.
func TestConvertKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and writes 1 GB")
	}
	dir := t.TempDir()
	bin := buildCLI(t)
	in := filepath.Join(dir, "big.pt")
	bigCheckpoint(t, in, 1<<30)
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT} {
		outDir := filepath.Join(dir, sig.String())
		os.Mkdir(outDir, 0o755)
		out := filepath.Join(outDir, "out.safetensors")
		cmd := exec.Command(bin, "convert", in, out)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait until the temporary output holds data, then signal.
		deadline := time.Now().Add(30 * time.Second)
		for {
			// A named temporary file, or (Linux) an unnamed one the
			// process holds open in outDir.
			m, _ := filepath.Glob(filepath.Join(outDir, ".out.safetensors.tmp-*"))
			fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", cmd.Process.Pid))
			for _, fd := range fds {
				if l, err := os.Readlink(fd); err == nil && strings.HasPrefix(l, outDir+"/") {
					m = append(m, fd)
				}
			}
			if len(m) > 0 {
				if fi, err := os.Stat(m[0]); err == nil && fi.Size() > 1<<20 {
					break
				}
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("%s: no temporary output appeared", sig)
			}
			time.Sleep(2 * time.Millisecond)
		}
		cmd.Process.Signal(sig)
		err := cmd.Wait()
		if err == nil {
			t.Fatalf("%s: convert finished before the signal; use a larger input", sig)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: OUT exists after the signal (%v)", sig, err)
		}
		if sig == syscall.SIGKILL && runtime.GOOS == "linux" {
			// Unnamed temporary files: nothing survives the process.
			if left, _ := os.ReadDir(outDir); len(left) != 0 {
				t.Errorf("SIGKILL: left %v", left)
			}
		}
		if sig == syscall.SIGINT {
			if left, _ := os.ReadDir(outDir); len(left) != 0 || !strings.Contains(stderr.String(), "interrupted") {
				t.Errorf("SIGINT: left %v, stderr %q", left, stderr.String())
			}
		}
	}
}

// TestConvertDiskFull converts into a 256 KiB tmpfs, where the output
// cannot fit: a clear error, exit 1, and nothing left behind. Mounting
// needs root; without it TestDiskFull in package convert covers the same
// path with an injected ENOSPC writer.
func TestConvertDiskFull(t *testing.T) {
	dir := t.TempDir()
	mnt := filepath.Join(dir, "small")
	os.Mkdir(mnt, 0o755)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s); package convert's TestDiskFull injects ENOSPC instead", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	in := filepath.Join(dir, "in.pt")
	bigCheckpoint(t, in, 4<<20)
	for _, out := range []string{"o.safetensors", "o.pt"} {
		code, _, errs := runCLI(t, "convert", in, filepath.Join(mnt, out))
		if code != exitError || !strings.Contains(errs, "no space left on device") || !strings.Contains(errs, out) {
			t.Errorf("%s: exit %d, stderr %q", out, code, errs)
		}
		if left, _ := os.ReadDir(mnt); len(left) != 0 {
			t.Errorf("%s: left %v", out, left)
		}
	}
}

// TestConvertBroadcastCLI: a (2^40,) broadcast of one float32 is refused
// for safetensors output (exit 1, one line naming the tensor and
// --max-materialized, nothing written) and kept as a view in .pt output.
func TestConvertBroadcastCLI(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "b.pt")
	s0 := &torchzip.StorageRef{Key: "0", DType: dtype.Float32, Location: "cpu", NumEl: 1}
	pkl, err := torchzip.EncodeStateDict([]torchzip.Entry{{Name: "x", Tensor: &torchzip.TensorRef{Storage: s0, Shape: []int64{1 << 40}, Strides: []int64{0}}}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := torchzip.NewWriter(&buf)
	zw.WriteRecord("data.pkl", int64(len(pkl)), bytes.NewReader(pkl))
	zw.WriteRecord("data/0", 4, bytes.NewReader([]byte{0, 0, 0xc0, 0x3f}))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "o.safetensors")
	code, _, errs := runCLI(t, "convert", in, out)
	if code != exitError || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, in+": ") || !strings.Contains(errs, `"x"`) || !strings.Contains(errs, "--max-materialized") {
		t.Errorf("safetensors: exit %d, %q", code, errs)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("output written: %v", err)
	}
	if code, _, errs := runCLI(t, "convert", "--max-materialized", "lots", in, out); code != exitUsage {
		t.Errorf("--max-materialized lots: exit %d, %q", code, errs)
	}
	code, _, errs = runCLI(t, "convert", in, filepath.Join(dir, "o.pt"))
	fi, err := os.Stat(filepath.Join(dir, "o.pt"))
	if code != 0 || err != nil || fi.Size() > 4096 {
		t.Errorf(".pt: exit %d, %q, %v", code, errs, err)
	}
}
