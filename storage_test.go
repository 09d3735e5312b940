package ckpt_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt"
	"github.com/ckpt-dev/ckpt/internal/testenv"
)

// storageValueFixtures are the fixtures holding storages saved as values.
var storageValueFixtures = []string{"storage_root.pt", "storages.pt", "storages_legacy.pt", "old_storage_view.pt"}

// loadedValues loads src to the cpu and returns every storage value's
// bytes by name, checking that each storage is read once.
func loadedValues(t *testing.T, src string) map[string][]byte {
	t.Helper()
	m, err := ckpt.Load(context.Background(), src, ckpt.WithMapLocation("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if len(m.Storages) != len(m.Plan.Storages) || len(m.Host.Values) != len(m.Storages) {
		t.Fatalf("%s: %d storages in the model, %d planned, %d loaded", src, len(m.Storages), len(m.Plan.Storages), len(m.Host.Values))
	}
	seen := map[string]bool{}
	var sum int64
	for _, hs := range m.Host.Storages {
		k := hs.Storage.File + "/" + hs.Storage.Key
		if seen[k] {
			t.Errorf("%s: storage %s read twice", src, k)
		}
		seen[k] = true
		sum += hs.Storage.NBytes
	}
	if sum != m.Host.Bytes {
		t.Errorf("%s: %d bytes read, storages hold %d", src, m.Host.Bytes, sum)
	}
	out := map[string][]byte{}
	for _, s := range m.Storages {
		if !s.OnHost() || s.Device.String() != "cpu" {
			t.Errorf("%s: storage value %q on %s, on host %v", src, s.Name, s.Device, s.OnHost())
			continue
		}
		b, err := s.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		out[s.Name] = b
	}
	return out
}

// A host load moves every storage value with the bytes torch.load gives it
// (testdata/storage_values.py), each storage once.
func TestInteropLoadStorageValues(t *testing.T) {
	testenv.Require(t, "torch")
	args := []string{"testdata/storage_values.py"}
	for _, f := range storageValueFixtures {
		args = append(args, fixtures+f)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(testenv.Python(), args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("storage_values.py: %v\n%s", err, stderr.String())
	}
	var want map[string]map[string]string
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	for _, f := range storageValueFixtures {
		got := loadedValues(t, fixtures+f)
		w := want[fixtures+f]
		if len(w) == 0 || len(got) != len(w) {
			t.Errorf("%s: ckpt loaded %d storage values, torch has %d", f, len(got), len(w))
		}
		for name, hx := range w {
			if b, ok := got[name]; !ok || hex.EncodeToString(b) != hx {
				t.Errorf("%s: storage value %q: ckpt %x (found %v), torch %s", f, name, b, ok, hx)
			}
		}
	}
}

// storage_root.pt holds torch.arange(4, dtype=torch.int16).storage()
// (scripts/gen_fixtures.py); storages.pt's "typed" is the storage of the
// tensor "t" beside it: read once, reachable from both.
func TestLoadStorageValues(t *testing.T) {
	got := loadedValues(t, fixtures+"storage_root.pt")
	if !bytes.Equal(got[""], []byte{0, 0, 1, 0, 2, 0, 3, 0}) {
		t.Errorf("storage_root.pt: %x", got[""])
	}
	m, err := ckpt.Load(context.Background(), fixtures+"storages.pt", ckpt.WithMapLocation("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	typed, ok := m.Storage("typed")
	tt, _ := m.Tensor("t")
	if !ok || tt == nil {
		t.Fatal("no storage value typed or tensor t")
	}
	vb, _ := typed.Bytes()
	tb, _ := tt.Bytes()
	if len(vb) != 24 || &vb[0] != &tb[0] {
		t.Errorf("typed and t do not share one loaded storage")
	}
	if len(m.Host.Storages) != 4 || m.Plan.Devices()[0].Storages != 4 {
		t.Errorf("%d storages loaded, %d planned, want 4", len(m.Host.Storages), m.Plan.Devices()[0].Storages)
	}
	for _, hs := range m.Host.Storages {
		if hs.Storage.Key == typed.Source.Key && (!slices.Equal(hs.Tensors, []string{"t"}) || !slices.Equal(hs.Values, []string{"typed"})) {
			t.Errorf("shared storage: tensors %v, values %v", hs.Tensors, hs.Values)
		}
	}
	if _, onGPU := typed.DevicePtr(); onGPU {
		t.Error("a device pointer for a host storage")
	}
	j, err := json.Marshal(m.Report())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"storage_values":4`, `"storage_values":["typed"]`, `{"name":"half","storage":`} {
		if !strings.Contains(string(j), s) {
			t.Errorf("report lacks %s", s)
		}
	}
	// A filter selects storage values by name as it selects tensors.
	m2, err := ckpt.Load(context.Background(), fixtures+"storages.pt", ckpt.WithMapLocation("cpu"),
		ckpt.WithFilter(func(n string) bool { return n == "half" }))
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if len(m2.Storages) != 1 || m2.Storages[0].Name != "half" || len(m2.Host.Storages) != 1 {
		t.Errorf("filtered: %d values, %d storages", len(m2.Storages), len(m2.Host.Storages))
	}
	m.Close()
	if _, err := typed.Bytes(); !errors.Is(err, ckpt.ErrClosed) {
		t.Errorf("bytes after Close: %v", err)
	}
}

// A storage value tagged cuda:1 goes where the rules send that tag.
func TestLoadStorageValueMapLocation(t *testing.T) {
	ck, err := ckpt.Open(context.Background(), fixtures+"storage_root.pt")
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	ck.Storages[0].Location = "cuda:1" // as if saved from cuda:1
	plan, err := ckpt.NewPlan(ck, ckpt.WithMapLocation("cuda:1=cpu"))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Storages) != 1 || plan.Storages[0].Source != "cuda:1" || plan.Storages[0].Target.String() != "cpu" {
		t.Fatalf("plan %+v", plan.Storages)
	}
	m, err := ckpt.LoadCheckpoint(context.Background(), ck, ckpt.WithMapLocation("cuda:1=cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, ok := m.Storage("")
	if b, err := s.Bytes(); !ok || err != nil || !bytes.Equal(b, []byte{0, 0, 1, 0, 2, 0, 3, 0}) || s.Saved != "cuda:1" {
		t.Errorf("storage value: %x %v (saved %s)", b, err, s.Saved)
	}
	plan, err = ckpt.NewPlan(ck, ckpt.WithMapLocation("cuda:0=cpu"))
	if err != nil || plan.Storages[0].Target.String() != "cuda:1" || plan.Devices()[0].Device.String() != "cuda:1" {
		t.Errorf("unmapped tag: %+v %v", plan, err)
	}
}
