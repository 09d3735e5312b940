package quant

import (
	"encoding/json"
	"fmt"
	"strings"
)

// MLX affine quantization as mlx-lm saves it (mlx.go has the codec):
// config.json {quantization: {group_size, bits, "MODULE": {group_size,
// bits} | false}} (mlx-lm writes a per-module entry where a module's
// quantization differs from the default, false where it is not
// quantized); M.weight U32 with M.scales and M.biases reads as M.weight.

func init() { Register("mlx", parseMLX) }

type mlxParams struct {
	GroupSize int `json:"group_size"`
	Bits      int `json:"bits"`
}

type mlxLayout struct {
	def       mlxParams
	overrides map[string]json.RawMessage
	cfg       Config
}

func parseMLX(cfg Config) (Layout, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(cfg.Raw, &all); err != nil {
		return nil, fmt.Errorf("%w: quantization: %v", ErrConfig, err)
	}
	var def mlxParams
	if err := json.Unmarshal(cfg.Raw, &def); err != nil {
		return nil, fmt.Errorf("%w: quantization: %v", ErrConfig, err)
	}
	l := &mlxLayout{def: def, overrides: map[string]json.RawMessage{}, cfg: cfg}
	for k, v := range all {
		if k != "group_size" && k != "bits" && k != "mode" && k != "quant_method" {
			l.overrides[k] = v
		}
	}
	return l, nil
}

// params are the bits and group size of module m (its per-module entry,
// else the default); ok is false where the entry says false.
func (l *mlxLayout) params(m string) (mlxParams, bool, error) {
	raw, found := l.overrides[m]
	if !found {
		return l.def, true, nil
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return l.def, b, nil
	}
	p := l.def
	if err := json.Unmarshal(raw, &p); err != nil {
		return p, false, fmt.Errorf("%w: quantization entry %q: %v", ErrConfig, m, err)
	}
	return p, true, nil
}

func (l *mlxLayout) Plan(tensors []Stored) ([]*Group, error) {
	byName := indexStored(tensors)
	var groups []*Group
	for _, t := range tensors {
		prefix, ok := strings.CutSuffix(t.Name, "scales")
		if !ok || prefix != "" && !strings.HasSuffix(prefix, ".") {
			continue
		}
		w, ok1 := byName[prefix+"weight"]
		b, ok2 := byName[prefix+"biases"]
		if !ok1 || !ok2 {
			return nil, &Error{Scheme: "mlx", Tensor: t.Name, Err: fmt.Errorf("%w: scales need %sweight and %sbiases beside them", ErrMissingCompanion, prefix, prefix)}
		}
		p, on, err := l.params(strings.TrimSuffix(prefix, "."))
		if err != nil {
			return nil, err
		}
		if !on {
			return nil, &Error{Scheme: "mlx", Tensor: w.Name, Err: fmt.Errorf("%w: scales stored for a module the config says is not quantized", ErrUnknownLayout)}
		}
		lay, err := CheckMLX(codecTensor(w), codecTensor(t), codecTensor(b), p.Bits, p.GroupSize)
		if err != nil {
			return nil, codecError("mlx", w.Name, err)
		}
		wpr := int64(lay.Cols * lay.Bits / 32)
		ss, groupsPerRow := lay.ScaleDType.Size(), lay.Cols/lay.GroupSize
		c := &rowsCodec{rows: int64(lay.Rows()), cols: int64(lay.Cols), codeBytes: int64(lay.Rows()) * wpr * 4, rowSpan: rowBytes(wpr * 4),
			dec: func(dst []float32, codes []byte, cs [][]byte, r0, r1 int) error {
				n := groupsPerRow * ss
				if len(cs) < 2 || len(cs[0]) != lay.Rows()*n || len(cs[1]) != lay.Rows()*n {
					return fmt.Errorf("%w: scales", ErrCodecBuffer)
				}
				sub := lay
				sub.Prefix = []int{r1 - r0}
				return sub.DequantRows(dst, codes, cs[0][r0*n:r1*n], cs[1][r0*n:r1*n], 0, r1-r0)
			}}
		groups = append(groups, &Group{Name: w.Name, DType: l.cfg.DType, Shape: lay.Shape(), Weight: w, Companions: []Stored{t, b}, Codec: c,
			Scheme: fmt.Sprintf("mlx affine int%d, groups of %d, scales and biases", p.Bits, p.GroupSize)})
	}
	return groups, nil
}
