package main

import (
	"fmt"
	"io"

	"github.com/ckpt-dev/ckpt"
	"github.com/ckpt-dev/ckpt/internal/human"
)

// ggufArrayShown is how many elements of a metadata array the text report
// shows (a tokenizer's 150k tokens are counted, not listed; --json has all).
const ggufArrayShown = 4

// ggufFlag is a GGUF tensor's flag: its ggml type and stored size.
func ggufFlag(t inspectTensor) []string {
	if t.GGML == nil {
		return nil
	}
	return []string{fmt.Sprintf("ggml %s %s", t.GGML.Type, human.Bytes(t.GGML.NBytes))}
}

// printGGUF writes a GGUF file's metadata, every entry, arrays counted
// with their first few elements.
func printGGUF(w io.Writer, rep *inspectReport) {
	f := rep.GGUF
	if f == nil {
		return
	}
	fmt.Fprintf(w, "\nGGUF metadata (%d entries; tensor data aligned to %d bytes; shapes above in PyTorch order, GGUF dims reversed):\n", len(f.KV), f.Alignment)
	for _, kv := range f.KV {
		fmt.Fprintf(w, "  %s (%s) = %s\n", clean(kv.Key), kv.Type, clean(ckpt.FormatGGUFValue(kv.Value, ggufArrayShown)))
	}
}
