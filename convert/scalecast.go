package convert

import (
	"errors"
	"fmt"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/statedict"
)

// ErrScaleCast: WithDType would cast element-wise a tensor of a dtype
// that only means something inside a quantization scheme (float8_e8m0fnu
// exponents, float4_e2m1fn_x2 codes) and that no scheme consumed.
var ErrScaleCast = errors.New("convert: a quantization scheme's scale or code dtype is not cast element-wise")

// checkScaleCast refuses, under WithDType, a float8_e8m0fnu or
// float4_e2m1fn_x2 tensor left in the checkpoint: a scheme ckpt reads
// (gpt-oss MXFP4, say) consumes them; one left over belongs to a layout
// ckpt does not know, and a cast of its codes would be wrong values.
// Without WithDType they are written as stored.
func checkScaleCast(t *statedict.Tensor, c *config) error {
	if c.dtype == dtype.Invalid || !c.selected(t.Name) {
		return nil
	}
	switch t.DType {
	case dtype.Float8E8M0FNU, dtype.Float4E2M1FNx2, dtype.Float6E2M3FNx4, dtype.Float6E3M2FNx4:
		return &TensorError{Name: t.Name, Err: fmt.Errorf("%w: %s to %s (no quantization scheme consumed it; convert without --dtype keeps it as stored, or give the model's config.json with --config)", ErrScaleCast, t.DType, c.dtype)}
	}
	return nil
}
