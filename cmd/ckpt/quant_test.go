package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/testenv"
	"github.com/ckpt-dev/ckpt/statedict"
)

// writeST writes a safetensors file of raw tensors: name -> dtype code, shape, bytes.
func writeST(t *testing.T, path string, names []string, dts []string, shapes [][]int64, data [][]byte) {
	t.Helper()
	hdr := map[string]any{}
	off := 0
	for i, n := range names {
		hdr[n] = map[string]any{"dtype": dts[i], "shape": shapes[i], "data_offsets": []int{off, off + len(data[i])}}
		off += len(data[i])
	}
	h, _ := json.Marshal(hdr)
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(h)))
	b.Write(h)
	for _, d := range data {
		b.Write(d)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fp8Dir writes a block-FP8 release by hand: w [3, 5] float8_e4m3fn
// codes 0x38 (1.0) with weight_scale_inv of shape scaleShape (2.0 each),
// and config.json when conf is not "".
func fp8Dir(t *testing.T, scaleShape []int64, conf string) string {
	dir := t.TempDir()
	n := int64(1)
	for _, s := range scaleShape {
		n *= s
	}
	sc := make([]byte, 4*n)
	for i := int64(0); i < n; i++ {
		binary.LittleEndian.PutUint32(sc[4*i:], 0x40000000)
	}
	writeST(t, filepath.Join(dir, "model.safetensors"), []string{"m.w.weight", "m.w.weight_scale_inv"},
		[]string{"F8_E4M3", "F32"}, [][]int64{{3, 5}, scaleShape}, [][]byte{bytes.Repeat([]byte{0x38}, 15), sc})
	if conf != "" {
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const fp8Conf = `{"torch_dtype": "float32", "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}}`

// TestQuantConvertRefusals: what would be a silent element-wise cast is
// refused with one line naming the scheme and the tensor, exit 1, no
// output: float8 with a scale and no config, a scale of the wrong shape,
// a quant_method ckpt does not know. --raw keeps the stored tensors;
// --config names a config.json elsewhere.
func TestQuantConvertRefusals(t *testing.T) {
	for _, c := range []struct {
		name, dir string
		args      []string
		want      []string
	}{
		{"no config, blocks not 128x128", fp8Dir(t, []int64{3, 5}, ""), nil, []string{"fp8 (by tensor names)", `"m.w.weight"`, "shape [3, 5], want [1, 1]"}},
		{"wrong scale shape", fp8Dir(t, []int64{2, 1}, fp8Conf), nil, []string{"scheme fp8", `"m.w.weight"`, "shape [2, 1], want [1, 1]"}},
		{"unknown method", fp8Dir(t, []int64{1, 1}, `{"quantization_config": {"quant_method": "fancy-q"}}`), nil, []string{"scheme fancy-q", `"m.w.weight"`}},
		{"block 0", fp8Dir(t, []int64{1, 1}, `{"quantization_config": {"quant_method": "fp8", "weight_block_size": [0, 128]}}`), nil, []string{"scheme fp8", "weight_block_size [0, 128]"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "o.safetensors")
			code, _, errs := runCLI(t, append([]string{"convert", c.dir, out, "--dtype", "bf16"}, c.args...)...)
			if code != exitError || strings.Count(errs, "\n") != 1 {
				t.Fatalf("exit %d, %q", code, errs)
			}
			for _, w := range c.want {
				if !strings.Contains(errs, w) {
					t.Errorf("%q lacks %q", errs, w)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("output written")
			}
			code, _, errs = runCLI(t, "convert", "--raw", c.dir, out)
			if code != exitOK {
				t.Fatalf("--raw: exit %d %s", code, errs)
			}
			ck, err := statedict.Open(out, statedict.WithRaw())
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			if len(ck.Tensors) != 2 || ck.Tensor("m.w.weight").DType.String() != "float8_e4m3fn" {
				t.Errorf("--raw output: %d tensors", len(ck.Tensors))
			}
		})
	}
	// --config names the config.json the directory lacks: 1.0 * 2.0 everywhere.
	conf := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(conf, []byte(fp8Conf), 0o644)
	out := filepath.Join(t.TempDir(), "o.safetensors")
	if code, _, errs := runCLI(t, "convert", "--config", conf, fp8Dir(t, []int64{1, 1}, ""), out); code != exitOK {
		t.Fatalf("--config: exit %d %s", code, errs)
	}
	ck, err := statedict.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	b, err := ck.Tensor("m.w.weight").ReadAll()
	if err != nil || len(ck.Tensors) != 1 || !bytes.Equal(b, bytes.Repeat([]byte{0, 0, 0, 0x40}, 15)) {
		t.Errorf("--config output: %d tensors, % x, %v", len(ck.Tensors), b, err)
	}
}

// TestQuantConvertUpstream: `ckpt convert DIR out.safetensors --dtype bf16`
// of a block-FP8 release written in torch 2.6 gives DeepSeek's
// weight_dequant values rounded to bfloat16, bit for bit, under the
// unquantized model's names, the scales consumed; sharded outputs too.
func TestQuantConvertUpstream(t *testing.T) {
	script, err := os.ReadFile("../../quant/testdata/quantize.py")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(testenv.Python(), "-c", string(script), "fp8", dir)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		msg := fmt.Sprintf("%s cannot write the fixture (torch with float8 and safetensors): %v\n%s", testenv.Python(), err, out)
		if os.Getenv("CKPT_REQUIRE_INTEROP") == "all" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	exp, err := statedict.Open(filepath.Join(dir, "expected.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Close()
	for _, o := range []struct{ out, shard string }{{"o.safetensors", ""}, {"sh/model.safetensors.index.json", "100KB"}, {"o.pth", ""}} {
		out := filepath.Join(dir, o.out)
		args := []string{"convert", filepath.Join(dir, "release"), out, "--dtype", "bf16"}
		if o.shard != "" {
			args = append(args, "--max-shard-size", o.shard)
		}
		if code, _, errs := runCLI(t, args...); code != exitOK {
			t.Fatalf("%s: exit %d %s", o.out, code, errs)
		}
		ck, err := statedict.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		if len(ck.Tensors) != 5 {
			t.Errorf("%s: %d tensors", o.out, len(ck.Tensors))
		}
		for _, g := range ck.Tensors {
			e := exp.Tensor(g.Name + ".out")
			if e == nil {
				t.Errorf("%s: unexpected tensor %s", o.out, g.Name)
				continue
			}
			gb, err1 := g.ReadAll()
			eb, err2 := e.ReadAll()
			if err1 != nil || err2 != nil || !bytes.Equal(gb, eb) {
				t.Errorf("%s: %s differs from upstream (%v %v)", o.out, g.Name, err1, err2)
			}
		}
		ck.Close()
	}
}
