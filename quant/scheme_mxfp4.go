package quant

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ckpt-dev/ckpt/dtype"
)

// gpt-oss MXFP4 (mxfp4.go has the codec): quantization_config
// {quant_method: "mxfp4", modules_to_not_convert: [...]}; each expert
// weight X is stored as X_blocks U8 [E, R, G, 16] and X_scales U8 [E, R, G]
// and reads as the BF16 model's X [E, G*32, R], the transpose transformers'
// integrations/mxfp4.py (convert_moe_packed_tensors) applies. Without a
// config, a U8 X_blocks beside X_scales is read the same way: the pair is
// named as only gpt-oss names it. modules_to_not_convert needs nothing
// here: those modules are stored unquantized.

func init() { Register("mxfp4", parseMXFP4) }

type mxfp4Layout struct{ cfg Config }

func parseMXFP4(cfg Config) (Layout, error) {
	var q struct {
		ModulesToNotConvert []string `json:"modules_to_not_convert"`
	}
	if err := json.Unmarshal(cfg.Raw, &q); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return mxfp4Layout{cfg}, nil
}

func (l mxfp4Layout) Plan(tensors []Stored) ([]*Group, error) {
	byName := indexStored(tensors)
	var groups []*Group
	for _, t := range tensors {
		base, ok := strings.CutSuffix(t.Name, "_blocks")
		if !ok {
			continue
		}
		sc, ok := byName[base+"_scales"]
		if !ok {
			return nil, &Error{Scheme: "mxfp4", Tensor: t.Name, Err: fmt.Errorf("%w: %s without %s_scales", ErrMissingCompanion, lastPart(t.Name), lastPart(base))}
		}
		g, err := mxfp4Group(base, t, sc, l.cfg)
		if err != nil {
			return nil, err
		}
		groups = append(groups, g)
	}
	return groups, nil
}

// mxfp4Group reads X_blocks and X_scales as the BF16 model's X.
func mxfp4Group(base string, blocks, scales Stored, cfg Config) (*Group, error) {
	lay, err := CheckMXFP4(codecTensor(blocks), codecTensor(scales))
	if err != nil {
		return nil, codecError("mxfp4", blocks.Name, err)
	}
	shape, ok := lay.TransformersShape()
	if !ok {
		return nil, &Error{Scheme: "mxfp4", Tensor: blocks.Name, Err: fmt.Errorf("%w: shape %s: gpt-oss experts are [experts, rows, groups, 16]", ErrUnknownLayout, shapeText(blocks.Shape))}
	}
	c := newMXFP4Codec(lay, shape[0], shape[1], shape[2], nil)
	return &Group{Name: base, DType: cfg.DType, Shape: shape, Weight: blocks, Companions: []Stored{scales}, Codec: c,
		Scheme: fmt.Sprintf("mxfp4 (gpt-oss), e2m1 in groups of 32, e8m0 scales in %s_scales, transposed as transformers", lastPart(base))}, nil
}

// newMXFP4Codec is the codec of a gpt-oss MXFP4 weight of e experts
// read as [e, h, r] (lay: its stored layout). cols, when not nil, are
// the scales of each expert transposed to [groups, r] (mxfp4Cols512),
// which the AVX-512 path then reads instead of making a range's columns
// on every call; the codec keeps them.
func newMXFP4Codec(lay MXFP4Layout, e, h, r int64, cols []byte) *rowsCodec {
	expert := r * int64(lay.Groups) * 16 // stored bytes of one expert
	sg := r * int64(lay.Groups)          // scale bytes of one expert
	c := &rowsCodec{rows: e * h, cols: r, codeBytes: e * expert,
		// Logical rows of expert x read all of x's stored rows.
		rowSpan: func(r0, r1 int64) (int64, int64) { return r0 / h * expert, (r1 + h - 1) / h * expert },
		dec: func(dst []float32, codes []byte, comps [][]byte, r0, r1 int) error {
			x0, x1 := r0/int(h), (r1+int(h)-1)/int(h)
			sub := MXFP4Layout{Prefix: []int{x1 - x0, int(r)}, Groups: lay.Groups}
			if len(comps) < 1 || int64(len(comps[0])) != e*sg {
				return fmt.Errorf("%w: scales", ErrCodecBuffer)
			}
			return sub.DequantTransposedRows(dst, codes, comps[0][int64(x0)*sg:int64(x1)*sg], r0-x0*int(h), r1-x0*int(h))
		}}
	c.align, c.unit = 32*r, h*r
	c.enc = func(dt dtype.DType, dst, codes []byte, comps [][]byte, first, n int64) (bool, error) {
		tab := mxfp4Table(dt)
		if tab == nil {
			return false, nil
		}
		r0, r1 := c.rowRange(first, n)
		x0, x1 := r0/h, (r1+h-1)/h
		if len(comps) < 1 || int64(len(comps[0])) != e*sg || int64(len(codes)) != (x1-x0)*expert || int64(len(dst)) != 2*n {
			return true, fmt.Errorf("%w: codes, scales or output of %d elements", ErrCodecBuffer, n)
		}
		sub := MXFP4Layout{Prefix: []int{int(x1 - x0), int(r)}, Groups: lay.Groups}
		var subCols []byte
		if cols != nil {
			subCols = cols[x0*sg : x1*sg]
		}
		sub.encodeTransposed(dst, tab, codes, comps[0][x0*sg:x1*sg], subCols, int(first-x0*h*r), int(n))
		return true, nil
	}
	// A span of whole experts is a weight of its own: its codec reads the
	// span's scales as whole scales, their columns made once (SubCodec).
	c.sub = func(first, n int64) Span {
		r0, r1 := c.rowRange(first, n)
		x0, x1 := r0/h, (r1+h-1)/h
		sl := MXFP4Layout{Prefix: []int{int(x1 - x0), int(r)}, Groups: lay.Groups}
		mk := func(cols []byte) Codec { return newMXFP4Codec(sl, x1-x0, h, r, cols) }
		prep := func(comps [][]byte, buf []byte) (Codec, []byte) {
			if !haveMXFP4Vec512 || len(comps) < 1 || int64(len(comps[0])) != (x1-x0)*sg {
				return mk(nil), buf
			}
			buf = growByte(buf, len(comps[0]))
			sl.scaleColumns(buf, comps[0])
			return mk(buf), buf
		}
		return Span{Codec: mk(nil), Shift: x0 * h * r, Len: (x1 - x0) * h * r, CompRanges: [][2]int64{{x0 * sg, x1 * sg}}, prepare: prep}
	}
	return c
}

// codecTensor is a Stored as a codec's layout check takes it.
func codecTensor(s Stored) CodecTensor {
	return CodecTensor{Name: s.Name, DType: s.DType, Shape: s.Shape}
}

// codecTensorName is the tensor a *CodecLayoutError names, else def.
func codecTensorName(err error, def string) string {
	if e, ok := err.(*CodecLayoutError); ok && e.Tensor != "" {
		return e.Tensor
	}
	return def
}

// reason is a *CodecLayoutError's reason alone (the scheme and the
// tensor go into the *Error around it), else the error's text.
func reason(err error) string {
	if e, ok := err.(*CodecLayoutError); ok {
		return e.Reason
	}
	return err.Error()
}

// codecError wraps a layout check's error as detection's *Error.
func codecError(scheme, tensor string, err error) error {
	return &Error{Scheme: scheme, Tensor: codecTensorName(err, tensor), Err: fmt.Errorf("%w: %v", ErrCompanionShape, reason(err))}
}
