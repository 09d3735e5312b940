package statedict

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/pickle"
)

const dcpFixtures = "../testdata/dcp"

type dcpExpected struct {
	Tensors map[string]struct {
		DType  string  `json:"dtype"`
		Shape  []int64 `json:"shape"`
		SHA256 string  `json:"sha256"`
	} `json:"tensors"`
	Values map[string]string `json:"values"`
}

func loadDCPExpected(t *testing.T, name string) dcpExpected {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dcpFixtures, name+".expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e dcpExpected
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// TestDCPFixture reads a real 4-rank torch 2.6 DCP save and compares every
// tensor with what dcp_to_torch_save produced from the same directory.
func TestDCPFixture(t *testing.T) {
	exp := loadDCPExpected(t, "basic")
	ck, err := Open(filepath.Join(dcpFixtures, "basic"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if ck.Format != FormatDCP {
		t.Fatalf("format %s", ck.Format)
	}
	if len(ck.Warnings) != 0 {
		t.Errorf("warnings: %v", ck.Warnings)
	}
	if len(ck.Shards) != 4 {
		t.Errorf("files %v", ck.Shards)
	}
	if len(ck.Tensors) != len(exp.Tensors) {
		t.Errorf("%d tensors, want %d", len(ck.Tensors), len(exp.Tensors))
	}
	for _, tn := range ck.Tensors {
		e, ok := exp.Tensors[tn.Name]
		if !ok {
			t.Errorf("unexpected tensor %q", tn.Name)
			continue
		}
		if tn.DType.String() != e.DType || !equalInts(tn.Shape, e.Shape) {
			t.Errorf("%s: %s%v, want %s%v", tn.Name, tn.DType, tn.Shape, e.DType, e.Shape)
		}
		b, err := tn.ReadAll()
		if err != nil {
			t.Errorf("%s: %v", tn.Name, err)
			continue
		}
		if got := sha(b); got != e.SHA256 {
			t.Errorf("%s: streamed sha256 %s, want %s", tn.Name, got, e.SHA256)
		}
		// Random access gives the same bytes, also at odd offsets.
		ra, err := tn.Storage.ReaderAt()
		if err != nil {
			t.Fatal(err)
		}
		c := make([]byte, len(b))
		for off := 0; off < len(b); off += 7 {
			if _, err := ra.ReadAt(c[off:min(off+7, len(b))], int64(off)); err != nil && err != io.EOF {
				t.Fatalf("%s: ReadAt %d: %v", tn.Name, off, err)
			}
		}
		if sha(c) != e.SHA256 {
			t.Errorf("%s: ReadAt bytes differ", tn.Name)
		}
	}
	want := map[string]int{"model.embed.weight": 4, "model.mlp.weight": 4, "model.norm.weight": 1, "model.mix.weight": 2, "model.conv.weight": 3, "model.scale": 1}
	for n, c := range want {
		if got := len(ck.Tensor(n).Chunks()); got != c {
			t.Errorf("%s: %d chunks, want %d", n, got, c)
		}
	}
	vals := map[string]any{}
	for _, o := range ck.Objects {
		vals[o.Name] = o.Value
	}
	if vals["epoch"] != int64(7) || vals["run"] != "fixture-run" || vals["optim.param_groups.0.lr"] != 0.001 {
		t.Errorf("values: %v", vals)
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// copyDir copies a fixture directory so that a test can damage it.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// A missing rank file is flagged at Open and fails only the tensors that
// need it.
func TestDCPMissingFile(t *testing.T) {
	dir := copyDir(t, filepath.Join(dcpFixtures, "basic"))
	if err := os.Remove(filepath.Join(dir, "__2_0.distcp")); err != nil {
		t.Fatal(err)
	}
	ck, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if len(ck.Warnings) == 0 {
		t.Error("no warning for the missing file")
	}
	bad := ck.Tensor("model.embed.weight")
	if !errors.Is(bad.Problem(), ErrMissingRecord) {
		t.Errorf("problem %v", bad.Problem())
	}
	if _, err := bad.ReadAll(); !errors.Is(err, ErrMissingRecord) {
		t.Errorf("read: %v", err)
	}
	// model.norm.weight is replicated and stored once, by rank 0.
	ok := ck.Tensor("model.norm.weight")
	if ok.Problem() != nil {
		t.Fatalf("norm: %v", ok.Problem())
	}
	if _, err := ok.ReadAll(); err != nil {
		t.Error(err)
	}
}

// A chunk file cut short is an error naming file and tensor.
func TestDCPTruncatedFile(t *testing.T) {
	dir := copyDir(t, filepath.Join(dcpFixtures, "basic"))
	if err := os.Truncate(filepath.Join(dir, "__1_0.distcp"), 100); err != nil {
		t.Fatal(err)
	}
	ck, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	_, err = ck.Tensor("model.embed.weight").ReadAll()
	if !errors.Is(err, ErrTruncated) {
		t.Fatalf("got %v", err)
	}
	t.Log(err)
}

// TestDCPBadMetadata: metadata that torch's own classes pickle, changed in
// one way each (scripts/gen_dcp_fixtures.py make_bad), beside the real
// chunk files: bad tilings and paths are flagged at Open and fail only
// that tensor; an unsafe global fails Open.
func TestDCPBadMetadata(t *testing.T) {
	cases := []struct {
		name, tensor string
		want         error
	}{
		{"gap", "model.embed.weight", dcp.ErrTiling},
		{"overlap", "model.counts", dcp.ErrTiling},
		{"outside", "model.ids", dcp.ErrTiling},
		{"path", "model.proj.weight", ErrMalformed},
	}
	for _, tc := range cases {
		dir := copyDir(t, filepath.Join(dcpFixtures, "basic"))
		b, err := os.ReadFile(filepath.Join(dcpFixtures, "bad", tc.name+".metadata"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, dcp.MetadataFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
		ck, err := Open(dir)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		bad := ck.Tensor(tc.tensor)
		if !errors.Is(bad.Problem(), tc.want) || len(ck.Warnings) != 1 {
			t.Errorf("%s: problem %v, warnings %v", tc.name, bad.Problem(), ck.Warnings)
		}
		if _, err := bad.ReadAll(); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.tensor) {
			t.Errorf("%s: read error %v", tc.name, err)
		}
		for _, other := range ck.Tensors {
			if other != bad {
				if _, err := other.ReadAll(); err != nil {
					t.Errorf("%s: %s: %v", tc.name, other.Name, err)
				}
			}
		}
		ck.Close()
	}
	dir := copyDir(t, filepath.Join(dcpFixtures, "basic"))
	b, _ := os.ReadFile(filepath.Join(dcpFixtures, "bad", "unsafe.metadata"))
	os.WriteFile(filepath.Join(dir, dcp.MetadataFile), b, 0o644)
	if _, err := Open(dir); !errors.Is(err, pickle.ErrUnsafe) {
		t.Errorf("unsafe: %v", err)
	}
}

// A chunk whose bytes are not a torch.save file fails the read of its
// tensor, naming the file and the tensor.
func TestDCPCorruptChunk(t *testing.T) {
	dir := copyDir(t, filepath.Join(dcpFixtures, "basic"))
	f, err := os.OpenFile(filepath.Join(dir, "__0_0.distcp"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(make([]byte, 1244), 0) // the first chunk, of model.embed.weight
	f.Close()
	ck, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	_, err = ck.Tensor("model.embed.weight").ReadAll()
	if err == nil || !strings.Contains(err.Error(), "__0_0.distcp") || !strings.Contains(err.Error(), "model.embed.weight") {
		t.Fatalf("got %v", err)
	}
	t.Log(err)
}

// A flipped bit in a chunk's data fails the read of the whole tensor with
// ErrChunkCRC (the chunk's zip recorded the CRC32 of its bytes).
func TestDCPChunkCRC(t *testing.T) {
	ck, err := Open(filepath.Join(dcpFixtures, "basic"))
	if err != nil {
		t.Fatal(err)
	}
	good, err := ck.Tensor("model.embed.weight").ReadAll()
	ck.Close()
	if err != nil {
		t.Fatal(err)
	}
	dir := copyDir(t, filepath.Join(dcpFixtures, "basic"))
	path := filepath.Join(dir, "__0_0.distcp")
	b, _ := os.ReadFile(path)
	at := bytes.Index(b[:1244], good[:72]) // rank 0's rows 0:3
	if at < 0 {
		t.Fatal("chunk data not found")
	}
	b[at+40] ^= 0x10
	os.WriteFile(path, b, 0o644)
	ck, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	rc, err := ck.Tensor("model.embed.weight").Open()
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(rc)
	rc.Close()
	if !errors.Is(err, ErrChunkCRC) || !strings.Contains(err.Error(), "__0_0.distcp") {
		t.Fatalf("got %v", err)
	}
	t.Log(err)
	// ReadAll passes the chunk's error through, not as a truncation.
	_, err = ck.Tensor("model.embed.weight").ReadAll()
	if !errors.Is(err, ErrChunkCRC) || errors.Is(err, ErrTruncated) || strings.Contains(err.Error(), "truncated") ||
		!strings.Contains(err.Error(), "__0_0.distcp") || !strings.Contains(err.Error(), "model.embed.weight") {
		t.Fatalf("ReadAll: %v", err)
	}
	t.Log(err)
	// Other tensors of the file still read.
	if _, err := ck.Tensor("model.proj.weight").ReadAll(); err != nil {
		t.Error(err)
	}
}
