package statedict

import (
	"strconv"
	"strings"

	"github.com/ckpt-dev/ckpt/dtype"
)

// View identifies what a tensor's values are, whatever its name: the same
// storage, dtype, layout, offset, shape, strides and quantizer give the
// same values. A pickle can name one view many times (tied weights, or a
// few hundred bytes that reference one tensor from every path of a shared
// tree), so work on values (statistics, comparisons) is done once per View.
type View struct {
	storage *Storage
	quant   *Quantization
	dtype   dtype.DType
	layout  Layout
	meta    bool
	offset  int64
	dims    string
}

// View returns t's View.
func (t *Tensor) View() View {
	var b strings.Builder
	for _, s := range t.Shape {
		b.WriteString(strconv.FormatInt(s, 10))
		b.WriteByte(',')
	}
	b.WriteByte('/')
	for _, s := range t.Strides {
		b.WriteString(strconv.FormatInt(s, 10))
		b.WriteByte(',')
	}
	return View{storage: t.Storage, quant: t.Quant, dtype: t.DType, layout: t.Layout, meta: t.Meta, offset: t.Offset, dims: b.String()}
}
