package convert

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/ckpt-dev/ckpt/ggml"
	"github.com/ckpt-dev/ckpt/gguf"
	"github.com/ckpt-dev/ckpt/quant"
	"github.com/ckpt-dev/ckpt/statedict"
)

// gpt-oss MXFP4 experts into a GGUF output. As llama.cpp's
// convert_hf_to_gguf.py does for gpt-oss (GptOssModel.repack_mxfp4), the
// stored `X_blocks` [E, R, G, 16] and `X_scales` [E, R, G] become one
// tensor of ggml type MXFP4 with shape [E, R, G*32]: the stored
// orientation, [experts, out, in], which is how llama.cpp holds expert
// weights (ggml dims {in, out, experts}), not transformers' transposed
// BF16 layout that the tensor reads as elsewhere. Each 32-element group's
// nibbles are rearranged into ggml's block_mxfp4 with its exponent byte
// in front (quant.MXFP4GGML); no value goes through a float.
//
// The rule for WithGGUFType: without one (and without WithDType, which
// asks for the values in a float dtype), or with mxfp4 or any other
// quantized type, the blocks are copied (llama.cpp's converter keeps
// gpt-oss's MXFP4 experts whatever its --outtype; quantizing 4-bit values
// again would only lose more); with f32, f16 or bf16 the values are
// written in that type (exactly in f32 and bf16, which hold every MXFP4
// value), in the same [E, R, G*32] orientation. An exponent byte of 255
// (E8M0's NaN, which transformers reads as Inf and ggml as a finite
// 2^127) is refused for a copy, naming the tensor: ggml's
// ggml_validate_row_data refuses it too.

// mxfp4Source is a gpt-oss MXFP4 weight's stored tensors, or one half of
// them: with split, the stored rows of one parity (gate_up_proj's gate or
// up outputs, gguf_gptoss.go), lay then being that half's layout.
type mxfp4Source struct {
	blocks, scales *statedict.Tensor
	lay            quant.MXFP4Layout
	split          bool
	parity         int
}

// half returns the even (parity 0) or odd (1) stored rows of a 3-D
// [E, R, G*32] weight, as llama.cpp's converter slices [:, ::2] and
// [:, 1::2].
func (m *mxfp4Source) half(parity int) (*mxfp4Source, error) {
	if m.split || len(m.lay.Prefix) != 2 || m.lay.Prefix[1]%2 != 0 {
		return nil, fmt.Errorf("stored blocks %v: the gate/up split needs [experts, an even number of rows, groups, 16]", m.blocks.Shape)
	}
	h := *m
	h.lay = quant.MXFP4Layout{Prefix: []int{m.lay.Prefix[0], m.lay.Prefix[1] / 2}, Groups: m.lay.Groups}
	h.split, h.parity = true, parity
	return &h, nil
}

// ggufMXFP4Source returns the stored blocks of t when t is a gpt-oss
// MXFP4 weight read whole (not a slice or view of one), else nil.
func ggufMXFP4Source(t *statedict.Tensor) *mxfp4Source {
	if t.QuantStored == nil || t.QuantStored.Method != "mxfp4" || !t.IsContiguous() || t.Offset != 0 {
		return nil
	}
	stored := t.QuantStored.StoredTensors() // the blocks, then the scales
	if len(stored) != 2 || len(t.QuantStored.Companions) != 1 {
		return nil
	}
	codes, comps := stored[0], stored[1:]
	ct := func(s *statedict.Tensor) quant.CodecTensor {
		return quant.CodecTensor{Name: s.Name, DType: s.DType, Shape: s.Shape}
	}
	lay, err := quant.CheckMXFP4(ct(codes), ct(comps[0]))
	if err != nil {
		return nil
	}
	if shape, ok := lay.TransformersShape(); !ok || !slices.Equal(shape, t.Shape) {
		return nil
	}
	return &mxfp4Source{blocks: codes, scales: comps[0], lay: lay}
}

// mxfp4OutType is the type an MXFP4 weight is written as, and why it is
// not WithGGUFType's (want, when set).
func mxfp4OutType(set bool, want ggml.Type) (ggml.Type, string) {
	switch {
	case !set || want == ggml.MXFP4:
		return ggml.MXFP4, ""
	case want.Quantized():
		return ggml.MXFP4, "MXFP4 blocks copied as stored, as llama.cpp's converter keeps them"
	default:
		return want, ""
	}
}

// mxfp4ChunkGroups is about how many 32-element groups one step reads
// (whole rows: at least one).
const mxfp4ChunkGroups = 1 << 16

