package statedict

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// noListFS is a dirFS that cannot list directories, as a web server.
type noListFS struct{ *dirFS }

func (noListFS) ReadDir(string) ([]string, error) {
	return nil, fmt.Errorf("cannot list: %w", errors.ErrUnsupported)
}

// failListFS is a dirFS whose listings fail (as an object store's past a
// bound), counting them.
type failListFS struct {
	*dirFS
	n *int
}

func (f failListFS) ReadDir(string) ([]string, error) {
	*f.n++
	return nil, errors.New("listing refused")
}

// Issue #34 item 6: a listing that fails ends the open of a directory
// with its error, after one question. Before, every probe took it for an
// empty directory (and asked again), and the DCP probe opened .metadata.
func TestOpenFSListFails(t *testing.T) {
	n := 0
	ck, err := OpenFS(failListFS{&dirFS{root: dcpFixtures}, &n}, "basic/")
	if err == nil {
		ck.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "listing refused") || n != 1 {
		t.Fatalf("got %v after %d listings, want the listing's error after one", err, n)
	}
}

// A DCP directory opens through an FS as it does locally, named as a
// directory (with or without a trailing slash) or by its .metadata, and
// from an FS that cannot list; storages and errors show the FS's names.
func TestOpenFSDCP(t *testing.T) {
	want, err := Open(filepath.Join(dcpFixtures, "basic"))
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	cases := []struct {
		name string
		fsys FS
	}{
		{"basic", &dirFS{root: dcpFixtures}},
		{"basic/", &dirFS{root: dcpFixtures}},
		{"basic/.metadata", &dirFS{root: dcpFixtures}},
		{"basic/", noListFS{&dirFS{root: dcpFixtures}}},
		{"basic/.metadata", noListFS{&dirFS{root: dcpFixtures}}},
		{".metadata", &dirFS{root: filepath.Join(dcpFixtures, "basic")}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s %T", c.name, c.fsys), func(t *testing.T) {
			got, err := OpenFS(c.fsys, c.name)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Close()
			if got.Format != FormatDCP || len(got.Tensors) != len(want.Tensors) || len(got.Warnings) != 0 ||
				strings.Join(got.Shards, ",") != strings.Join(want.Shards, ",") {
				t.Fatalf("got %s, %d tensors, shards %v, warnings %v", got.Format, len(got.Tensors), got.Shards, got.Warnings)
			}
			for i, tw := range want.Tensors {
				tg := got.Tensors[i]
				a, err := tw.ReadAll()
				if err != nil {
					t.Fatal(err)
				}
				b, err := tg.ReadAll()
				if err != nil {
					t.Fatal(err)
				}
				if tg.Name != tw.Name || string(a) != string(b) {
					t.Fatalf("tensor %s: data differs", tw.Name)
				}
				if tg.Storage != nil && !strings.HasPrefix(tg.Storage.File, "mem://") {
					t.Fatalf("storage file %q, want the FS's display name", tg.Storage.File)
				}
			}
			checked := 0
			for _, tn := range got.Tensors {
				n, err := tn.VerifyChunks(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				checked += n
			}
			if checked != 45 {
				t.Errorf("%d CRC32s checked, want 45", checked)
			}
		})
	}
}

// countingFS counts the bytes read from each file of a dirFS.
type countingFS struct {
	*dirFS
	mu     sync.Mutex
	read   map[string]int64
	ranges map[string][][2]int64 // [off, end) of each read
}

type countingFile struct {
	File
	fs   *countingFS
	name string
}

func (f countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.fs.mu.Lock()
	f.fs.read[f.name] += int64(n)
	if f.fs.ranges != nil {
		f.fs.ranges[f.name] = append(f.fs.ranges[f.name], [2]int64{off, off + int64(len(p))})
	}
	f.fs.mu.Unlock()
	return n, err
}

func (c *countingFS) OpenFile(name string) (File, error) {
	f, err := c.dirFS.OpenFile(name)
	if err != nil {
		return nil, err
	}
	return countingFile{f, c, name}, nil
}

func (c *countingFS) take() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.read
	c.read = map[string]int64{}
	c.ranges = map[string][][2]int64{}
	return r
}

// A rank's slice of a row-sharded DCP tensor, opened through an FS, reads
// only the file of the rank that saved those rows, and only within its
// chunk's bytes (the zip's headers and the rows).
func TestOpenFSDCPRankSliceReadsItsFile(t *testing.T) {
	rules, err := ParseSplitRules("model.embed.weight=0")
	if err != nil {
		t.Fatal(err)
	}
	for rank := range 4 {
		fsys := &countingFS{dirFS: &dirFS{root: dcpFixtures}, read: map[string]int64{}}
		ck, err := OpenFS(fsys, "basic")
		if err != nil {
			t.Fatal(err)
		}
		chunk := ck.Tensor("model.embed.weight").Chunks()[rank]
		rc, err := RankCheckpoint(ck, rank, 4, rules)
		if err != nil {
			t.Fatal(err)
		}
		fsys.take() // what Open read: the metadata and the non-tensor values
		b, err := rc.Tensor("model.embed.weight").ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		read := fsys.take()
		own := fmt.Sprintf("basic/__%d_0.distcp", rank)
		if len(b) == 0 || read[own] == 0 || len(read) != 1 {
			t.Errorf("rank %d: read %v for %d bytes, want only %s", rank, read, len(b), own)
		}
		for _, r := range fsys.ranges[own] {
			if r[0] < chunk.Begin || r[1] > chunk.Begin+chunk.Length {
				t.Errorf("rank %d: read %d:%d of %s, outside its chunk %d+%d", rank, r[0], r[1], own, chunk.Begin, chunk.Length)
			}
		}
		t.Logf("rank %d: %d bytes of the tensor, %v read", rank, len(b), read)
		ck.Close()
	}
}

// A .distcp file missing from the FS is a warning naming it, and reading
// a tensor stored in it fails naming the FS's directory.
func TestOpenFSDCPMissingFile(t *testing.T) {
	fsys := &missingFS{dirFS: &dirFS{root: dcpFixtures}, gone: "basic/__2_0.distcp"}
	ck, err := OpenFS(fsys, "basic")
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if len(ck.Warnings) == 0 || !strings.Contains(strings.Join(ck.Warnings, "\n"), "__2_0.distcp") {
		t.Fatalf("warnings %v", ck.Warnings)
	}
	_, err = ck.Tensor("model.embed.weight").ReadAll()
	if !errors.Is(err, ErrMissingRecord) || !strings.Contains(err.Error(), "mem://basic") || !strings.Contains(err.Error(), "__2_0.distcp") {
		t.Fatalf("got %v", err)
	}
	t.Log(err)
}

type missingFS struct {
	*dirFS
	gone string
}

func (m *missingFS) OpenFile(name string) (File, error) {
	if name == m.gone {
		return nil, fmt.Errorf("open mem://%s: no such object", name)
	}
	return m.dirFS.OpenFile(name)
}
