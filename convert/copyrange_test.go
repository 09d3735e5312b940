package convert

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/atomicfile"
	"github.com/ckpt-dev/ckpt/statedict"
)

// withRangeCopy runs fn with the range copy (the default kind) on for
// every size (on) or off, and returns the bytes it copied.
func withRangeCopy(on bool, fn func()) int64 {
	mode := copyOff
	if on {
		mode = copyDefault
	}
	return withCopyMode(mode, fn)
}

// copyMode is how withCopyMode has bytes in place in a local file
// copied.
type copyMode int

const (
	copyOff     copyMode = iota // read through the buffers
	copyKernel                  // copy_file_range, the output read back for the checks
	copyPiped                   // read into small buffers through the checks, written from them
	copyDefault                 // whichever atomicfile.PipedCopy chooses
)

func (m copyMode) String() string {
	return [...]string{"off", "kernel", "piped", "default"}[m]
}

// withCopyMode runs fn with the range copy in mode for every size, and
// returns the bytes it copied.
func withCopyMode(mode copyMode, fn func()) int64 {
	oldMin, oldOff, oldPiped := atomicfile.MinRangeCopy, atomicfile.NoRangeCopy, atomicfile.PipedCopy
	defer func() {
		atomicfile.MinRangeCopy, atomicfile.NoRangeCopy, atomicfile.PipedCopy = oldMin, oldOff, oldPiped
	}()
	atomicfile.MinRangeCopy, atomicfile.NoRangeCopy = 1, mode == copyOff
	if mode == copyKernel || mode == copyPiped {
		atomicfile.PipedCopy = mode == copyPiped
	}
	before := atomicfile.RangeCopies.Load()
	fn()
	return atomicfile.RangeCopies.Load() - before
}

// TestRangeCopySameBytes: outputs written with the in-kernel copy and
// with the piped copy are byte for byte those written by reading, single files and shards, from
// zip, legacy, safetensors and big-endian inputs; the copy is taken for
// bytes stored in place (the counter moves) and not for a deflated
// record, which is read.
func TestRangeCopySameBytes(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		copies  bool
	}{
		{"training.pt", true}, {"tied.pt", true}, {"old_storage_view.pt", true}, {"legacy.pt", true}, {"tar.pt", true},
		{"model.safetensors", true}, {"zip_deflated.pt", false},
		// Only its one-byte elements need no swap.
		{"zip_bigendian.pt", true},
	} {
		in := fixtures + tc.fixture
		if _, err := os.Stat(in); err != nil {
			t.Fatalf("%s: %v", tc.fixture, err)
		}
		for _, shard := range []int64{0, 200} {
			var got [3]map[string][]byte
			var copied [3]int64
			for i, mode := range []copyMode{copyOff, copyKernel, copyPiped} {
				dir := t.TempDir()
				out := filepath.Join(dir, "o.safetensors")
				opts := []Option{}
				if shard > 0 {
					out = dir
					opts = append(opts, WithMaxShardSize(shard), WithFormat(Safetensors))
				}
				copied[i] = withCopyMode(mode, func() { convert(t, in, out, opts...) })
				got[i] = readDir(t, dir)
			}
			for i := 1; i < 3; i++ {
				if len(got[0]) == 0 || len(got[0]) != len(got[i]) {
					t.Fatalf("%s shard %d: files %d vs %d", tc.fixture, shard, len(got[0]), len(got[i]))
				}
				for n, b := range got[0] {
					if !bytes.Equal(b, got[i][n]) {
						t.Errorf("%s shard %d: %s differs with the %s copy", tc.fixture, shard, n, copyMode(i))
					}
				}
				if copied[0] != 0 || (copied[i] > 0) != tc.copies {
					t.Errorf("%s shard %d: copied %d bytes off, %d with the %s copy; want a copy %v", tc.fixture, shard, copied[0], copied[i], copyMode(i), tc.copies)
				}
			}
		}
	}
}

// TestRangeCopyChecksCRC: a stored record with a flipped byte is refused
// with the in-kernel and the piped copy as without them (ErrDamaged naming the record),
// and nothing is left at the destination.
func TestRangeCopyChecksCRC(t *testing.T) {
	for rec, b := range damagedCopies(t, fixtures+"training.pt") {
		in, outDir := writeDamaged(t, b)
		var msgs [3]string
		for i, mode := range []copyMode{copyOff, copyKernel, copyPiped} {
			var err error
			n := withCopyMode(mode, func() {
				_, err = Convert(context.Background(), open(t, in), filepath.Join(outDir, "o.safetensors"))
			})
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), rec) {
				t.Errorf("%s damaged, copy %v: %v", rec, mode, err)
			}
			if mode != copyOff && n == 0 {
				t.Errorf("%s damaged: the copy was not taken", rec)
			}
			if files := dirFiles(t, outDir); len(files) != 0 {
				t.Errorf("left %v", files)
			}
			msgs[i] = err.Error()
		}
		if msgs[0] != msgs[1] || msgs[0] != msgs[2] {
			t.Errorf("messages differ:\n%s\n%s\n%s", msgs[0], msgs[1], msgs[2])
		}
	}
}

// TestRangeCopyChecksDigest: a safetensors input whose bytes disagree
// with the digest it records is refused with either copy, by name.
func TestRangeCopyChecksDigest(t *testing.T) {
	for _, mode := range []copyMode{copyKernel, copyPiped} {
		t.Run(mode.String(), func(t *testing.T) { testRangeCopyChecksDigest(t, mode) })
	}
}

func testRangeCopyChecksDigest(t *testing.T, mode copyMode) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.safetensors")
	convert(t, fixtures+"training.pt", src)
	b, _ := os.ReadFile(src)
	b[len(b)-3] ^= 1 // in the last tensor's bytes
	bad := filepath.Join(dir, "bad.safetensors")
	os.WriteFile(bad, b, 0o644)
	outDir := filepath.Join(dir, "out")
	os.Mkdir(outDir, 0o755)
	var err error
	if withCopyMode(mode, func() {
		_, err = Convert(context.Background(), open(t, bad), filepath.Join(outDir, "o.safetensors"))
	}) == 0 {
		t.Error("the copy was not taken")
	}
	if !errors.Is(err, ErrDamaged) {
		t.Errorf("got %v, want ErrDamaged", err)
	}
	if files := dirFiles(t, outDir); len(files) != 0 {
		t.Errorf("left %v", files)
	}
}

// TestRangeCopyNotAFile: an input read through an io.ReaderAt that is not
// a file is read, not copied, and gives the same bytes.
func TestRangeCopyNotAFile(t *testing.T) {
	b, err := os.ReadFile(fixtures + "training.pt")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var outs [2][]byte
	for i, name := range []string{"file.safetensors", "mem.safetensors"} {
		var ck *statedict.Checkpoint
		if i == 0 {
			ck = open(t, fixtures+"training.pt")
		} else if ck, err = statedict.NewReader(bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
		n := withRangeCopy(true, func() {
			if _, err := Convert(context.Background(), ck, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		})
		if (n > 0) != (i == 0) {
			t.Errorf("%s: copied %d bytes", name, n)
		}
		outs[i], _ = os.ReadFile(filepath.Join(dir, name))
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Error("outputs differ")
	}
}
