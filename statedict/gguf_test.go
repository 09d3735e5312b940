package statedict_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/ggml"
	"github.com/ckpt-dev/ckpt/gguf"
	"github.com/ckpt-dev/ckpt/statedict"
)

type ggufTensor struct {
	spec gguf.TensorSpec
	data []byte
}

// writeGGUF writes a GGUF file of the given tensors to a temporary file.
func writeGGUF(t *testing.T, tensors []ggufTensor) string {
	t.Helper()
	var specs []gguf.TensorSpec
	for _, x := range tensors {
		specs = append(specs, x.spec)
	}
	p := filepath.Join(t.TempDir(), "model.gguf")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w, err := gguf.NewWriter(f, []gguf.KV{{Key: "general.architecture", Type: gguf.TypeString, Value: "llama"}}, specs)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range tensors {
		if err := w.WriteTensor(bytes.NewReader(x.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

func floats(n int, seed int64) []float32 {
	r := rand.New(rand.NewSource(seed))
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func le32(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func quantize(t *testing.T, typ ggml.Type, v []float32) []byte {
	t.Helper()
	n, err := typ.RowBytes(int64(len(v)))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n)
	if err := ggml.Quantize(typ, v, b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGGUFTensors: a GGUF file's tensors read with PyTorch-order shapes;
// plain types are their stored bytes, quantized ones their elements
// dequantized by ggml's rules, from any offset.
func TestGGUFTensors(t *testing.T) {
	w := floats(2*64, 1)
	emb := floats(3*256, 2)
	f16 := make([]byte, 2*8)
	for i := 0; i < 8; i++ {
		binary.LittleEndian.PutUint16(f16[2*i:], dtype.F32ToF16(float32(i)-3.5))
	}
	q8 := quantize(t, ggml.Q8_0, w)
	q4k := quantize(t, ggml.Q4_K, emb)
	p := writeGGUF(t, []ggufTensor{
		{gguf.TensorSpec{Name: "norm.weight", Dims: []uint64{5}, Type: ggml.F32}, le32(floats(5, 3))},
		{gguf.TensorSpec{Name: "blk.0.attn_q.weight", Dims: []uint64{64, 2}, Type: ggml.Q8_0}, q8},
		{gguf.TensorSpec{Name: "token_embd.weight", Dims: []uint64{256, 3}, Type: ggml.Q4_K}, q4k},
		{gguf.TensorSpec{Name: "half", Dims: []uint64{4, 2}, Type: ggml.F16}, f16},
	})
	ck, err := statedict.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if ck.Format != statedict.FormatGGUF || ck.GGUF == nil || ck.Version != "3" || len(ck.Tensors) != 4 {
		t.Fatalf("%+v", ck)
	}
	want := map[string]struct {
		dt    dtype.DType
		shape []int64
		typ   string
	}{
		"norm.weight":         {dtype.Float32, []int64{5}, "f32"},
		"blk.0.attn_q.weight": {dtype.Float32, []int64{2, 64}, "q8_0"},
		"token_embd.weight":   {dtype.Float32, []int64{3, 256}, "q4_K"},
		"half":                {dtype.Float16, []int64{2, 4}, "f16"},
	}
	for _, tt := range ck.Tensors {
		w := want[tt.Name]
		if tt.DType != w.dt || !reflect.DeepEqual(tt.Shape, w.shape) || tt.GGML == nil || tt.GGML.Type != w.typ {
			t.Errorf("%s: %s %v %+v", tt.Name, tt.DType, tt.Shape, tt.GGML)
		}
	}
	check := func(name string, typ ggml.Type, raw []byte, n int) {
		ref := make([]float32, n)
		if err := ggml.Dequantize(typ, raw, ref); err != nil {
			t.Fatal(err)
		}
		got, err := ck.Tensor(name).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, le32(ref)) {
			t.Errorf("%s: dequantized bytes differ from ggml.Dequantize", name)
		}
		// Reads at offsets inside a block, across blocks.
		s := ck.Tensor(name).Storage
		ra, err := s.ReaderAt()
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range [][2]int{{0, 4}, {6, 130}, {300, 200}, {len(got) - 3, 3}, {127, 1}, {1000, 2000}} {
			if o[0]+o[1] > len(got) {
				continue
			}
			b := make([]byte, o[1])
			if _, err := ra.ReadAt(b, int64(o[0])); err != nil || !bytes.Equal(b, got[o[0]:o[0]+o[1]]) {
				t.Errorf("%s: ReadAt(%d, %d): %v", name, o[0], o[1], err)
			}
		}
		if _, err := ra.ReadAt(make([]byte, 8), int64(len(got)-4)); err != io.EOF {
			t.Errorf("%s: read past the end: %v", name, err)
		}
	}
	check("blk.0.attn_q.weight", ggml.Q8_0, q8, len(w))
	check("token_embd.weight", ggml.Q4_K, q4k, len(emb))
	if got, _ := ck.Tensor("half").ReadAll(); !bytes.Equal(got, f16) {
		t.Errorf("f16 not copied bit for bit")
	}
}

// TestGGUFBigEndian: a big-endian GGUF's plain tensors read swapped to
// little-endian; its quantized ones are refused by name.
func TestGGUFBigEndian(t *testing.T) {
	var b bytes.Buffer
	be := binary.BigEndian
	u32 := func(v uint32) { b.Write(be.AppendUint32(nil, v)) }
	u64 := func(v uint64) { b.Write(be.AppendUint64(nil, v)) }
	str := func(s string) { u64(uint64(len(s))); b.WriteString(s) }
	b.WriteString("GGUF")
	u32(3)
	u64(2)
	u64(0)
	str("w")
	u32(1)
	u64(2)
	u32(uint32(ggml.F32))
	u64(0)
	str("q")
	u32(1)
	u64(32)
	u32(uint32(ggml.Q8_0))
	u64(32)
	for b.Len()%32 != 0 {
		b.WriteByte(0)
	}
	u32(math.Float32bits(1.5))
	u32(math.Float32bits(-2))
	b.Write(make([]byte, 24+34))
	ck, err := statedict.NewReader(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ck.Tensor("w").ReadAll(); err != nil || !bytes.Equal(got, le32([]float32{1.5, -2})) {
		t.Errorf("big-endian f32: %v %v", got, err)
	}
	if _, err := ck.Tensor("q").ReadAll(); !errors.Is(err, statedict.ErrUnsupported) {
		t.Errorf("big-endian q8_0: %v", err)
	}
}
