package pickle

import (
	"archive/zip"
	"io"
	"strings"
	"testing"
)

// bypasses are pickles that published reports used to get past blocklist
// scanners (picklescan, modelscan), and ways of hiding a global: every
// global named in them must be found and none may be allowed.
var bypasses = []struct {
	name    string
	pickle  string
	globals []string // module.name as found; "?" for a computed one
	verdict Verdict  // the worst verdict expected
}{
	{"torch.utils.collect_env.run", "\x80\x02ctorch.utils.collect_env\nrun\nX\x04\x00\x00\x00trueq\x00\x85R.",
		[]string{"torch.utils.collect_env.run"}, VerdictUnsafe},
	{"multiprocessing.util.spawnv_passfds", "\x80\x02cmultiprocessing.util\nspawnv_passfds\nX\x04\x00\x00\x00true]\x86R.",
		[]string{"multiprocessing.util.spawnv_passfds"}, VerdictUnsafe},
	{"runpy._run_code", "\x80\x02crunpy\n_run_code\nX\x04\x00\x00\x00pass}\x86R.", []string{"runpy._run_code"}, VerdictUnsafe},
	{"pip.main", "\x80\x02cpip\nmain\n]X\x07\x00\x00\x00install\x85R.", []string{"pip.main"}, VerdictUnsafe},
	{"builtins.getattr chain", "c__builtin__\ngetattr\n(c__builtin__\n__import__\n(S'os'\ntRS'system'\ntR(S'true'\ntR.",
		[]string{"__builtin__.getattr", "__builtin__.__import__"}, VerdictUnsafe},
	{"STACK_GLOBAL from memoized strings", "\x80\x04\x8c\x02os\x94\x8c\x06system\x94\x8c\x04true\x94h\x00h\x01\x93h\x02\x85R.",
		[]string{"os.system"}, VerdictUnsafe},
	{"STACK_GLOBAL with a computed module", "\x80\x04c__builtin__\nstr\n\x8c\x02os\x85R\x8c\x06system\x93\x8c\x04true\x85R.",
		[]string{"__builtin__.str", "?"}, VerdictUnknown},
	{"protocol 0 INST", "(S'true'\nios\nsystem\n.", []string{"os.system"}, VerdictUnsafe},
	{"protocol 0 OBJ", "(cposix\nsystem\nS'true'\no.", []string{"posix.system"}, VerdictUnsafe},
	{"nested REDUCE", "c__builtin__\neval\n(c__builtin__\nstr\n(S'1+1'\ntRtR.", []string{"__builtin__.eval", "__builtin__.str"}, VerdictUnsafe},
	{"torch.load of another file", "\x80\x02ctorch\nload\nX\x05\x00\x00\x00x.pth\x85R.", []string{"torch.load"}, VerdictUnsafe},
	{"numpy runstring", "\x80\x02cnumpy.testing._private.utils\nrunstring\nX\x04\x00\x00\x00pass}\x86R.",
		[]string{"numpy.testing._private.utils.runstring"}, VerdictUnsafe},
	{"functools.partial", "\x80\x02cfunctools\npartial\ncos\nsystem\n\x85R.", []string{"functools.partial", "os.system"}, VerdictUnsafe},
	{"operator.attrgetter", "\x80\x02c_operator\nattrgetter\nX\x06\x00\x00\x00system\x85R.", []string{"_operator.attrgetter"}, VerdictUnsafe},
	{"unknown class", "\x80\x02cmymodule\nEvil\n)\x81.", []string{"mymodule.Evil"}, VerdictUnknown},
	{"torch inductor", "\x80\x02ctorch._inductor.codecache\ncompile_file\n)R.", []string{"torch._inductor.codecache.compile_file"}, VerdictUnsafe},
	// Protocol 4 resolves dotted names attribute by attribute (issue 20 item 4).
	{"dotted os.system through torch.serialization", "\x80\x04\x8c\x13torch.serialization\x8c\tos.system\x93\x8c\x04true\x85R.",
		[]string{"torch.serialization.os.system"}, VerdictUnsafe},
	{"dotted torch.load through torch._utils", "\x80\x04\x8c\x0ctorch._utils\x8c\ntorch.load\x93\x8c\x05x.pth\x85R.",
		[]string{"torch._utils.torch.load"}, VerdictUnsafe},
	{"dotted dunder walk through an allowed function", "\x80\x04\x8c\x0ctorch._utils\x8c\x1d_rebuild_tensor.__globals__.x\x93.",
		[]string{"torch._utils._rebuild_tensor.__globals__.x"}, VerdictUnsafe},
	{"dotted name through an allowed module, on no list", "\x80\x04\x8c\x0ctorch._utils\x8c\x0bfoo.Unknown\x93.",
		[]string{"torch._utils.foo.Unknown"}, VerdictUnknown},
	{"nested torch.load in torch.storage", "\x80\x02ctorch.storage\n_load_from_bytes\nC\x01x\x85R.",
		[]string{"torch.storage._load_from_bytes"}, VerdictUnsafe},
	{"torch.serialization._legacy_load", "\x80\x02ctorch.serialization\n_legacy_load\n)R.",
		[]string{"torch.serialization._legacy_load"}, VerdictUnsafe},
	{"torch.utils.model_zoo.load_url", "\x80\x02ctorch.utils.model_zoo\nload_url\nX\x01\x00\x00\x00u\x85R.",
		[]string{"torch.utils.model_zoo.load_url"}, VerdictUnsafe},
	{"after a failing REDUCE", "\x80\x02c__builtin__\nint\nX\x01\x00\x00\x00x\x85R0cos\nsystem\n.", []string{"__builtin__.int", "os.system"}, VerdictUnsafe},
}

