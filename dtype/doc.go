// Package dtype is the one home of tensor element types: the table of
// dtypes torch can save (names, sizes, typed-storage classes, safetensors
// codes) and the element codecs every other package uses (half and
// bfloat16 both ways, float8 decoding, the float32 slice codecs behind
// convert's casts and verify's comparisons).
//
// It sits at the bottom of ckpt's layering and imports no other ckpt
// package: format packages (torchzip, dcp, safetensors, gguf), the model
// (statedict) and the tools above it all import it.
package dtype
