package main

import (
	"fmt"
	"io"
)

// storedFlag is a dequantized weight's flag: its stored dtype and shape.
func storedFlag(t inspectTensor) []string {
	if t.Stored == nil {
		return nil
	}
	return []string{fmt.Sprintf("stored %s %s", t.Stored.DTypeName, shapeString(t.Stored.Shape))}
}

// printQuantization writes the schemes of a quantized release read
// dequantized, one line each.
func printQuantization(w io.Writer, rep *inspectReport) {
	q := rep.Quantization
	if q == nil {
		return
	}
	for i, s := range q.Schemes {
		label := "           "
		if i == 0 {
			label = "Quantized: "
		}
		fmt.Fprintf(w, "%s%s: %d weights, read as %s\n", label, clean(s.Scheme), s.Tensors, q.DType)
	}
	if q.Config != "" {
		fmt.Fprintf(w, "           (quant_method %s, from %s)\n", clean(q.Method), clean(q.Config))
	}
}
