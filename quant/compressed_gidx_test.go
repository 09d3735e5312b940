package quant_test

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/quant"
)

const gidxConf = `{"quantization_config": {"quant_method": "compressed-tensors", "format": "float-quantized",
 "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "group", "group_size": 4, "actorder": "group"}}}}}`

// gidxRelease is a float-quantized weight [rows, cols] in groups of 4
// with a weight_g_idx of gShape and gType.
func gidxRelease(rows, cols int64, gType dtype.DType, gShape []int64) []quant.Stored {
	return []quant.Stored{{Name: "m.weight", DType: dtype.Float8E4M3FN, Shape: []int64{rows, cols}},
		{Name: "m.weight_scale", DType: dtype.Float32, Shape: []int64{rows, cols / 4}},
		{Name: "m.weight_g_idx", DType: gType, Shape: gShape}}
}

// TestFloatGIdxRefused: a weight_g_idx of the wrong length, rank or dtype
// is refused when the release is planned, naming the tensor.
func TestFloatGIdxRefused(t *testing.T) {
	for _, c := range []struct {
		name  string
		dt    dtype.DType
		shape []int64
	}{
		{"short", dtype.Int32, []int64{15}},
		{"long", dtype.Int64, []int64{17}},
		{"2-D", dtype.Int32, []int64{1, 16}},
		{"float", dtype.Float32, []int64{16}},
	} {
		_, err := quant.Detect([]byte(gidxConf), gidxRelease(3, 16, c.dt, c.shape))
		var qe *quant.Error
		if !errors.As(err, &qe) || !errors.Is(err, quant.ErrCompanionShape) || qe.Tensor != "m.weight" {
			t.Errorf("%s: %v, want a *quant.Error for m.weight wrapping ErrCompanionShape", c.name, err)
		}
	}
}

// FuzzFloatGIdx: whatever weight_g_idx holds, a float-quantized group
// weight with activation ordering decodes to code * scale[r, g_idx[c]]
// (the column's own group when g_idx holds a -1), or refuses with
// ErrCodecBuffer (an index outside the groups, groups not of group_size
// columns); never a panic, never another value.
func FuzzFloatGIdx(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 3, 2, 1, 0, 0, 1, 2, 3, 3, 2, 1, 0}, false)
	f.Add([]byte{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}, true)
	f.Add([]byte{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 9}, false)
	f.Add([]byte{0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}, false)
	f.Add([]byte{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 0xff}, true)
	f.Fuzz(func(t *testing.T, idx []byte, wide bool) {
		const rows, cols, groups = 3, 16, 4
		gt, es := dtype.Int32, 4
		if wide {
			gt, es = dtype.Int64, 8
		}
		p, err := quant.Detect([]byte(gidxConf), gidxRelease(rows, cols, gt, []int64{cols}))
		if err != nil || len(p.Groups) != 1 {
			t.Fatalf("plan: %v", err)
		}
		g := p.Groups[0]
		gidx := make([]byte, cols*es)
		vals := make([]int64, cols)
		for c := range vals {
			v := int64(c / 4)
			if len(idx) > 0 {
				v = int64(int8(idx[c%len(idx)])) // small, negative too
			}
			vals[c] = v
			if wide {
				binary.LittleEndian.PutUint64(gidx[8*c:], uint64(v))
			} else {
				binary.LittleEndian.PutUint32(gidx[4*c:], uint32(v))
			}
		}
		codes := make([]byte, rows*cols)
		for i := range codes {
			codes[i] = byte(i*29 + 3)
		}
		scales := make([]byte, 4*rows*groups)
		for i := 0; i < rows*groups; i++ {
			binary.LittleEndian.PutUint32(scales[4*i:], math.Float32bits(float32(i+1)/8))
		}
		dst := make([]float32, rows*cols)
		err = g.Codec.Dequantize(dst, 0, codes, [][]byte{scales, gidx})
		if err != nil {
			if !errors.Is(err, quant.ErrCodecBuffer) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		colOrder := false
		count := make(map[int64]int)
		for _, v := range vals {
			colOrder = colOrder || v == -1
			count[v]++
		}
		for c, v := range vals {
			if !colOrder && (v < 0 || v >= groups || count[v] != cols/groups) {
				t.Fatalf("g_idx %v accepted (column %d)", vals, c)
			}
		}
		for r := 0; r < rows; r++ {
			for c := 0; c < cols; c++ {
				grp := vals[c]
				if colOrder {
					grp = int64(c / 4)
				}
				want := float32(dtype.Float8ToFloat64(dtype.Float8E4M3FN, codes[r*cols+c])) * (float32(int64(r)*groups+grp+1) / 8)
				if got := dst[r*cols+c]; math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
					t.Fatalf("g_idx %v: [%d, %d] = %v, want %v", vals, r, c, got, want)
				}
			}
		}
	})
}
