package scan

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/pickle"
)

// binUnicode is a BINUNICODE operand; binInt a BININT one.
func binUnicode(s string) string {
	return "X" + string(binary.LittleEndian.AppendUint32(nil, uint32(len(s)))) + s
}

func binInt(v int32) string { return "J" + string(binary.LittleEndian.AppendUint32(nil, uint32(v))) }

// storagePID is the storage key of class cls, declared numel elements
// long (bytes for UntypedStorage), as torch.save writes its persistent id.
func storagePID(cls, key string, numel int32) string {
	return "(" + binUnicode("storage") + "ctorch\n" + cls + "\n" + binUnicode(key) + binUnicode("cpu") + binInt(numel) + "tQ"
}

// storageTensor is _rebuild_tensor_v2 of n elements over storagePID.
func storageTensor(cls, key string, numel, n int32) string {
	return "ctorch._utils\n_rebuild_tensor_v2\n(" + storagePID(cls, key, numel) + binInt(0) + "(" + binInt(n) + "t(" + binInt(1) + "t\x89ccollections\nOrderedDict\n)RtR"
}

// stateDict is the data.pkl of {name: tensor, ...}.
func stateDict(items ...string) []byte {
	p := "\x80\x02}("
	for i := 0; i < len(items); i += 2 {
		p += binUnicode(items[i]) + items[i+1]
	}
	return []byte(p + "u.")
}

// TestStorageSizes: a storage torch.load would make larger than the
// record backing it (CVE-2026-24747), and a tensor past its storage, are
// unsafe findings naming the record and the tensor; storages their
// records back in full are none. Records are looked up as torch does:
// the first storage of a key counts, names compare without case.
func TestStorageSizes(t *testing.T) {
	four := bytes.Repeat([]byte{1}, 16)
	cases := []struct {
		name    string
		pkl     []byte
		records map[string][]byte
		op      string // the finding's op ("" none), whose record and reason hold want
		want    []string
	}{
		{"record backs the storage", stateDict("w", storageTensor("FloatStorage", "0", 4, 4)), map[string][]byte{"0": four}, "", nil},
		{"record larger than the storage", stateDict("w", storageTensor("FloatStorage", "0", 2, 2)), map[string][]byte{"0": four}, "", nil},
		{"storage past its record", stateDict("w", storageTensor("FloatStorage", "0", 1<<16, 4)), map[string][]byte{"0": four},
			"storage", []string{"archive/data/0", `storage "0"`, "65536 elements", "262144 bytes", "holds 16 bytes", "CVE-2026-24747"}},
		// A storage saved as a value of its own (torch.save(t.untyped_storage())).
		{"untyped storage counts bytes", stateDict("s", storagePID("UntypedStorage", "0", 17)), map[string][]byte{"0": four},
			"storage", []string{"archive/data/0", "(17 bytes)"}},
		{"untyped storage of its record's size", stateDict("s", storagePID("UntypedStorage", "0", 16)), map[string][]byte{"0": four}, "", nil},
		{"record name in another case", stateDict("w", storageTensor("DoubleStorage", "0", 4, 2)), map[string][]byte{"DATA/0": four},
			"storage", []string{"archive/DATA/0", "32 bytes"}},
		{"the first storage of a key counts", stateDict("a", storageTensor("FloatStorage", "0", 4, 4), "b", storageTensor("FloatStorage", "0", 1<<16, 4)),
			map[string][]byte{"0": four}, "", nil},
		{"a later key past its record", stateDict("a", storageTensor("FloatStorage", "0", 4, 4), "b", storageTensor("FloatStorage", "1", 5, 4)),
			map[string][]byte{"0": four, "1": four}, "storage", []string{"archive/data/1", "20 bytes"}},
		{"tensor past its storage", stateDict("w", storageTensor("FloatStorage", "0", 4, 64)), map[string][]byte{"0": four},
			"tensor", []string{"archive/data/0", `tensor "w"`, "256"}},
	}
	for _, c := range cases {
		files := map[string][]byte{"archive/data.pkl": c.pkl, "archive/version": []byte("3\n")}
		for k, v := range c.records {
			if !strings.Contains(k, "/") {
				k = "data/" + k
			}
			files["archive/"+k] = v
		}
		b := zipOf(t, files, zip.Store)
		rep, err := Reader(context.Background(), bytes.NewReader(b), int64(len(b)), "m.pt")
		if err != nil {
			t.Fatal(err)
		}
		var got []Finding
		for _, f := range rep.Findings {
			if f.Op == "storage" || f.Op == "tensor" {
				got = append(got, f)
			}
		}
		switch {
		case len(rep.Problems) > 0:
			t.Errorf("%s: problems %+v", c.name, rep.Problems)
		case c.op == "" && (len(got) > 0 || rep.Worst() != pickle.VerdictAllowed):
			t.Errorf("%s: %s, findings %+v", c.name, rep.Worst(), got)
		case c.op != "" && (len(got) != 1 || got[0].Op != c.op || got[0].Verdict != pickle.VerdictUnsafe):
			t.Errorf("%s: findings %+v, want one unsafe %s", c.name, got, c.op)
		case c.op != "":
			text := got[0].Record + " " + got[0].Reason
			for _, w := range c.want {
				if !strings.Contains(text, w) {
					t.Errorf("%s: %q lacks %q", c.name, text, w)
				}
			}
		}
	}
}

// TestStorageSizesNotChecked: a data.pkl that ckpt's unpickler stops in
// (values nested past MaxDepth) in a zip with storage records is a
// problem, since its storages after that point went unchecked; with no
// storage record at all, nothing torch loads can be backed by one.
func TestStorageSizesNotChecked(t *testing.T) {
	deep := []byte("\x80\x02" + strings.Repeat("]", 1200) + strings.Repeat("a", 1199) + ".")
	for _, withRecord := range []bool{true, false} {
		files := map[string][]byte{"archive/data.pkl": deep, "archive/version": []byte("3\n")}
		if withRecord {
			files["archive/data/0"] = make([]byte, 16)
		}
		b := zipOf(t, files, zip.Store)
		rep, err := Reader(context.Background(), bytes.NewReader(b), int64(len(b)), "deep.pt")
		if err != nil {
			t.Fatal(err)
		}
		if withRecord != (len(rep.Problems) == 1 && strings.Contains(rep.Problems[0].Error, "storage sizes not checked")) || !withRecord && len(rep.Problems) > 0 {
			t.Errorf("with a storage record %v: problems %+v", withRecord, rep.Problems)
		}
	}
}

// TestStorageFixtures: ckpt's own fixtures of a short record and a tensor
// past its storage, which its loader refuses, are unsafe to scan.
func TestStorageFixtures(t *testing.T) {
	for _, name := range []string{"short_record.pt", "short_storage.pt"} {
		rep, err := Paths(context.Background(), []string{filepath.Join(fixtures, "bad", name)})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Worst() != pickle.VerdictUnsafe {
			t.Errorf("%s: %s, findings %+v", name, rep.Worst(), rep.Findings)
		}
	}
}
