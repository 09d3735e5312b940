package convert

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/testenv"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

// needTorch skips without torch, or fails when CKPT_REQUIRE_INTEROP=1.
func needTorch(t *testing.T) {
	t.Helper()
	testenv.Require(t, "torch", "numpy")
}

func py(t *testing.T, args ...string) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(testenv.Python(), append([]string{"testdata/interop.py"}, args...)...)
	cmd.Stderr = &stderr
	if out, err := cmd.Output(); err != nil {
		t.Fatalf("interop.py %v: %v\n%s%s", args, err, out, stderr.String())
	}
}

// TestInteropRoundTrip: pth -> safetensors -> pth equals the original in
// torch (names, dtypes, shapes, values, parameters, tied storages); the
// safetensors file passes an independent json + numpy reader; a direct
// pth -> pth keeps views on their storages.
func TestInteropRoundTrip(t *testing.T) {
	needTorch(t)
	dir := t.TempDir()
	py(t, "make", dir)
	convert(t, filepath.Join(dir, "orig.pt"), filepath.Join(dir, "out.safetensors"))
	convert(t, filepath.Join(dir, "out.safetensors"), filepath.Join(dir, "back.pt"))
	convert(t, filepath.Join(dir, "orig.pt"), filepath.Join(dir, "direct.pt"))
	py(t, "check", dir)
}

// TestInteropSafetensorsLibrary: the safetensors library itself (not
// only the format's rules) loads ckpt's safetensors output, single file
// and sharded, with warnings as errors, to the original's values. Debian
// bookworm has no python3-safetensors: CI runs this in its torch 2.x
// stage (scripts/torch2-python).
func TestInteropSafetensorsLibrary(t *testing.T) {
	testenv.Require(t, "torch", "numpy", "safetensors")
	dir := t.TempDir()
	py(t, "make", dir)
	single := filepath.Join(dir, "one.safetensors")
	convert(t, filepath.Join(dir, "orig.pt"), single)
	convert(t, filepath.Join(dir, "orig.pt"), filepath.Join(dir, "shards", "model.safetensors.index.json"), WithMaxShardSize(200))
	py(t, "stlib", dir, single)
	shards, err := filepath.Glob(filepath.Join(dir, "shards", "model-*-of-*.safetensors"))
	if err != nil || len(shards) < 2 {
		t.Fatalf("want several shards, got %v (%v)", shards, err)
	}
	py(t, append([]string{"stlib", dir}, shards...)...)
}

// TestInteropTorch2DTypes: float8 (four kinds) and uint16-64 tensors saved
// by torch 2.6 (fixture torch2_dtypes.pt) convert to .pt, keeping the
// object tree, and through safetensors back to a flat .pt, and each output
// loads in torch 2.x with weights_only=True, no warning, bit for bit.
func TestInteropTorch2DTypes(t *testing.T) {
	testenv.RequireFeature(t, "torch with float8 and uint16 (2.3+)", "import torch; torch.float8_e4m3fn, torch.uint16")
	dir := t.TempDir()
	src := fixtures + "torch2_dtypes.pt"
	tree := filepath.Join(dir, "tree.pt")
	if sum := convert(t, src, tree); sum.Structure != "tree" || len(sum.Torch2DTypes) != 7 || len(sum.Dropped) != 0 {
		t.Errorf("summary %+v", sum)
	}
	convert(t, src, filepath.Join(dir, "st.safetensors"))
	flat := filepath.Join(dir, "flat.pt")
	convert(t, filepath.Join(dir, "st.safetensors"), flat)
	py(t, "newdtypes", src, tree, flat)
}

// TestInteropCast: --dtype bf16 and f16 give the bits torch's .to() gives,
// NaN and Inf included; integer and step tensors stay.
func TestInteropCast(t *testing.T) {
	needTorch(t)
	dir := t.TempDir()
	py(t, "make", dir)
	convert(t, filepath.Join(dir, "cast.pt"), filepath.Join(dir, "cast_bf16.pt"), WithDType(dtype.BFloat16))
	convert(t, filepath.Join(dir, "cast.pt"), filepath.Join(dir, "cast_f16.pt"), WithDType(dtype.Float16))
	py(t, "cast", dir)
}

// TestInteropCPURetag: torch.load(weights_only=True) with no map_location
// loads the cpu-retagged conversion of a cuda-tagged checkpoint on this
// machine, with the same values.
func TestInteropCPURetag(t *testing.T) {
	needTorch(t)
	out := filepath.Join(t.TempDir(), "cpu.pt")
	rules, err := remap.Parse("cpu")
	if err != nil {
		t.Fatal(err)
	}
	convert(t, fixtures+"cuda_tagged.pt", out, WithRules(rules))
	py(t, "cpuload", out, fixtures+"cuda_tagged.pt")
}

// TestInteropStorageValues: storages saved as values (root, typed, untyped,
// empty, zip and legacy) come out of a .pth conversion as torch.load gives
// them from the source, loadable with weights_only.
func TestInteropStorageValues(t *testing.T) {
	needTorch(t)
	dir := t.TempDir()
	for _, f := range []string{"storage_root.pt", "storages.pt", "storages_legacy.pt"} {
		src := filepath.Join("..", "testdata", "fixtures", f)
		out := filepath.Join(dir, f+".pth")
		convert(t, src, out)
		py(t, "storages", out, src)
	}
}

