package remap

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/testenv"
)

// TestInteropTorch saves tensors tagged with various locations with real
// torch, loads them under map_location dicts, strings and torch.devices
// (testdata/interop.py), and checks that our rules send every tag where
// torch did. Dicts with only indexed keys must agree everywhere; bare keys
// must agree where the tag equals the key and differ, as documented, on
// the indexed tags of their type.
func TestInteropTorch(t *testing.T) {
	testenv.Require(t, "torch")
	tags := []string{"cpu", "cuda", "cuda:0", "cuda:1", "cuda:2", "cuda:10", "mps", "meta",
		"xpu:0", "xpu:1", "hpu:0", "privateuseone:0"}
	dicts := []map[string]string{
		{},
		{"cuda:0": "cuda:1", "cuda:1": "cuda:0"},
		{"cuda:1": "cpu"},
		{"cpu": "cuda:0"},
		{"cuda:0": "cpu", "cuda:2": "cuda:0", "xpu:1": "xpu:0", "hpu:0": "cpu", "privateuseone:0": "cpu"},
		{"cuda:3": "cpu", "cuda:10": "cuda:1"},
		{"cuda": "cpu"}, // torch: matches only the bare "cuda" tag
		{"cuda": "cpu", "cuda:1": "cuda:0"},
		{"mps": "cpu", "meta": "cuda", "xpu": "cpu"},
	}
	strs := []string{"cpu", "cuda", "cuda:0", "cuda:1", "mps", "meta", "xpu:1"}
	req, err := json.Marshal(map[string]any{"tags": tags, "dicts": dicts, "strings": strs})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testenv.Python(), "testdata/interop.py")
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("interop.py: %v\n%s", err, stderr.String())
	}
	var got struct {
		Version string
		Dicts   []map[string]string
		Strings []map[string]string
		Devices []map[string]string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("interop.py output %q: %v", out, err)
	}
	if len(got.Dicts) != len(dicts) || len(got.Strings) != len(strs) || len(got.Devices) != len(strs) {
		t.Fatalf("interop.py answered %d/%d/%d cases", len(got.Dicts), len(got.Strings), len(got.Devices))
	}
	t.Logf("torch %s", got.Version)

	ours := func(r Rules, tag string) string {
		d, err := r.Target(tag)
		if err != nil {
			t.Fatalf("%v Target(%q): %v", r, tag, err)
		}
		return d.String()
	}
	differences := 0
	for i, m := range dicts {
		r, err := Dict(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, tag := range tags {
			torchLoc, ok := got.Dicts[i][tag]
			if !ok {
				t.Fatalf("dict %v: torch recorded nothing for %q", m, tag)
			}
			want := torchLoc
			// Our documented difference: a bare key also matches the
			// indexed tags of its type when no exact key does.
			typ, _, indexed := strings.Cut(tag, ":")
			if v, bare := m[typ]; bare && indexed && m[tag] == "" {
				if torchLoc != tag {
					t.Errorf("dict %v: torch moved %q to %q; expected torch to leave it", m, tag, torchLoc)
				}
				want = v
				differences++
			}
			if o := ours(r, tag); o != want {
				t.Errorf("dict %v, tag %q: torch -> %q, ours -> %q, want %q", m, tag, torchLoc, o, want)
			}
		}
	}
	if differences == 0 {
		t.Error("no case exercised the bare-key difference")
	}
	for i, s := range strs {
		d, err := ParseDevice(s)
		if err != nil {
			t.Fatal(err)
		}
		r := To(d)
		for _, tag := range tags {
			for kind, res := range map[string]map[string]string{"string": got.Strings[i], "torch.device": got.Devices[i]} {
				if o := ours(r, tag); res[tag] != o {
					t.Errorf("map_location=%s %q, tag %q: torch -> %q, ours -> %q", kind, s, tag, res[tag], o)
				}
			}
		}
	}
}
