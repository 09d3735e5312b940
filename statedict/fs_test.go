package statedict

import (
	"os"
	"path"
	"strings"
	"testing"
)

// dirFS is an FS over a local directory, named with slashes and shown
// with a "mem://" prefix, as an object store would be.
type dirFS struct {
	root   string
	opened []string
}

type osFile struct{ *os.File }

func (f osFile) Size() int64 {
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	return fi.Size()
}

func (d *dirFS) OpenFile(name string) (File, error) {
	d.opened = append(d.opened, name)
	f, err := os.Open(path.Join(d.root, name))
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (d *dirFS) IsDir(name string) (bool, error) {
	fi, err := os.Stat(path.Join(d.root, name))
	if err != nil {
		return false, err
	}
	return fi.IsDir(), nil
}

func (d *dirFS) ReadDir(name string) ([]string, error) {
	ents, err := os.ReadDir(path.Join(d.root, name))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

func (d *dirFS) DisplayName(name string) string { return "mem://" + name }

// OpenFS opens the same checkpoints as Open: files, sharded indexes with
// their shards beside them, directories; storages name their files as
// the FS shows them.
func TestOpenFS(t *testing.T) {
	for _, name := range []string{"zip_basic.pt", "model.safetensors", "sharded_st", "sharded_bin", "dir_checkpoint", "legacy.pt", "zip_basic.pt.gz"} {
		t.Run(name, func(t *testing.T) {
			want, err := Open("../testdata/fixtures/" + name)
			if err != nil {
				t.Fatal(err)
			}
			defer want.Close()
			fsys := &dirFS{root: "../testdata/fixtures"}
			got, err := OpenFS(fsys, name)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Close()
			if len(got.Tensors) != len(want.Tensors) || got.Format != want.Format || len(got.Shards) != len(want.Shards) {
				t.Fatalf("got %d tensors %s, want %d %s", len(got.Tensors), got.Format, len(want.Tensors), want.Format)
			}
			for i, tw := range want.Tensors {
				tg := got.Tensors[i]
				if tg.Name != tw.Name || tg.DType != tw.DType {
					t.Fatalf("tensor %d: got %s %s, want %s %s", i, tg.Name, tg.DType, tw.Name, tw.DType)
				}
				a, err := tw.ReadAll()
				if err != nil {
					t.Fatal(err)
				}
				b, err := tg.ReadAll()
				if err != nil {
					t.Fatal(err)
				}
				if string(a) != string(b) {
					t.Fatalf("tensor %s: data differs", tw.Name)
				}
				if tg.Storage != nil && !strings.HasPrefix(tg.Storage.File, "mem://") {
					t.Fatalf("storage file %q, want the FS's display name", tg.Storage.File)
				}
			}
		})
	}
}

func TestOpenFSErrorsNameTheFile(t *testing.T) {
	fsys := &dirFS{root: "../testdata/fixtures/bad"}
	ents, _ := os.ReadDir("../testdata/fixtures/bad")
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		_, err := OpenFS(fsys, e.Name())
		if err == nil {
			continue
		}
		if !strings.Contains(err.Error(), "mem://"+e.Name()) {
			t.Errorf("%s: error %q does not name mem://%s", e.Name(), err, e.Name())
		}
	}
}
