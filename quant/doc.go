// Package quant is the home of the quantization schemes of quantized
// releases (block FP8, compressed-tensors, and the schemes that plug in
// beside them): how a scheme is detected from a model's config.json or
// from tensor-name conventions, how its layout groups each quantized
// weight with its companion tensors (scales, zero points) and checks their
// shapes, and the codecs that turn a range of stored codes back into
// float32 values.
//
// The package reads no files: callers (package statedict) hand it the
// config.json bytes and the stored tensors' names, dtypes and shapes, and
// later the bytes of one weight's codes and of its companions. A Plan
// says which stored tensors form which logical tensor (the unquantized
// model's name, dtype and shape); each Group's Codec dequantizes any range
// of its elements without expanding scales to the weight's size.
//
// A scheme plugs in as one file: a function that parses its
// quantization_config into a Layout, registered with Register under its
// quant_method (a compressed-tensors format registers with
// RegisterCompressed). A tensor that a recognized scheme quantizes is never
// left to an element-wise cast: what ckpt cannot dequantize is refused
// with an error naming the scheme and the tensor (ErrUnknownScheme,
// ErrUnknownLayout, ErrCompanionShape, ErrMissingCompanion).
package quant
