package pickle

import "github.com/nlpodyssey/gopickle/types"

// sparseComponents names the component tensors of each sparse layout, in
// the order torch pickles them.
var sparseComponents = map[string][]string{
	"sparse_coo": {"indices", "values"},
	"sparse_csr": {"crow_indices", "col_indices", "values"},
	"sparse_bsr": {"crow_indices", "col_indices", "values"},
	"sparse_csc": {"ccol_indices", "row_indices", "values"},
	"sparse_bsc": {"ccol_indices", "row_indices", "values"},
}

// rebuildSparse is _rebuild_sparse_tensor(layout, data) (and torch 1.x's
// _rebuild_sparse_csr_tensor). data is (indices, values, size[, is_coalesced])
// for COO and (compressed_indices, plain_indices, values, size) otherwise.
// is_coalesced (torch >= 2.1) may be None.
func rebuildSparse(rt *hookEnv, args []any) (any, error) {
	if err := arity("_rebuild_sparse_tensor", args, 2); err != nil {
		return nil, err
	}
	layout, err := torchGlobalArg("layout", args[0], isLayout)
	if err != nil {
		return nil, err
	}
	names, ok := sparseComponents[layout]
	if !ok {
		return nil, malformed("cannot rebuild a sparse tensor with layout %s", layout)
	}
	data, ok := seq(args[1])
	want := len(names) + 1
	if !ok || !(len(data) == want || (layout == "sparse_coo" && len(data) == want+1)) {
		return nil, malformed("%s data is not a %d-tuple", layout, want)
	}
	t := &Tensor{Rebuild: "_rebuild_sparse_tensor", Layout: layout}
	for i, n := range names {
		c, err := asTensor(n, data[i])
		if err != nil {
			return nil, err
		}
		t.Components = append(t.Components, NamedTensor{n, c})
	}
	t.DType = t.Components[len(names)-1].Tensor.DType
	if t.Shape, err = dims(rt, "size", data[len(names)]); err != nil {
		return nil, err
	}
	if len(data) == want+1 && data[want] != nil {
		if t.Coalesced, ok = asBool(data[want]); !ok {
			return nil, malformed("sparse_coo is_coalesced is %T, not a bool", data[want])
		}
	}
	return &pyTensor{t: t}, nil
}

// rebuildNested is _rebuild_nested_tensor(buffer, sizes, strides, storage_offsets).
func rebuildNested(_ *hookEnv, args []any) (any, error) {
	if err := arity("_rebuild_nested_tensor", args, 4); err != nil {
		return nil, err
	}
	t := &Tensor{Rebuild: "_rebuild_nested_tensor", Layout: "nested"}
	for i, n := range []string{"buffer", "sizes", "strides", "storage_offsets"} {
		c, err := asTensor(n, args[i])
		if err != nil {
			return nil, err
		}
		t.Components = append(t.Components, NamedTensor{n, c})
	}
	t.DType = t.Components[0].Tensor.DType
	return &pyTensor{t: t}, nil
}

// rebuildNJT is torch.nested._internal.nested_tensor._rebuild_njt(kwargs),
// a jagged nested tensor (torch.jagged layout, torch >= 2.1): kwargs holds
// values, offsets, lengths (or None), _ragged_idx, _metadata_cache and
// requires_grad. Its components are values, offsets and lengths (when
// saved); the cached min/max sequence lengths are left out.
func rebuildNJT(_ *hookEnv, args []any) (any, error) {
	if err := arity("_rebuild_njt", args, 1); err != nil {
		return nil, err
	}
	kw, ok := args[0].(*types.Dict)
	if !ok {
		return nil, malformed("_rebuild_njt argument is %T, not a dict", args[0])
	}
	t := &Tensor{Rebuild: "_rebuild_njt", Layout: "jagged"}
	for _, n := range []string{"values", "offsets", "lengths"} {
		v, _ := kw.Get(n)
		if v == nil && n == "lengths" {
			continue
		}
		c, err := asTensor(n, v)
		if err != nil {
			return nil, err
		}
		t.Components = append(t.Components, NamedTensor{n, c})
	}
	t.DType = t.Components[0].Tensor.DType
	if rg, ok := kw.Get("requires_grad"); ok {
		var err error
		if t.RequiresGrad, err = requiresGrad(rg); err != nil {
			return nil, err
		}
	}
	return &pyTensor{t: t}, nil
}
