package statedict_test

import (
	"archive/zip"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/hostile"

	"github.com/ckpt-dev/ckpt/internal/testenv"
	"github.com/ckpt-dev/ckpt/statedict"
)

// rezip rewrites a torch zip with record names changed by rename.
func rezip(t *testing.T, src string, rename func(string) string) []byte {
	t.Helper()
	zr, err := zip.OpenReader(src)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: rename(f.Name), Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func toV7(t *testing.T, b []byte) []byte { return hostile.V7Tar(b) }

// TestTorchLookupRules: files torch reads by its own lookup rules read
// the same in ckpt, checked against torch itself where it is installed:
// a zip whose records differ in case from what torch.save writes (torch's
// zip reader compares names without regard to ASCII case), and a torch
// < 0.3 tar whose headers are pre-POSIX v7 (Python's tarfile reads them).
func TestTorchLookupRules(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{
		"upper_pkl.pt": rezip(t, filepath.Join(fixtures, "zip_basic.pt"), func(n string) string {
			if strings.HasSuffix(n, "/data.pkl") {
				return strings.TrimSuffix(n, "data.pkl") + "DATA.PKL"
			}
			return n
		}),
		"upper_all.pt": rezip(t, filepath.Join(fixtures, "zip_basic.pt"), strings.ToUpper),
	}
	tarData, err := os.ReadFile(filepath.Join(fixtures, "tar.pt"))
	if err != nil {
		t.Fatal(err)
	}
	files["v7.pt"] = toV7(t, tarData)
	if bytes.Contains(files["v7.pt"][:512], []byte("ustar")) || !statedict.IsTarHeader(files["v7.pt"]) {
		t.Fatal("v7 rewrite failed")
	}
	original := map[string]string{"upper_pkl.pt": "zip_basic.pt", "upper_all.pt": "zip_basic.pt", "v7.pt": "tar.pt"}
	var paths []string
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	for name := range files {
		got := tensorBytes(t, filepath.Join(dir, name))
		want := tensorBytes(t, filepath.Join(fixtures, original[name]))
		if len(got) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %d tensors differ from %s's %d", name, len(got), original[name], len(want))
		}
	}
	if testenv.Python() == "" {
		return
	}
	requireTorch(t)
	out, err := exec.Command(testenv.Python(), append([]string{"testdata/dump_tensors.py"}, paths...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("torch: %v\n%s", err, out)
	}
	var dumps map[string]map[string]string
	if err := json.Unmarshal(out, &dumps); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if got := tensorBytes(t, p); fmt.Sprint(got) != fmt.Sprint(dumps[p]) || len(got) == 0 {
			t.Errorf("%s: ckpt %v, torch %v", filepath.Base(p), got, dumps[p])
		}
	}
}

func tensorBytes(t *testing.T, path string) map[string]string {
	t.Helper()
	ck, err := statedict.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	defer ck.Close()
	out := map[string]string{}
	for _, tt := range ck.Tensors {
		b, err := tt.ReadAll()
		if err != nil {
			t.Fatalf("%s: %s: %v", filepath.Base(path), tt.Name, err)
		}
		out[tt.Name] = hex.EncodeToString(b)
	}
	return out
}

// TestZipDuplicateByCase: two records torch takes for one (data.pkl and
// DATA.PKL) are refused, as exact duplicates are: torch would read one of
// them, and which depends on its search.
func TestZipDuplicateByCase(t *testing.T) {
	b := rezip(t, filepath.Join(fixtures, "zip_basic.pt"), func(n string) string { return n })
	zr, _ := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range zr.File {
		zw.Copy(f)
		if strings.HasSuffix(f.Name, "/data.pkl") {
			w, _ := zw.CreateHeader(&zip.FileHeader{Name: strings.TrimSuffix(f.Name, "data.pkl") + "Data.Pkl", Method: zip.Store})
			w.Write([]byte("\x80\x02}q\x00."))
		}
	}
	zw.Close()
	_, err := statedict.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if !errors.Is(err, statedict.ErrMalformed) || !strings.Contains(err.Error(), "Data.Pkl") {
		t.Errorf("duplicate by case: %v", err)
	}
}
