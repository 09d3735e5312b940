package pickle

import (
	"encoding/hex"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/testenv"
)

// setItemFindings returns the SETITEM and SETITEMS findings of Globals on p.
func setItemFindings(t *testing.T, p string) []GlobalUse {
	t.Helper()
	gs, _, err := Globals([]byte(p), Limits{})
	if err != nil {
		t.Fatalf("Globals: %v", err)
	}
	var out []GlobalUse
	for _, g := range gs {
		if g.Op == "SETITEM" || g.Op == "SETITEMS" {
			out = append(out, g)
		}
	}
	return out
}

const (
	rebuildV2 = "ctorch._utils\n_rebuild_tensor_v2\n"
	// a storage persistent id, then _rebuild_tensor_v2(storage, 0, (4,), (1,), False, OrderedDict())
	tensorArgs = "((X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x04tQK\x00K\x04\x85K\x01\x85\x89ccollections\nOrderedDict\n)Rtq\x05"
	tensor     = rebuildV2 + tensorArgs + "R"
)

// TestSetItemTargets: SETITEM(S) on a dict (EMPTY_DICT, DICT, what
// OrderedDict, defaultdict, Counter or dict build, through the memo, DUP
// and BUILD) or on a value of unknown type (a model's dict subclass) is
// no finding; on anything else (a tensor, a storage, a list, a string, an
// imported object itself) it is unsafe, naming the global that built it.
func TestSetItemTargets(t *testing.T) {
	cases := []struct {
		name   string
		pickle string
		want   string // "" for no finding; else the finding's module.name ("?" for none)
	}{
		{"EMPTY_DICT", "\x80\x02}K\x01K\x02s.", ""},
		{"EMPTY_DICT SETITEMS", "\x80\x02}(K\x01K\x02K\x03K\x04u.", ""},
		{"DICT", "\x80\x02(K\x01K\x02dK\x03K\x04s.", ""},
		{"OrderedDict()", "\x80\x02ccollections\nOrderedDict\n)R(K\x01K\x02u.", ""},
		{"OrderedDict by NEWOBJ", "\x80\x02ccollections\nOrderedDict\n)\x81K\x01K\x02s.", ""},
		{"defaultdict", "\x80\x02ccollections\ndefaultdict\nc__builtin__\nlist\n\x85R(K\x01K\x02u.", ""},
		{"Counter by INST", "\x80\x02(icollections\nCounter\nK\x01K\x02s.", ""},
		{"dict by OBJ", "\x80\x02(c__builtin__\ndict\noK\x01K\x02s.", ""},
		{"dict through the memo", "\x80\x02}q\x000h\x00K\x01K\x02s.", ""},
		{"dict after DUP and BUILD", "\x80\x02ccollections\nOrderedDict\n)R2}bK\x01K\x02s0.", ""},
		{"dict after SETITEMS", "\x80\x02}(K\x01K\x02uK\x03K\x04s.", ""},
		{"a model's dict subclass", "\x80\x02cmymodel\nConfig\n)\x81(K\x01K\x02u.", ""},
		{"copyreg._reconstructor", "\x80\x02ccopyreg\n_reconstructor\n(cmymodel\nD\nc__builtin__\ndict\n}tR(K\x01K\x02u.", ""},
		{"tensor", "\x80\x02" + tensor + "K\x00K\x07s.", "torch._utils._rebuild_tensor_v2"},
		{"tensor SETITEMS", "\x80\x02" + tensor + "(K\x00K\x07u.", "torch._utils._rebuild_tensor_v2"},
		{"tensor through the memo", "\x80\x02" + tensor + "q\x010h\x01K\x00K\x07s.", "torch._utils._rebuild_tensor_v2"},
		{"a tuple through the memo", "\x80\x02}X\x01\x00\x00\x00w" + tensor + "sh\x05K\x00K\x07s.", "?"},
		{"storage", "\x80\x02(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x04tQK\x00K\x07s.", "?"},
		{"torch.Size", "\x80\x02ctorch\nSize\n]\x85RK\x00K\x07s.", "torch.Size"},
		{"list", "\x80\x02]K\x00K\x07s.", "?"},
		{"list after APPEND", "\x80\x02]K\x01aK\x00K\x07s.", "?"},
		{"string", "\x80\x02X\x01\x00\x00\x00aK\x00K\x07s.", "?"},
		{"the OrderedDict class itself", "\x80\x02ccollections\nOrderedDict\nK\x00K\x07s.", "collections.OrderedDict"},
		{"an unknown module's object itself", "\x80\x02ccopyreg\n_extension_registry\nK\x00K\x07s.", "copyreg._extension_registry"},
	}
	for _, c := range cases {
		fs := setItemFindings(t, c.pickle)
		switch {
		case c.want == "" && len(fs) != 0:
			t.Errorf("%s: finding %+v on a dict or an unknown value", c.name, fs)
		case c.want != "" && len(fs) != 1:
			t.Errorf("%s: %d SETITEM findings, want 1", c.name, len(fs))
		case c.want != "":
			g := fs[0]
			name := g.Module + "." + g.Name
			if g.Dynamic {
				name = "?"
			}
			if g.Verdict != VerdictUnsafe || name != c.want || !strings.Contains(g.Reason, "CVE-2026-24747") {
				t.Errorf("%s: %s %s %s (%s), want unsafe %s", c.name, g.Op, name, g.Verdict, g.Reason, c.want)
			}
		}
	}
}

// TestSetItemRealPicklers: nothing CPython's pickler or torch.save writes,
// at any protocol, is a SETITEM finding: dicts, OrderedDicts (a state
// dict with its _metadata), defaultdicts, Counters, dict subclasses,
// a dict holding itself, dicts shared through the memo.
func TestSetItemRealPicklers(t *testing.T) {
	testenv.Require(t, "torch")
	const script = `
import collections, io, json, pickle, zipfile, torch
class D(dict): pass
class O(collections.OrderedDict): pass
shared = {"k": [1, 2]}
rec = {"a": 1}
rec["self"] = rec
values = [
    {"a": 1, "b": {"c": [1, {"d": 2}]}},
    collections.OrderedDict((str(i), i) for i in range(1500)),
    collections.defaultdict(list, {"x": [1]}),
    collections.Counter("hello"),
    D(a=1), O(b=2), rec, [shared, shared, {"s": shared}],
    {i: {j: j for j in range(3)} for i in range(1100)},
]
out = []
for p in range(0, pickle.HIGHEST_PROTOCOL + 1):
    for v in values:
        out.append(pickle.dumps(v, protocol=p).hex())
model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
for obj in (model.state_dict(), {"model": model.state_dict(), "step": 3, "opt": {"state": {0: {"m": torch.ones(2)}}}}):
    b = io.BytesIO()
    torch.save(obj, b)
    with zipfile.ZipFile(b) as z:
        out.append(z.read([n for n in z.namelist() if n.endswith("data.pkl")][0]).hex())
print(json.dumps(out))
`
	raw, err := exec.Command(testenv.Python(), "-c", script).Output()
	if err != nil {
		t.Fatal(err)
	}
	var pickles []string
	if err := json.Unmarshal(raw, &pickles); err != nil {
		t.Fatal(err)
	}
	if len(pickles) < 50 {
		t.Fatalf("%d pickles, want the values at every protocol", len(pickles))
	}
	for i, h := range pickles {
		p, err := hex.DecodeString(h)
		if err != nil {
			t.Fatal(err)
		}
		if fs := setItemFindings(t, string(p)); len(fs) != 0 {
			t.Errorf("pickle %d (%d bytes): %+v", i, len(p), fs[0])
		}
	}
}
