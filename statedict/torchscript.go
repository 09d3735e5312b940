package statedict

import (
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/torchzip"
)

// A TorchScript archive (torch.jit.save) pickles each module as an object
// of its compiled class, whose state is every attribute: parameters,
// buffers, submodules and plain attributes alike. ScriptModule.state_dict()
// has the parameters and buffers only. The class declarations in
// code/__torch__/**.py say which are which:
//
//	class M(Module):
//	  __parameters__ = ["weight", "bias", ]
//	  __buffers__ = ["steps", ]
//	  table : Tensor
//
// ckpt reads those two lines of each class (it never runs or otherwise
// parses the code) and lists a plain tensor attribute (table) as a tensor
// with Attribute set: not part of state_dict(), left out of convert's
// output unless asked for.

// scriptClass is what a TorchScript class declares as its state.
type scriptClass struct {
	params, buffers map[string]bool
}

// Bounds on the code read: a TorchScript archive's class declarations are
// small; the rest of a code file is skipped.
const (
	maxScriptFiles = 4096
	maxScriptBytes = 1 << 20 // per code file
)

// scriptSyntax is what parseScriptClasses matches a code file's lines
// with: a class declaration, a __parameters__ or __buffers__ list, and the
// quoted names in one.
type scriptSyntax struct{ classLine, listLine, listItem *regexp.Regexp }

// scriptRegexps compiles scriptSyntax on first use (a TorchScript archive),
// not at start-up.
var scriptRegexps = sync.OnceValue(func() scriptSyntax {
	return scriptSyntax{
		classLine: regexp.MustCompile(`^class\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(`),
		listLine:  regexp.MustCompile(`^\s+(__parameters__|__buffers__)\s*=\s*\[(.*)\]\s*$`),
		listItem:  regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`),
	}
})

// readScriptClasses reads the class declarations of a TorchScript
// archive's code/__torch__ files, by qualified class name
// ("__torch__.M", "__torch__.torch.nn.modules.linear.Linear"). Files it
// cannot read are skipped: the tensors are then listed as before.
func readScriptClasses(zr *torchzip.Reader) map[string]*scriptClass {
	out := map[string]*scriptClass{}
	n := 0
	for _, name := range zr.Keys() {
		rest, ok := strings.CutPrefix(name, "code/")
		if !ok || !strings.HasSuffix(rest, ".py") || !strings.HasPrefix(rest, "__torch__") {
			continue
		}
		if n++; n > maxScriptFiles {
			break
		}
		rec, _ := zr.Record(name)
		b, err := rec.ReadAll(maxScriptBytes)
		if err != nil {
			continue
		}
		module := strings.ReplaceAll(strings.TrimSuffix(rest, ".py"), "/", ".")
		parseScriptClasses(string(b), module, out)
	}
	return out
}

// parseScriptClasses adds the classes of one code file of module module.
func parseScriptClasses(code, module string, out map[string]*scriptClass) {
	var cur *scriptClass
	re := scriptRegexps()
	for _, line := range strings.Split(code, "\n") {
		if m := re.classLine.FindStringSubmatch(line); m != nil {
			cur = &scriptClass{params: map[string]bool{}, buffers: map[string]bool{}}
			out[module+"."+m[1]] = cur
			continue
		}
		if cur == nil {
			continue
		}
		if m := re.listLine.FindStringSubmatch(line); m != nil {
			set := cur.params
			if m[1] == "__buffers__" {
				set = cur.buffers
			}
			for _, it := range re.listItem.FindAllStringSubmatch(m[2], -1) {
				if s, err := strconv.Unquote(`"` + it[1] + `"`); err == nil {
					set[s] = true
				}
			}
		}
	}
}

// walkScriptModule visits a TorchScript module object: its parameters and
// buffers as state_dict() lists them, its submodules, and its plain tensor
// attributes as tensors with Attribute set. Other attributes are part of
// the foreign object.
func (b *builder) walkScriptModule(f *pickle.Foreign, cls *scriptClass, state *pickle.Dict, name string) error {
	if b.enter(f) {
		return nil
	}
	defer delete(b.onPath, f)
	for _, e := range state.Entries {
		k := pickle.KeyName(e.Key)
		if v, ok := e.Value.(*pickle.Tensor); ok {
			from := len(b.ck.Tensors)
			if err := b.addTensor(v, join(name, k)); err != nil {
				return err
			}
			if !cls.params[k] && !cls.buffers[k] {
				for _, t := range b.ck.Tensors[from:] {
					t.Attribute = true
				}
			}
			continue
		}
		if f, ok := e.Value.(*pickle.Foreign); ok && b.script[f.Module+"."+f.Name] != nil {
			if err := b.walk(f, join(name, k), true); err != nil { // a submodule
				return err
			}
			continue
		}
		// Containers of tensors (List[Tensor], Dict[str, Tensor]) are
		// attributes; torch.jit._pickle.build_tensorlist([...]) and its
		// kin stand for the list itself.
		val := e.Value
		if f, ok := val.(*pickle.Foreign); ok && f.Module == "torch.jit._pickle" && len(f.Args) == 1 {
			val = f.Args[0]
		}
		from := len(b.ck.Tensors)
		if err := b.walk(val, join(name, k), true); err != nil {
			return err
		}
		for _, t := range b.ck.Tensors[from:] {
			t.Attribute = true
		}
	}
	return nil
}