// TestInteropWholeModule: a whole pickled model converts to a flat state
// dict named as model.state_dict() names it, in .pth (loaded by torch with
// weights_only) and safetensors.
func TestInteropWholeModule(t *testing.T) {
	needTorch(t)
	dir := t.TempDir()
	want := []string{"scale", "conv1.weight", "conv1.bias", "bn.weight", "bn.bias", "bn.running_mean",
		"bn.running_var", "bn.num_batches_tracked", "fc.weight", "fc.bias"}
	for _, f := range []string{"module_zip.pt", "module_legacy.pt"} {
		src := filepath.Join("..", "testdata", "fixtures", f)
		out := filepath.Join(dir, f+".pth")
		convert(t, src, out)
		py(t, append([]string{"names", out}, want...)...)
		st := filepath.Join(dir, f+".safetensors")
		convert(t, src, st)
		ck, err := statedict.Open(st)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, tt := range ck.Tensors {
			got[tt.Name] = true
		}
		ck.Close()
		for _, n := range want {
			if !got[n] || len(got) != len(want) {
				t.Errorf("%s: safetensors names %v, want %v", f, got, want)
				break
			}
		}
	}
}

// TestInteropOldTensorClass: tensors reduced through torch.Tensor itself
// (pre-0.4 files: torch.Tensor() + BUILD, and a 0.3 Variable's state), zip
// and legacy, convert to .pth and safetensors holding what torch.load gives.
func TestInteropOldTensorClass(t *testing.T) {
	needTorch(t)
	dir := t.TempDir()
	for _, f := range []string{"old_tensor_class.pt", "old_tensor_class_legacy.pt"} {
		src := filepath.Join("..", "testdata", "fixtures", f)
		pth, st := filepath.Join(dir, f+".pth"), filepath.Join(dir, f+".safetensors")
		convert(t, src, pth)
		convert(t, src, st)
		py(t, "flat", src, pth, st)
	}
}

// TestInteropDTensor: FSDP2 / HSDP state dicts saved with torch.save
// (torch 2.x, gloo on CPU): where a rank's local shard is the whole tensor
// (world size 1; HSDP over a 2x1 mesh), .pth and safetensors outputs hold
// each DTensor's local tensor under its own name, as torch.load and
// to_local() give it; where it is one of several shards, convert refuses
// with ErrPartialShard and writes nothing.
func TestInteropDTensor(t *testing.T) {
	testenv.RequireFeature(t, "torch with torch.distributed.tensor (2.4+)", "import torch.distributed.tensor")
	dir := t.TempDir()
	for _, f := range []string{"torch2_fsdp2_w1_rank0.pt", "torch2_hsdp_w2_rank0.pt"} {
		src := filepath.Join("..", "testdata", "fixtures", f)
		pth, st := filepath.Join(dir, f+".pth"), filepath.Join(dir, f+".safetensors")
		convert(t, src, pth)
		convert(t, src, st)
		py(t, "flat", src, pth, st)
	}
}

// TestInteropQuantizedModels: whole quantized models (torch.save of
// quantize_dynamic's result; a static-quantized conv + linear) convert to
// flat state dicts named as model.state_dict() names them; torch loads the
// .pth with weights_only. The quantized weights are dropped (neither format
// holds a quantized tensor), their float biases and stubs' qparams kept.
func TestInteropQuantizedModels(t *testing.T) {
	needTorch(t)
	dir := t.TempDir()
	for f, want := range map[string][]string{
		"quant_dynamic_model.pt": {"0._packed_params._packed_params.1", "2._packed_params._packed_params.1"},
		"quant_static_model.pt":  {"quant.scale", "quant.zero_point", "conv1.bias", "fc._packed_params._packed_params.1"},
	} {
		src := filepath.Join("..", "testdata", "fixtures", f)
		out := filepath.Join(dir, f+".pth")
		sum := convert(t, src, out)
		py(t, append([]string{"names", out}, want...)...)
		if sum.Tensors != len(want) {
			t.Errorf("%s: %d tensors written, want %d", f, sum.Tensors, len(want))
		}
		convert(t, src, filepath.Join(dir, f+".safetensors"))
	}
}

// TestInteropTorchScriptAttributes: a TorchScript archive converts to the
// tensors of ScriptModule.state_dict() (torch loads the .pth, weights_only);
// plain tensor attributes are dropped and listed, unless WithAttributes.
func TestInteropTorchScriptAttributes(t *testing.T) {
	needTorch(t)
	dir := t.TempDir()
	src := filepath.Join("..", "testdata", "fixtures", "torchscript_attrs.pt")
	out := filepath.Join(dir, "sd.pth")
	sum := convert(t, src, out)
	py(t, "names", out, "steps", "inner.fc.weight", "inner.fc.bias")
	attrs := 0
	for _, d := range sum.Dropped {
		if d.Type == "tensor" {
			attrs++
		}
	}
	if attrs != 4 {
		t.Errorf("dropped %+v, want the 4 attributes", sum.Dropped)
	}
	all := filepath.Join(dir, "all.pth")
	convert(t, src, all, WithAttributes(true))
	py(t, "names", all, "steps", "table", "bank.0", "bank.1", "inner.lut", "inner.fc.weight", "inner.fc.bias")
	convert(t, src, filepath.Join(dir, "sd.safetensors"))
}
