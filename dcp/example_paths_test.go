package dcp_test

import (
	"fmt"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/pickle"
)

// ExampleFlatten lists the fqns and planner paths torch's default save
// planner gives a nested state dict: int keys become strings, a list of
// tensors is walked by index, a tuple is one leaf.
func ExampleFlatten() {
	t := &pickle.Tensor{DType: "float32"}
	layers := pickle.List{t, t}
	pair := pickle.Tuple{int64(1), int64(2)}
	root := &pickle.Dict{Entries: []pickle.DictEntry{
		{Key: "model", Value: &pickle.Dict{Entries: []pickle.DictEntry{{Key: int64(0), Value: t}}}},
		{Key: "layers", Value: &layers},
		{Key: "pair", Value: &pair},
	}}
	leaves, ok := dcp.Flatten(root)
	fmt.Println(ok)
	for _, l := range leaves {
		fmt.Printf("%s %#v\n", l.Name, l.Path)
	}
	fmt.Printf("%#v\n", dcp.RenamedPath([]any{"model", "0"}, "model.0", "model.w"))
	// Output:
	// true
	// model.0 []interface {}{"model", "0"}
	// layers.0 []interface {}{"layers", 0}
	// layers.1 []interface {}{"layers", 1}
	// pair []interface {}{"pair"}
	// []interface {}{"model", "w"}
}
