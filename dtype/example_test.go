package dtype_test

import (
	"fmt"

	"github.com/ckpt-dev/ckpt/dtype"
)

func Example() {
	d, _ := dtype.Parse("torch.bfloat16")
	code, _ := d.Safetensors()
	fmt.Println(d, d.Size(), code)

	// 1.5 as half precision and back.
	h := dtype.F32ToF16(1.5)
	fmt.Printf("%#04x %g\n", h, dtype.F16ToF32(h))

	// An e4m3fn byte decoded the way torch defines it.
	fmt.Println(dtype.Float8ToFloat64(dtype.Float8E4M3FN, 0x38))
	// Output:
	// bfloat16 2 BF16
	// 0x3e00 1.5
	// 1
}
