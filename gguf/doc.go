// Package gguf reads and writes GGUF, the file format of llama.cpp, ggml
// and ollama: a header, typed metadata (general.architecture, tokenizer
// vocabularies, hyperparameters) and tensor infos, then the tensor data,
// each tensor aligned to general.alignment.
//
// Parse reads versions 1 to 3 in either byte order, eagerly for the
// metadata and tensor infos and never for tensor data (as archive/zip
// reads a central directory), and trusts no count, length or offset of the
// file: each is checked against the bytes left and against Limits before
// anything is allocated. Writer writes version 3, little-endian, in one
// pass. Tensor sizes are ggml's order (TensorInfo.Dims, fastest-varying
// first); TensorInfo.Shape gives PyTorch's order. The numeric codecs of
// the ggml types (dequantization, quantization) are package ggml's.
//
// statedict reads GGUF files through this package; convert writes them.
package gguf
