package convert

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/quant"
	"github.com/ckpt-dev/ckpt/statedict"
)

// encoded returns n values of a smooth pattern (seeded by k) as dt.
func encoded(dt dtype.DType, n, k int) []byte {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.Sin(float64(i*(k+2)+k))) * 0.2
	}
	b := make([]byte, n*dt.Size())
	dtype.EncodeFloat32(dt, b, v)
	return b
}

// rawOf returns the tensors of the checkpoint at p as stored, by name.
func rawOf(t *testing.T, p string) map[string]string {
	t.Helper()
	ck, err := statedict.Open(p, statedict.WithRaw())
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m := map[string]string{}
	for _, x := range ck.Tensors {
		b, err := x.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		m[x.Name+" "+x.DType.String()] = string(b)
	}
	return m
}

func configBlock(t *testing.T, dir string) any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m["quantization_config"]
}

// TestQuantizeSameSchemes: each scheme WithQuantize writes is found again
// by WithQuantizeSame on its output (fp8-block with a block size that is
// not square), and a conversion with it writes every stored tensor with
// the input's bytes and dtype (WithDType casts the dense tensors, not the
// stored ones: fp8-channel's bfloat16 scales stay bfloat16) and keeps
// the quantization_config; a .pth output carries the same tensors; codes
// damaged in the input fail it on their recorded digest.
func TestQuantizeSameSchemes(t *testing.T) {
	ctx := context.Background()
	for _, scheme := range []string{"fp8-block:16x8", "fp8-channel", "nvfp4"} {
		t.Run(scheme, func(t *testing.T) {
			dir := t.TempDir()
			p := "model.layers.0."
			writeRelease(t, dir, `{"torch_dtype": "bfloat16"}`, []rawTensor{
				{p + "self_attn.q_proj.weight", "BF16", []int64{32, 32}, encoded(dtype.BFloat16, 32*32, 1)},
				{p + "mlp.down_proj.weight", "BF16", []int64{32, 64}, encoded(dtype.BFloat16, 32*64, 2)},
				{"model.norm.weight", "BF16", []int64{32}, encoded(dtype.BFloat16, 32, 3)},
			})
			spec, err := quant.ParseQuantize(scheme)
			if err != nil {
				t.Fatal(err)
			}
			ck, err := statedict.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			qdir := filepath.Join(dir, "q") + "/"
			if _, err := Convert(ctx, ck, qdir, WithQuantize(spec)); err != nil {
				t.Fatal(err)
			}
			qck, err := statedict.Open(qdir)
			if err != nil {
				t.Fatal(err)
			}
			defer qck.Close()
			out := filepath.Join(dir, "same") + "/"
			sum, err := Convert(ctx, qck, out, WithQuantizeSame(), WithDType(dtype.Float32))
			if err != nil {
				t.Fatal(err)
			}
			if q := sum.Quantize; q == nil || q.Scheme != scheme || q.Quantized != 2 || q.Copied != 2 {
				t.Fatalf("report %+v", q)
			}
			want, got := rawOf(t, qdir), rawOf(t, out)
			for k, v := range want {
				if strings.HasPrefix(k, "model.norm.weight ") {
					if _, ok := got["model.norm.weight float32"]; !ok {
						t.Errorf("norm not cast to float32: %v", keys(got))
					}
					continue
				}
				if got[k] != v {
					t.Errorf("%s: not the input's bytes (written: %v)", k, keys(got))
				}
			}
			if len(got) != len(want) {
				t.Errorf("%d tensors written, the input stores %d", len(got), len(want))
			}
			if g, w := configBlock(t, out), configBlock(t, qdir); !reflect.DeepEqual(g, w) {
				t.Errorf("quantization_config %v, the input's %v", g, w)
			}
			pth := filepath.Join(dir, "same.pth")
			if _, err := Convert(ctx, qck, pth, WithQuantizeSame()); err != nil {
				t.Fatal(err)
			}
			if got := rawOf(t, pth); !reflect.DeepEqual(got, want) {
				t.Errorf(".pth: %v, want %v", keys(got), keys(want))
			}
			// A flipped bit in copied codes fails the conversion on the
			// digest ckpt recorded, as any convert read.
			st := filepath.Join(qdir, "model.safetensors")
			b, _ := os.ReadFile(st)
			codes := want["model.layers.0.mlp.down_proj.weight float8_e4m3fn"] + want["model.layers.0.mlp.down_proj.weight_packed uint8"]
			i := strings.Index(string(b), codes[:64])
			if i < 0 {
				t.Fatal("codes not found in the file")
			}
			b[i+3] ^= 1
			os.WriteFile(st, b, 0o644)
			dck, err := statedict.Open(qdir)
			if err != nil {
				t.Fatal(err)
			}
			defer dck.Close()
			bad := filepath.Join(dir, "bad") + "/"
			if _, err := Convert(ctx, dck, bad, WithQuantizeSame()); !errors.Is(err, ErrDamaged) {
				t.Errorf("damaged codes: %v", err)
			}
			if _, err := os.Stat(bad); !os.IsNotExist(err) {
				t.Errorf("output left: %v", err)
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	var s []string
	for k := range m {
		s = append(s, k)
	}
	return s
}

// addOne is a transform that adds 1 to the tensors named.
type addOne map[string]bool

func (a addOne) Transforms(t *statedict.Tensor) bool { return a[t.Name] }
func (a addOne) Apply(_ context.Context, _ *statedict.Tensor, v []float32) error {
	for i := range v {
		v[i]++
	}
	return nil
}

// fp8Release writes a block-FP8 release as DeepSeek's tools save it:
// float8 codes (fmt as given), float32 weight_scale_inv of 8x8 blocks,
// ragged ones where the shape asks, and a static input_scale.
func fp8Release(t *testing.T, fmtName, st string, rows int64) string {
	t.Helper()
	dir := t.TempDir()
	var ts []rawTensor
	for i, m := range []string{"a", "b"} {
		codes := make([]byte, rows*16)
		for j := range codes {
			codes[j] = byte(j*7+i) & 0x6f // finite, no NaN
		}
		sr := (rows + 7) / 8
		ts = append(ts, rawTensor{"l." + m + ".weight", st, []int64{rows, 16}, codes},
			rawTensor{"l." + m + ".weight_scale_inv", "F32", []int64{sr, 2}, encoded(dtype.Float32, int(sr*2), 5+i)},
			rawTensor{"l." + m + ".input_scale", "F32", []int64{}, encoded(dtype.Float32, 1, 9+i)})
	}
	writeRelease(t, dir, `{"quantization_config": {"quant_method": "fp8", "fmt": "`+fmtName+`", "activation_scheme": "static", "weight_block_size": [8, 8]}}`, ts)
	return dir
}

// TestQuantizeSameTransformed: under WithQuantizeSame a weight the
// transform replaces is quantized again from its new values (its codes
// and scales differ from the input's, its static input_scale is kept),
// the other is copied; a weight the quantizer would leave unquantized (a
// ragged block) and a scheme ckpt does not write (e5m2 codes) are refused
// before anything is written, as is WithQuantizeSame with
// WithQuantizeIgnore.
func TestQuantizeSameTransformed(t *testing.T) {
	ctx := context.Background()
	conv := func(dir, out string, opts ...Option) (*Summary, error) {
		ck, err := statedict.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer ck.Close()
		return Convert(ctx, ck, out, append([]Option{WithQuantizeSame(), WithTransform(addOne{"l.a.weight": true})}, opts...)...)
	}
	rel := fp8Release(t, "e4m3", "F8_E4M3", 16)
	out := filepath.Join(t.TempDir(), "out") + "/"
	sum, err := conv(rel, out)
	if err != nil {
		t.Fatal(err)
	}
	if q := sum.Quantize; q.Quantized != 2 || q.Copied != 1 || q.Scheme != "fp8-block:8x8" {
		t.Errorf("report %+v", q)
	}
	want, got := rawOf(t, rel), rawOf(t, out)
	for k, v := range want {
		changed := strings.HasPrefix(k, "l.a.weight")
		if changed == (got[k] == v) {
			t.Errorf("%s: transformed %v, yet bytes equal %v", k, changed, got[k] == v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%v written, want %v", keys(got), keys(want))
	}
	ck, err := statedict.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	a := ck.Tensor("l.a.weight")
	ck.Close()
	if a == nil || a.QuantStored == nil || a.QuantStored.Scheme != "fp8 e4m3, 8x8 blocks, scales in weight_scale_inv" || len(a.QuantStored.Consumed) != 1 {
		t.Errorf("read back: %+v", a)
	}

	for _, c := range []struct {
		name string
		dir  string
		opts []Option
		want error
	}{
		{"ragged blocks", fp8Release(t, "e4m3", "F8_E4M3", 20), nil, ErrQuantizeSame},
		{"e5m2", fp8Release(t, "e5m2", "F8_E5M2", 16), nil, ErrQuantizeSame},
		{"ignore", rel, []Option{WithQuantizeIgnore("l.b")}, ErrOption},
		{"named scheme", rel, []Option{WithQuantize(quant.QuantizeSpec{Scheme: quant.SchemeFP8Channel})}, ErrOption},
	} {
		out := filepath.Join(t.TempDir(), "out") + "/"
		_, err := conv(c.dir, out, c.opts...)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if _, serr := os.Stat(out); !os.IsNotExist(serr) {
			t.Errorf("%s: output left: %v", c.name, serr)
		}
		t.Logf("%s: %v", c.name, err)
	}
}
