// Package ggufcheck holds only tests: GGUF files written by ckpt's convert
// package are read by ollama's Go reader (github.com/ollama/ollama/fs/ggml)
// and by Hugging Face's @huggingface/gguf (js/read.mjs), and what they
// read is compared with what was written. See docs/gguf.md.
package ggufcheck
