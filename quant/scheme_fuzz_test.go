package quant_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/quant"
)

// schemeFuzzReleases are, per registered scheme, a config and the stored
// tensors of one quantized weight; the fuzzer picks their dimensions.
var schemeFuzzReleases = []struct {
	conf    string
	tensors func(d [4]int64) []quant.Stored
}{
	{`{"quantization_config": {"quant_method": "mxfp4"}}`, func(d [4]int64) []quant.Stored {
		return []quant.Stored{{Name: "e.w_blocks", DType: dtype.Uint8, Shape: []int64{d[0], d[1], d[2], 16}},
			{Name: "e.w_scales", DType: dtype.Uint8, Shape: []int64{d[0], d[1], d[3]}}}
	}},
	{`{"quantization_config": {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "float"}}}}}`,
		func(d [4]int64) []quant.Stored {
			return []quant.Stored{{Name: "m.weight_packed", DType: dtype.Uint8, Shape: []int64{d[0], d[1]}},
				{Name: "m.weight_scale", DType: dtype.Float8E4M3FN, Shape: []int64{d[0], d[2]}},
				{Name: "m.weight_global_scale", DType: dtype.Float32, Shape: []int64{d[3] % 3}}}
		}},
	{`{"quantization_config": {"quant_method": "compressed-tensors", "format": "int-quantized", "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "int"}}}}}`,
		func(d [4]int64) []quant.Stored {
			return []quant.Stored{{Name: "m.weight", DType: dtype.Int8, Shape: []int64{d[0], d[1]}},
				{Name: "m.weight_scale", DType: dtype.BFloat16, Shape: []int64{d[2], d[3]}},
				{Name: "m.weight_zero_point", DType: dtype.Int8, Shape: []int64{d[2], d[3]}}}
		}},
	{`{"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 32}}`, func(d [4]int64) []quant.Stored {
		return []quant.Stored{{Name: "m.qweight", DType: dtype.Int32, Shape: []int64{d[0], d[1]}},
			{Name: "m.qzeros", DType: dtype.Int32, Shape: []int64{d[2], d[3]}},
			{Name: "m.scales", DType: dtype.Float16, Shape: []int64{d[2], d[1]}}}
	}},
	{`{"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 32, "version": "gemm"}}`, func(d [4]int64) []quant.Stored {
		return []quant.Stored{{Name: "m.qweight", DType: dtype.Int32, Shape: []int64{d[0], d[1]}},
			{Name: "m.qzeros", DType: dtype.Int32, Shape: []int64{d[2], d[1]}},
			{Name: "m.scales", DType: dtype.Float16, Shape: []int64{d[2], d[3]}}}
	}},
	{`{"quantization_config": {"quant_method": "bitsandbytes", "load_in_8bit": true}}`, func(d [4]int64) []quant.Stored {
		return []quant.Stored{{Name: "m.weight", DType: dtype.Int8, Shape: []int64{d[0], d[1]}},
			{Name: "m.SCB", DType: dtype.Float32, Shape: []int64{d[2]}}}
	}},
	{`{"quantization": {"group_size": 32, "bits": 4}}`, func(d [4]int64) []quant.Stored {
		return []quant.Stored{{Name: "m.weight", DType: dtype.Uint32, Shape: []int64{d[0], d[1]}},
			{Name: "m.scales", DType: dtype.BFloat16, Shape: []int64{d[0], d[2]}},
			{Name: "m.biases", DType: dtype.BFloat16, Shape: []int64{d[0], d[3]}}}
	}},
}

// FuzzSchemes: whatever the stored shapes, every registered scheme gives
// a typed *quant.Error or a plan whose codec decodes any element range
// from buffers of the sizes it names without a panic, and refuses short
// companions with an error.
func FuzzSchemes(f *testing.F) {
	f.Add(uint8(0), int64(2), int64(6), int64(3), int64(3), int64(5), int64(7))
	f.Add(uint8(1), int64(8), int64(32), int64(4), int64(1), int64(0), int64(9))
	f.Add(uint8(2), int64(9), int64(64), int64(9), int64(1), int64(3), int64(100))
	f.Add(uint8(3), int64(12), int64(16), int64(3), int64(2), int64(1), int64(40))
	f.Add(uint8(4), int64(64), int64(3), int64(2), int64(24), int64(10), int64(50))
	f.Add(uint8(5), int64(8), int64(40), int64(8), int64(0), int64(0), int64(320))
	f.Add(uint8(6), int64(4), int64(16), int64(4), int64(4), int64(1), int64(64))
	f.Fuzz(func(t *testing.T, which uint8, a, b, c, d, first, n int64) {
		r := schemeFuzzReleases[int(which)%len(schemeFuzzReleases)]
		dims := [4]int64{a % 300, b % 300, c % 300, d % 300}
		p, err := quant.Detect([]byte(r.conf), r.tensors(dims))
		if err != nil {
			var qe *quant.Error
			if !errors.As(err, &qe) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if p == nil {
			return
		}
		for _, g := range p.Groups {
			total := quant.Stored{Shape: g.Shape}.NumEl()
			if total <= 0 || total > 1<<22 {
				continue
			}
			first = (first%total + total) % total
			n = min((n%4096+4096)%4096+1, total-first)
			var comps [][]byte
			for _, cs := range g.Companions {
				m := cs.NumEl() * int64(cs.DType.Size())
				if m > 1<<22 {
					return
				}
				b := make([]byte, m)
				for i := range b {
					b[i] = byte(i*7 + 1)
				}
				comps = append(comps, b)
			}
			lo, hi := g.Codec.CodeSpan(first, n)
			wbytes := g.Weight.NumEl() * int64(g.Weight.DType.Size())
			if lo < 0 || hi < lo || hi > wbytes {
				t.Fatalf("CodeSpan(%d, %d) = [%d, %d) of %d stored bytes", first, n, lo, hi, wbytes)
			}
			codes := make([]byte, hi-lo)
			for i := range codes {
				codes[i] = byte(i * 13)
			}
			if len(codes) >= 4 {
				binary.LittleEndian.PutUint32(codes, 0xffffffff)
			}
			dst := make([]float32, n)
			if err := g.Codec.Dequantize(dst, first, codes, comps); err != nil {
				t.Fatalf("%s: Dequantize [%d, +%d) of %v: %v", g.Scheme, first, n, g.Shape, err)
			}
			if len(comps) > 0 && len(comps[0]) > 0 {
				comps[0] = comps[0][:len(comps[0])-1]
				if err := g.Codec.Dequantize(dst, first, codes, comps); err == nil {
					t.Fatalf("%s: short companion accepted", g.Scheme)
				}
			}
		}
	})
}
