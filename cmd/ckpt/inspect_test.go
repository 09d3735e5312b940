package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/ggml"
	"github.com/ckpt-dev/ckpt/gguf"
	"github.com/ckpt-dev/ckpt/internal/human"
)

const fx = "../../testdata/fixtures/"

// runCLI runs the command line in-process and returns exit code, stdout, stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

func TestInspectHuman(t *testing.T) {
	code, out, errs := runCLI(t, "inspect", fx+"cuda_tagged.pt")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"Format:    torch-zip", "cuda:0", "cuda:1", "STRAY", "Stray tensors"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestInspectJSON(t *testing.T) {
	code, out, errs := runCLI(t, "inspect", "--json", "--stats", fx+"training.pt")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if rep.Format != "torch-zip" || rep.ByteOrder != "little" || len(rep.Tensors) == 0 {
		t.Fatalf("report %+v", rep)
	}
	var sawStats, sawEpoch bool
	for _, tt := range rep.Tensors {
		if tt.Stats != nil {
			sawStats = true
		}
	}
	for _, o := range rep.Objects {
		if o.Name == "epoch" && o.Value == float64(7) {
			sawEpoch = true
		}
	}
	if !sawStats || !sawEpoch {
		t.Errorf("stats %v epoch %v", sawStats, sawEpoch)
	}
	if len(rep.Opaque) == 0 {
		t.Errorf("argparse/numpy values not listed as opaque")
	}
}

func TestInspectFilter(t *testing.T) {
	code, out, _ := runCLI(t, "inspect", "--json", "--filter", "optimizer.*", fx+"training.pt")
	if code != 0 {
		t.Fatal(code)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Tensors) == 0 {
		t.Fatal("filter kept nothing")
	}
	for _, tt := range rep.Tensors {
		if !strings.HasPrefix(tt.Name, "optimizer.") {
			t.Errorf("filter kept %s", tt.Name)
		}
	}
}

func TestExitCodes(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"inspect"}, exitUsage, "accepts 1 arg"},
		{[]string{"inspect", "--nope", "x"}, exitUsage, "unknown flag"},
		{[]string{"inspect", "--filter", "[", fx + "tied.pt"}, exitUsage, "--filter"},
		{[]string{"frobnicate"}, exitUsage, "unknown command"},
		{[]string{"inspect", fx + "bad/unsafe_os_system.pt"}, exitError, "os.system"},
		{[]string{"inspect", fx + "bad/legacy_empty.pt"}, exitError, "empty"},
		{[]string{"inspect", fx + "does-not-exist.pt"}, exitError, "no such file"},
	} {
		code, _, errs := runCLI(t, c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d (%s)", c.args, code, c.code, errs)
		}
		if !strings.Contains(errs, c.msg) {
			t.Errorf("%v: stderr %q lacks %q", c.args, errs, c.msg)
		}
		if strings.Contains(errs, "goroutine ") || strings.Count(strings.TrimSpace(errs), "\n") > 1 {
			t.Errorf("%v: stderr is not one clear line: %q", c.args, errs)
		}
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.00 KiB", 1536: "1.50 KiB", 10 << 20: "10.0 MiB", 3 << 30: "3.00 GiB"} {
		if got := human.Bytes(n); got != want {
			t.Errorf("human.Bytes(%d) = %q, want %q", n, got, want)
		}
	}
	if got := humanCount(1234567); got != "1,234,567" {
		t.Errorf("humanCount = %q", got)
	}
}

// TestInspectGGUF: metadata with arrays counted, not dumped; PyTorch-order
// shapes; the ggml type of each tensor; --json with everything.
func TestInspectGGUF(t *testing.T) {
	tokens := make([]string, 1000)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("tok%d", i)
	}
	var b bytes.Buffer
	w, err := gguf.NewWriter(&b, []gguf.KV{
		{Key: "general.architecture", Type: gguf.TypeString, Value: "llama"},
		{Key: "general.name", Type: gguf.TypeString, Value: "tiny\x1b[2J"},
		{Key: "general.quantization_version", Type: gguf.TypeUint32, Value: uint32(2)},
		{Key: "tokenizer.ggml.tokens", Type: gguf.TypeArray, Value: &gguf.Array{Elem: gguf.TypeString, Values: tokens}},
	}, []gguf.TensorSpec{{Name: "blk.0.ffn_up.weight", Dims: []uint64{32, 3}, Type: ggml.Q8_0}})
	if err != nil {
		t.Fatal(err)
	}
	w.WriteTensor(bytes.NewReader(make([]byte, 3*34)))
	w.Close()
	p := filepath.Join(t.TempDir(), "m.gguf")
	os.WriteFile(p, b.Bytes(), 0o644)
	code, out, errs := runCLI(t, "inspect", p)
	for _, want := range []string{"gguf (version 3)", "blk.0.ffn_up.weight", "[3, 32]", "ggml q8_0 102 B", `general.name (string) = "tiny\x1b[2J"`,
		`tokenizer.ggml.tokens (array) = [string × 1000] ["tok0", "tok1", "tok2", "tok3", ...]`} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("inspect lacks %q (exit %d):\n%s%s", want, code, out, errs)
		}
	}
	if strings.Contains(out, "tok999") || strings.ContainsRune(out, 0x1b) {
		t.Errorf("tokens dumped or raw ESC:\n%s", out)
	}
	code, out, _ = runCLI(t, "inspect", "--json", p)
	var rep struct {
		GGUF struct {
			Version  int
			Metadata []struct {
				Key   string
				Type  string
				Value json.RawMessage
			}
		}
		Tensors []struct {
			Shape []int64
			DType string
			GGML  struct {
				Type   string
				Dims   []uint64
				NBytes int64
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitOK {
		t.Fatalf("%v: %s", err, out)
	}
	if rep.GGUF.Version != 3 || len(rep.GGUF.Metadata) != 4 || !strings.Contains(string(rep.GGUF.Metadata[3].Value), `"tok999"`) ||
		rep.Tensors[0].GGML.Type != "q8_0" || fmt.Sprint(rep.Tensors[0].GGML.Dims) != "[32 3]" || fmt.Sprint(rep.Tensors[0].Shape) != "[3 32]" ||
		rep.Tensors[0].DType != "float32" || rep.Tensors[0].GGML.NBytes != 102 {
		t.Errorf("json: %+v", rep)
	}
}
