package convert

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/testenv"
	"github.com/ckpt-dev/ckpt/statedict"
)

const dcpFixture = "../testdata/dcp/basic"

// TestConvertDCP: a DCP directory converts to safetensors and .pth whose
// tensors equal the DCP tensors byte for byte (verify A B).
func TestConvertDCP(t *testing.T) {
	dir := t.TempDir()
	for _, out := range []string{"o.safetensors", "o.pth", "sharded/model.safetensors.index.json"} {
		var opts []Option
		if filepath.Dir(out) != "." {
			opts = append(opts, WithMaxShardSize(300))
		}
		sum := convert(t, dcpFixture, filepath.Join(dir, out), opts...)
		if sum.Tensors != 17 {
			t.Errorf("%s: %d tensors", out, sum.Tensors)
		}
		if out == "o.pth" && sum.Structure != "tree" {
			t.Errorf("%s: structure %q, want the nested state dict", out, sum.Structure)
		}
		compareFiles(t, dcpFixture, filepath.Join(dir, out))
	}
}

func compareFiles(t *testing.T, a, b string) {
	t.Helper()
	ca, err := statedict.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	cb, err := statedict.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	if len(ca.Tensors) != len(cb.Tensors) {
		t.Fatalf("%s: %d tensors, %s: %d", a, len(ca.Tensors), b, len(cb.Tensors))
	}
	for _, ta := range ca.Tensors {
		tb := cb.Tensor(ta.Name)
		if tb == nil {
			t.Errorf("%s: no tensor %q", b, ta.Name)
			continue
		}
		x, err1 := ta.ReadAll()
		y, err2 := tb.ReadAll()
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) || ta.DType != tb.DType {
			t.Errorf("%s: %q differs (%v, %v)", b, ta.Name, err1, err2)
		}
	}
}

// TestInteropDCP: torch 2.x loads ckpt's conversions of a 4-rank DCP save
// (safetensors, .pth, sharded safetensors) equal, bit for bit, to what
// torch's own dcp_to_torch_save makes of the same directory.
func TestInteropDCP(t *testing.T) {
	testenv.RequireFeature(t, "torch with torch.distributed.checkpoint.format_utils (2.2+) and safetensors",
		"from torch.distributed.checkpoint.format_utils import dcp_to_torch_save; import safetensors")
	dir := t.TempDir()
	st := filepath.Join(dir, "o.safetensors")
	pth := filepath.Join(dir, "o.pth")
	idx := filepath.Join(dir, "sharded", "model.safetensors.index.json")
	convert(t, dcpFixture, st)
	convert(t, dcpFixture, pth)
	convert(t, dcpFixture, idx, WithMaxShardSize(300))
	var stderr bytes.Buffer
	abs, _ := filepath.Abs(dcpFixture)
	cmd := exec.Command(testenv.Python(), "testdata/dcp_interop.py", abs, dir, st, pth, idx)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dcp_interop.py: %v\n%s%s", err, out, stderr.String())
	}
	t.Logf("%s", out)
}

// TestInteropTensorParallel: TensorParallel's rank files, loaded by the
// safetensors library, equal torch.chunk's parts (uneven and empty ones
// included) of torch's own consolidation of the DCP fixture.
func TestInteropTensorParallel(t *testing.T) {
	testenv.Require(t, "torch", "safetensors")
	ck, err := statedict.Open(dcpFixture)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	dir := t.TempDir()
	flat := filepath.Join(dir, "whole.pt")
	convert(t, dcpFixture, flat)
	split := "model.embed.weight=0,model.proj.weight=1,model.mlp.weight=-1,model.conv.weight=2,model.counts=0,model.bytes=0"
	rules, err := statedict.ParseSplitRules(split)
	if err != nil {
		t.Fatal(err)
	}
	const world = 4
	sums, err := TensorParallel(context.Background(), ck, filepath.Join(dir, "tp"), world, rules)
	if err != nil {
		t.Fatal(err)
	}
	dims := map[string]int{}
	var files []string
	for _, s := range sums {
		files = append(files, s.Files...)
	}
	for _, tn := range ck.Tensors {
		if d, _ := statedict.SplitDim(rules, tn); d >= 0 {
			dims[tn.Name] = d
		}
	}
	js, _ := json.Marshal(dims)
	var stderr bytes.Buffer
	cmd := exec.Command(testenv.Python(), append([]string{"testdata/tp_interop.py", flat, "4", string(js)}, files...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tp_interop.py: %v\n%s%s", err, out, stderr.String())
	}
	t.Logf("%s", out)
}
