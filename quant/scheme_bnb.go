package quant

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ckpt-dev/ckpt/dtype"
)

// bitsandbytes as transformers saves it (bnb.go has the codecs):
// quantization_config {quant_method: "bitsandbytes", load_in_4bit,
// bnb_4bit_quant_type, bnb_4bit_use_double_quant, load_in_8bit}.
//
//   - 4-bit: M.weight U8 packed, M.weight.absmax, M.weight.quant_map,
//     M.weight.quant_state.bitsandbytes__nf4 (or __fp4: JSON with the
//     logical shape and block size), nested: M.weight.nested_absmax and
//     M.weight.nested_quant_map. The quant_state says everything, so these
//     names are read without a config too.
//   - LLM.int8: M.weight I8 and M.SCB (M.weight_format, when saved, is
//     consumed).

func init() { Register("bitsandbytes", parseBnB) }

type bnbLayout struct{ cfg Config }

func parseBnB(cfg Config) (Layout, error) {
	var q map[string]any
	if err := json.Unmarshal(cfg.Raw, &q); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return bnbLayout{cfg}, nil
}

const bnbStatePrefix = ".quant_state.bitsandbytes__"

func (l bnbLayout) Plan(tensors []Stored) ([]*Group, error) {
	byName := indexStored(tensors)
	var groups []*Group
	for _, t := range tensors {
		if i := strings.Index(t.Name, bnbStatePrefix); i >= 0 {
			g, err := bnb4Group(t.Name[:i], t, byName, l.cfg)
			if err != nil {
				return nil, err
			}
			groups = append(groups, g)
			continue
		}
		if prefix, ok := strings.CutSuffix(t.Name, "SCB"); ok && (prefix == "" || strings.HasSuffix(prefix, ".")) {
			g, err := int8Group(prefix, t, byName, l.cfg)
			if err != nil {
				return nil, err
			}
			groups = append(groups, g)
		}
	}
	return groups, nil
}

func bnb4Group(wname string, state Stored, byName map[string]Stored, cfg Config) (*Group, error) {
	const scheme = "bitsandbytes 4-bit"
	w, ok := byName[wname]
	if !ok {
		return nil, &Error{Scheme: scheme, Tensor: state.Name, Err: fmt.Errorf("%w: quant_state without its weight %s", ErrMissingCompanion, wname)}
	}
	if state.Read == nil || state.DType != dtype.Uint8 {
		return nil, &Error{Scheme: scheme, Tensor: state.Name, Err: fmt.Errorf("%w: quant_state is %s, want uint8 JSON", ErrCompanionShape, state.DType)}
	}
	b, err := state.Read()
	if err != nil {
		return nil, &Error{Scheme: scheme, Tensor: state.Name, Err: err}
	}
	st, err := ParseBnB4State(state.Name, b)
	if err != nil {
		return nil, &Error{Scheme: scheme, Tensor: state.Name, Err: fmt.Errorf("%w: %v", ErrCompanionShape, reason(err))}
	}
	absmax, ok := byName[wname+".absmax"]
	if !ok {
		return nil, &Error{Scheme: scheme, Tensor: wname, Err: fmt.Errorf("%w: no %s.absmax", ErrMissingCompanion, lastPart(wname))}
	}
	comps := []Stored{absmax}
	var na, nm *CodecTensor
	nabs, ok1 := byName[wname+".nested_absmax"]
	nmap, ok2 := byName[wname+".nested_quant_map"]
	if ok1 || ok2 {
		a, m := codecTensor(nabs), codecTensor(nmap)
		if !ok1 {
			a.Name = wname + ".nested_absmax (missing)"
		}
		if !ok2 {
			m.Name = wname + ".nested_quant_map (missing)"
		}
		na, nm = &a, &m
		comps = append(comps, nabs, nmap)
	}
	lay, err := CheckBnB4(st, codecTensor(w), codecTensor(absmax), na, nm)
	if err != nil {
		return nil, codecError(scheme, w.Name, err)
	}
	if lay.Nested && (!ok1 || !ok2) {
		return nil, &Error{Scheme: scheme, Tensor: wname, Err: fmt.Errorf("%w: nested absmax needs nested_absmax and nested_quant_map", ErrMissingCompanion)}
	}
	c := &rowsCodec{rows: int64(lay.Rows()), cols: int64(lay.Cols()), codeBytes: int64(codecCeilDiv(lay.Elems, 2)),
		dec: func(dst []float32, codes []byte, cs [][]byte, r0, r1 int) error {
			var a, m []byte
			if len(cs) > 2 {
				a, m = cs[1], cs[2]
			}
			return lay.DequantRows(dst, codes, cs[0], a, m, r0, r1)
		}}
	consumed := []string{state.Name}
	if _, ok := byName[wname+".quant_map"]; ok {
		consumed = append(consumed, wname+".quant_map")
	}
	desc := fmt.Sprintf("bitsandbytes %s, blocks of %d, absmax in %s.absmax", st.QuantType, st.Blocksize, lastPart(wname))
	if lay.Nested {
		desc += fmt.Sprintf(" (nested, blocks of %d)", st.NestedBlocksize)
	}
	return &Group{Name: wname, DType: cfg.DType, Shape: st.Shape, Weight: w, Companions: comps, Consumed: consumed, Codec: c, Scheme: desc}, nil
}

func int8Group(prefix string, scb Stored, byName map[string]Stored, cfg Config) (*Group, error) {
	const scheme = "bitsandbytes int8"
	w, ok := byName[prefix+"weight"]
	if !ok {
		return nil, &Error{Scheme: scheme, Tensor: scb.Name, Err: fmt.Errorf("%w: SCB without %sweight", ErrMissingCompanion, prefix)}
	}
	lay, err := CheckInt8(codecTensor(w), codecTensor(scb))
	if err != nil {
		return nil, codecError(scheme, w.Name, err)
	}
	c := &rowsCodec{rows: int64(lay.Rows), cols: int64(lay.Cols), codeBytes: int64(lay.Rows) * int64(lay.Cols), rowSpan: rowBytes(int64(lay.Cols)),
		dec: func(dst []float32, codes []byte, cs [][]byte, r0, r1 int) error {
			if len(cs[0]) != 4*lay.Rows {
				return fmt.Errorf("%w: SCB", ErrCodecBuffer)
			}
			return Int8Layout{Rows: r1 - r0, Cols: lay.Cols}.DequantRows(dst, codes, cs[0][4*r0:4*r1], 0, r1-r0)
		}}
	g := &Group{Name: w.Name, DType: cfg.DType, Shape: w.Shape, Weight: w, Companions: []Stored{scb}, Codec: c,
		Scheme: "bitsandbytes LLM.int8, row scales in SCB"}
	if _, ok := byName[prefix+"weight_format"]; ok {
		g.Consumed = append(g.Consumed, prefix+"weight_format")
	}
	return g, nil
}
