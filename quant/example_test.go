package quant_test

import (
	"fmt"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/quant"
)

// A DeepSeek-style block-FP8 weight: Detect pairs it with its
// weight_scale_inv and says the logical tensor it stands for.
func ExampleDetect() {
	config := []byte(`{"torch_dtype": "bfloat16",
		"quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}}`)
	plan, err := quant.Detect(config, []quant.Stored{
		{Name: "layers.0.q_proj.weight", DType: dtype.Float8E4M3FN, Shape: []int64{300, 200}},
		{Name: "layers.0.q_proj.weight_scale_inv", DType: dtype.Float32, Shape: []int64{3, 2}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	g := plan.Groups[0]
	fmt.Println(g.Name, g.DType, g.Shape)
	fmt.Println(g.Scheme)
	// Output:
	// layers.0.q_proj.weight bfloat16 [300 200]
	// fp8 e4m3, 128x128 blocks, scales in weight_scale_inv
}
