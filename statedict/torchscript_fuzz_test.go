package statedict

import (
	"strings"
	"testing"
)

// FuzzScriptClasses: the class-declaration reader of TorchScript code
// files never panics, and keeps at most one class per line and one name
// per quoted item, so its memory is bounded by its input.
func FuzzScriptClasses(f *testing.F) {
	f.Add("class M(Module):\n  __parameters__ = [\"weight\", \"bias\", ]\n  __buffers__ = [\"steps\", ]\n  table : Tensor\n")
	f.Add("class A(Module):\n  __parameters__ = []\nclass B(Module):\n  __buffers__ = [\"a\\\"b\", ]\n")
	f.Add("  __parameters__ = [\"orphan\"]\n")
	f.Fuzz(func(t *testing.T, code string) {
		out := map[string]*scriptClass{}
		parseScriptClasses(code, "__torch__", out)
		lines := strings.Count(code, "\n") + 1
		names := 0
		for _, c := range out {
			names += len(c.params) + len(c.buffers)
		}
		if len(out) > lines || names > strings.Count(code, `"`) {
			t.Fatalf("%d classes, %d names from %d lines", len(out), names, lines)
		}
	})
}