// writeGGUFMXFP4 writes an MXFP4 weight from its stored blocks: copied
// into ggml's MXFP4 blocks, or decoded to float32 rows and written as
// p.typ by ggml's rules.
func (c *config) writeGGUFMXFP4(ctx context.Context, gw *gguf.Writer, it *item, p ggufPlan) (int64, error) {
	mx := p.mx
	br, err := mx.blocks.Open()
	if err != nil {
		return 0, &TensorError{Name: it.name, Err: err}
	}
	defer br.Close()
	sr, err := mx.scales.Open()
	if err != nil {
		return 0, &TensorError{Name: it.name, Err: err}
	}
	defer sr.Close()
	r := &mxfp4Reader{ctx: ctx, c: c, mx: mx, blocks: br, scales: sr, rowsLeft: int64(mx.lay.Rows()),
		native: p.typ == ggml.MXFP4, logical: int64(it.src.DType.Size())}
	n := int64(mx.lay.Rows()) * int64(mx.lay.Cols())
	if r.native {
		if err := gw.WriteTensor(r); err != nil {
			return 0, &TensorError{Name: it.name, Err: err}
		}
		return ggml.MXFP4.RowBytes(n)
	}
	return ggufQuantizeStream(gw, it.name, r, n, int64(mx.lay.Cols()), p.typ)
}

// mxfp4Reader streams an MXFP4 weight's stored rows, whole rows at a
// time: as ggml block_mxfp4 bytes (native) or as little-endian float32
// values (quant.MXFP4Layout.DequantRows).
type mxfp4Reader struct {
	ctx            context.Context
	c              *config
	mx             *mxfp4Source
	blocks, scales io.Reader
	rowsLeft       int64
	row            int64 // rows done
	native         bool
	logical        int64 // bytes of one logical element, for progress

	bbuf, sbuf, out []byte
	fs              []float32
	pending         []byte
}

func (r *mxfp4Reader) Read(p []byte) (int, error) {
	if len(r.pending) == 0 {
		if r.rowsLeft == 0 {
			return 0, io.EOF
		}
		if err := r.ctx.Err(); err != nil {
			return 0, err
		}
		if err := r.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// next reads and converts the next chunk of whole rows.
func (r *mxfp4Reader) next() error {
	g := int64(r.mx.lay.Groups)
	rows := min(r.rowsLeft, max(1, mxfp4ChunkGroups/g))
	ng := rows * g
	in := ng // groups read: both halves' rows for a split
	if r.mx.split {
		in *= 2
	}
	r.bbuf = growBytes(r.bbuf, 16*in)
	r.sbuf = growBytes(r.sbuf, in)
	for _, x := range []struct {
		rd  io.Reader
		buf []byte
		t   *statedict.Tensor
	}{{r.blocks, r.bbuf, r.mx.blocks}, {r.scales, r.sbuf, r.mx.scales}} {
		if _, err := io.ReadFull(x.rd, x.buf); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("%s: %w", x.t.Name, err)
		}
	}
	if r.mx.split {
		// Keep the rows of one parity: stored row 2k+parity becomes k.
		for k := range rows {
			from := 2*k + int64(r.mx.parity)
			copy(r.bbuf[16*g*k:16*g*(k+1)], r.bbuf[16*g*from:16*g*(from+1)])
			copy(r.sbuf[g*k:g*(k+1)], r.sbuf[g*from:g*(from+1)])
		}
		r.bbuf, r.sbuf = r.bbuf[:16*ng], r.sbuf[:ng]
	}
	if r.native {
		if i := int64(slices.Index(r.sbuf, 0xff)); i >= 0 {
			group := r.row*g + i // in the stored tensor's numbering
			if r.mx.split {
				group = (2*(r.row+i/g)+int64(r.mx.parity))*g + i%g
			}
			return fmt.Errorf("%s: exponent 0xff (E8M0 NaN) in group %d: ggml reads it as 2^127 where transformers reads Inf/NaN, and ggml's validation refuses it (--gguf-type f32 writes the values ckpt reads)",
				r.mx.scales.Name, group)
		}
		r.out = growBytes(r.out, quant.MXFP4GGMLBlockBytes*ng)
		if err := quant.MXFP4GGML(r.out, r.bbuf, r.sbuf); err != nil {
			return err
		}
		r.pending = r.out
	} else {
		if int64(cap(r.fs)) < 32*ng {
			r.fs = make([]float32, 32*ng)
		}
		fs := r.fs[:32*ng]
		sub := quant.MXFP4Layout{Prefix: []int{int(rows)}, Groups: int(g)}
		if err := sub.DequantRows(fs, r.bbuf, r.sbuf, 0, int(rows)); err != nil {
			return err
		}
		r.out = growBytes(r.out, 4*32*ng)
		for i, f := range fs {
			binary.LittleEndian.PutUint32(r.out[4*i:], math.Float32bits(f))
		}
		r.pending = r.out
	}
	r.rowsLeft -= rows
	r.row += rows
	r.c.progressAdd(32 * ng * r.logical)
	return nil
}
