// Test-only module: GGUF files written by ckpt, read back by readers
// nobody here wrote (ollama's fs/ggml; @huggingface/gguf through js/).
// Kept out of the main module so that ollama stays out of its go.mod.
module github.com/ckpt-dev/ckpt/internal/ggufcheck

go 1.26.8

require (
	github.com/ckpt-dev/ckpt v0.0.0
	github.com/ollama/ollama v0.17.4
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/nlpodyssey/gopickle v0.3.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)

replace github.com/ckpt-dev/ckpt => ../..
