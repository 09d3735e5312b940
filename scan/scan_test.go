package scan

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/pickle"
)

const fixtures = "../testdata/fixtures"

// osSystem is a protocol-4 pickle that hides os.system behind memoized
// strings and STACK_GLOBAL.
const osSystem = "\x80\x04\x8c\x02os\x94\x8c\x06system\x94\x8c\x04true\x94h\x00h\x01\x93h\x02\x85R."

// legacyMagicP2 is torch's legacy magic number, protocol 2.
const legacyMagicP2 = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19."

func zipOf(t *testing.T, files map[string][]byte, method uint16) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, name := range sortedNames(files) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(files[name])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func sortedNames(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func gz(b []byte) []byte {
	var o bytes.Buffer
	w := gzip.NewWriter(&o)
	w.Write(b)
	w.Close()
	return o.Bytes()
}

func tarOf(t *testing.T, members map[string][]byte) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, n := range sortedNames(members) {
		tw.WriteHeader(&tar.Header{Name: n, Mode: 0644, Size: int64(len(members[n])), Format: tar.FormatUSTAR})
		tw.Write(members[n])
	}
	tw.Close()
	return b.Bytes()
}

// TestContainers hides the same unsafe pickle in every container torch.load
// reads; each scan must find os.system in the right record.
func TestContainers(t *testing.T) {
	evilZip := zipOf(t, map[string][]byte{"archive/data.pkl": []byte(osSystem), "archive/data/0": make([]byte, 16)}, zip.Store)
	cases := []struct {
		name, record string
		data         []byte
	}{
		{"zip", "archive/data.pkl", evilZip},
		{"zip deflated", "archive/data.pkl", zipOf(t, map[string][]byte{"archive/data.pkl": []byte(osSystem)}, zip.Deflate)},
		{"torchscript constants.pkl", "m/constants.pkl", zipOf(t, map[string][]byte{"m/data.pkl": []byte("\x80\x02}q\x00."),
			"m/constants.pkl": []byte(osSystem), "m/code/__torch__.py": []byte("x = 1\n")}, zip.Store)},
		{"nested zip", "outer/inner.pt!archive/data.pkl", zipOf(t, map[string][]byte{"outer/inner.pt": evilZip}, zip.Store)},
		{"gzip of zip", "gzip!archive/data.pkl", gz(evilZip)},
		{"legacy main pickle", "pickle 4", []byte(legacyMagicP2 + "\x80\x02M\xe9\x03." + "\x80\x02}." + osSystem)},
		{"bare pickle (DCP .metadata)", "pickle 1", []byte(osSystem)},
		{"protocol 0 legacy magic", "pickle 2", []byte("L119547037146038801333356L\n." + "(S'true'\nios\nsystem\n.")},
		{"tar pickle member", "pickle", tarOf(t, map[string][]byte{"pickle": []byte(osSystem), "sys_info": []byte("\x80\x02}.")})},
	}
	for _, c := range cases {
		rep, err := Reader(context.Background(), bytes.NewReader(c.data), int64(len(c.data)), c.name)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range rep.Findings {
			if f.Global == "os.system" && f.Verdict == pickle.VerdictUnsafe && f.Record == c.record {
				found = true
			}
		}
		if !found || rep.Worst() != pickle.VerdictUnsafe {
			t.Errorf("%s: os.system in %s not found: %+v %+v", c.name, c.record, rep.Findings, rep.Problems)
		}
	}
}

// TestFixtures scans every fixture: torch's own files have no unsafe
// global (foreign classes are unknown), the unsafe ones are unsafe.
func TestFixtures(t *testing.T) {
	rep, err := Paths(context.Background(), []string{fixtures})
	if err != nil {
		t.Fatal(err)
	}
	worst := map[string]pickle.Verdict{}
	rank := map[pickle.Verdict]int{pickle.VerdictAllowed: 0, pickle.VerdictData: 1, pickle.VerdictUnknown: 2, pickle.VerdictUnsafe: 3}
	for _, f := range rep.Findings {
		if rank[f.Verdict] >= rank[worst[f.File]] {
			worst[f.File] = f.Verdict
		}
	}
	for _, name := range []string{"zip_basic.pt", "legacy.pt", "legacy_proto1.pt", "legacy_proto5.pt", "tar.pt", "zip_basic.pt.gz",
		"sparse.pt", "quantized.pt", "torch2_dtypes.pt", "sharded_bin/pytorch_model-00001-of-00002.bin"} {
		if w := worst[filepath.Join(fixtures, name)]; w != pickle.VerdictAllowed {
			t.Errorf("%s: %s, want allowed", name, w)
		}
	}
	for name, want := range map[string]pickle.Verdict{"training.pt": pickle.VerdictData, "foreign.pt": pickle.VerdictUnknown,
		"module_legacy.pt": pickle.VerdictUnknown, "bad/unsafe_os_system.pt": pickle.VerdictUnsafe,
		"bad/unsafe_stack_global.pt": pickle.VerdictUnsafe, "bad/unsafe_builtins_eval.pt": pickle.VerdictUnsafe,
		"bad/unsafe_subprocess_popen.pt": pickle.VerdictUnsafe, "bad/unsafe_posix_system.pt": pickle.VerdictUnsafe} {
		if w := worst[filepath.Join(fixtures, name)]; w != want {
			t.Errorf("%s: %s, want %s", name, w, want)
		}
	}
	for _, f := range rep.Findings {
		if strings.HasSuffix(f.File, ".safetensors") || strings.HasSuffix(f.File, ".json") {
			t.Errorf("finding in %s", f.File)
		}
	}
	for _, p := range rep.Problems {
		if !strings.Contains(p.File, "/bad/") {
			t.Errorf("problem in a good fixture: %+v", p)
		}
	}
}

// TestCutReadingIsAProblem: a pickle whose readings from the points a
// loader may resume at are cut short (a FRAME crossing, then pushes no
// reading pops, then a flood) is not read in full, so it is a problem
// (exit 1), never an unknown finding in a file read in full (exit 3).
func TestCutReadingIsAProblem(t *testing.T) {
	if testing.Short() {
		t.Skip("reads an 8 MiB flood several times")
	}
	flood := append(bytes.Repeat([]byte{'N', '0'}, 4<<20), 'N', '.')
	data := []byte{0x80, 4, 0x95, 1, 0, 0, 0, 0, 0, 0, 0, 'B', 40, 0, 0, 0}
	data = append(data, bytes.Repeat([]byte{'N'}, 80)...)
	data = append(data, flood...)
	rep, err := Reader(context.Background(), bytes.NewReader(data), int64(len(data)), "cut.pkl")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) == 0 || !strings.Contains(rep.Problems[0].Error, "up to here only") {
		t.Fatalf("problems %+v, findings %+v: want the cut reading as a problem", rep.Problems, rep.Findings)
	}
	for _, f := range rep.Findings {
		if strings.Contains(f.Reason, "up to here only") {
			t.Errorf("the cut is also a finding: %+v", f)
		}
	}
}