var verdictRank = map[Verdict]int{VerdictAllowed: 0, VerdictData: 1, VerdictUnknown: 2, VerdictUnsafe: 3}

func TestGlobalsBypasses(t *testing.T) {
	for _, c := range bypasses {
		gs, _, err := Globals([]byte(c.pickle), Limits{})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var names []string
		worst := VerdictAllowed
		for _, g := range gs {
			n := g.Module + "." + g.Name
			if g.Dynamic {
				n = "?"
			}
			names = append(names, n)
			if verdictRank[g.Verdict] > verdictRank[worst] {
				worst = g.Verdict
			}
			if g.Offset < 0 || int(g.Offset) >= len(c.pickle) || !strings.Contains("GLOBAL INST STACK_GLOBAL", g.Op) {
				t.Errorf("%s: %s at offset %d (%s)", c.name, n, g.Offset, g.Op)
			}
		}
		if strings.Join(names, " ") != strings.Join(c.globals, " ") {
			t.Errorf("%s: globals %v, want %v", c.name, names, c.globals)
		}
		if worst != c.verdict {
			t.Errorf("%s: worst verdict %s, want %s", c.name, worst, c.verdict)
		}
	}
}

// TestGlobalsTorchAllowed: every global of a real torch.save pickle is allowed.
func TestGlobalsTorchAllowed(t *testing.T) {
	for _, fx := range []string{"zip_basic.pt", "training.pt", "quantized.pt", "sparse.pt", "params.pt"} {
		z, err := zip.OpenReader("../testdata/fixtures/" + fx)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range z.File {
			if strings.HasSuffix(f.Name, "/data.pkl") {
				rc, _ := f.Open()
				data, err := io.ReadAll(rc)
				rc.Close()
				if err != nil {
					t.Fatal(err)
				}
				checkAllowed(t, fx, data)
			}
		}
		z.Close()
	}
}

func checkAllowed(t *testing.T, fx string, data []byte) {
	gs, end, err := Globals(data, Limits{})
	if err != nil || end != len(data) || len(gs) == 0 {
		t.Fatalf("Globals: %d globals, end %d of %d, %v", len(gs), end, len(data), err)
	}
	for _, g := range gs {
		if g.Verdict != VerdictAllowed && !(fx == "training.pt" && g.Verdict == VerdictData) {
			t.Errorf("%s: %s.%s: %s (%s)", fx, g.Module, g.Name, g.Verdict, g.Reason)
		}
	}
}

// FuzzGlobals checks that the audit never panics, stays within the input,
// reports only the four verdicts, never calls a global allowed that
// Classify does not allow, and rates BUILD and SETITEM(S) findings unsafe.
func FuzzGlobals(f *testing.F) {
	for _, c := range bypasses {
		f.Add([]byte(c.pickle))
	}
	f.Add([]byte("\x80\x02ctorch._utils\n_rebuild_tensor_v2\nq\x00."))
	f.Fuzz(func(t *testing.T, data []byte) {
		gs, n, err := Globals(data, Limits{MaxDepth: 200, MaxMemo: 1 << 16, MaxContainerLen: 1 << 16, MaxOps: 1 << 20})
		if err == nil && (n <= 0 || n > len(data)) {
			t.Fatalf("end %d of %d", n, len(data))
		}
		for _, g := range gs {
			if g.Offset < 0 || int(g.Offset) >= len(data) {
				t.Fatalf("offset %d of %d", g.Offset, len(data))
			}
			if _, ok := verdictRank[g.Verdict]; !ok {
				t.Fatalf("verdict %q", g.Verdict)
			}
			if g.Op == "BUILD" || g.Op == "SETITEM" || g.Op == "SETITEMS" {
				if g.Verdict != VerdictUnsafe {
					t.Fatalf("%s on %s.%s: %s", g.Op, g.Module, g.Name, g.Verdict)
				}
			} else if !g.Dynamic {
				if v, _ := Classify(g.Module, g.Name); v != g.Verdict {
					t.Fatalf("%s.%s: %s, Classify says %s", g.Module, g.Name, g.Verdict, v)
				}
			} else if g.Verdict != VerdictUnknown {
				t.Fatalf("computed global %s", g.Verdict)
			}
		}
	})
}
