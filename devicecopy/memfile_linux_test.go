package devicecopy

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
)

// TestMemFileStripes writes a memory file of several stripes with
// pwrite, in pieces that cross stripe boundaries, and reads it back
// through its one mapping and with readAt: the stripes must be mapped in
// order from the files and offsets the writes put them at.
func TestMemFileStripes(t *testing.T) {
	size := int64(3*memStripe + 5*4096 + 17)
	f, err := openMemFile(size)
	if err != nil {
		t.Skipf("no memory file here: %v", err)
	}
	defer f.unmap()
	if got, want := len(f.fds), 4; got != want {
		t.Fatalf("%d files for %d stripes, want %d", got, want, want)
	}
	want := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	// Pieces of odd sizes, written out of order, as segments land.
	var cuts []int64
	for at := int64(0); at < size; at += 3<<20 + 12345 {
		cuts = append(cuts, at)
	}
	cuts = append(cuts, size)
	for _, k := range rng.Perm(len(cuts) - 1) {
		if err := f.writeAt(want[cuts[k]:cuts[k+1]], cuts[k]); err != nil {
			t.Fatal(err)
		}
	}
	back := make([]byte, 2*memStripe/3)
	for at := int64(0); at < size; at += int64(len(back)) {
		p := back[:min(int64(len(back)), size-at)]
		if err := f.readAt(p, at); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(p, want[at:at+int64(len(p))]) {
			t.Fatalf("readAt at %d differs from what was written", at)
		}
	}
	f.closeFD()
	if int64(len(f.m)) != size {
		t.Fatalf("mapping of %d bytes, want %d", len(f.m), size)
	}
	for s := int64(0); s < size; s += memStripe {
		e := min(s+memStripe, size)
		if !bytes.Equal(f.m[s:e], want[s:e]) {
			t.Fatalf("stripe at %d: the mapping differs from what was written", s)
		}
	}
}

// TestMemFileStripeSize: a file of more than maxStripes stripes gets
// longer stripes, so that its mappings stay few.
func TestMemFileStripeSize(t *testing.T) {
	size := int64(maxStripes+1) * memStripe
	f, err := openMemFile(size)
	if err != nil {
		t.Skipf("no memory file of %d bytes here: %v", size, err)
	}
	defer f.unmap()
	defer f.closeFD()
	if f.stripe != 2*memStripe || int64(f.mlen) < size || int64(f.mlen)/f.stripe > maxStripes {
		t.Fatalf("stripe %d, mapping %d bytes for %d", f.stripe, f.mlen, size)
	}
	if err := f.writeAt([]byte("tail"), size-4); err != nil {
		t.Fatal(err)
	}
	if string(f.m[size-4:]) != "tail" {
		t.Fatalf("last bytes %q through the mapping", f.m[size-4:])
	}
}

// TestMemFileTooLarge: a memory file that cannot be mapped fails with an
// error, its files closed, and does not panic.
func TestMemFileTooLarge(t *testing.T) {
	if _, err := openMemFile(1 << 62); err == nil {
		t.Fatal("a memory file of 4 EiB was made")
	}
}

// memMappings counts the process's mappings of memory files.
func memMappings(t testing.TB) int {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	return bytes.Count(maps, []byte("memfd:ckpt-load"))
}

// TestMemFileUnmapAll unmaps memory files of stripes in uneven numbers
// per file with one to three threads: every stripe must be unmapped (a
// stripe left mapped keeps its file, and its memory, until exit), and the
// bytes written must have been there until then.
func TestMemFileUnmapAll(t *testing.T) {
	defer func(n int) { memFreers = n }(memFreers)
	for _, freers := range []int{1, 2, 3} {
		memFreers = freers
		before := memMappings(t)
		f, err := openMemFile(int64(10*memStripe + 4096))
		if err != nil {
			t.Skipf("no memory file here: %v", err)
		}
		if err := f.writeAt([]byte("last"), int64(len(f.m))-4); err != nil {
			t.Fatal(err)
		}
		f.closeFD()
		if got := string(f.m[len(f.m)-4:]); got != "last" {
			t.Fatalf("%d freers: read %q through the mapping", freers, got)
		}
		if n := memMappings(t); n <= before {
			t.Fatalf("%d freers: %d mappings of memory files with one open, %d before", freers, n, before)
		}
		f.unmap()
		if n := memMappings(t); n != before {
			t.Errorf("%d freers: %d mappings of memory files left after unmap, want %d", freers, n, before)
		}
	}
}

// BenchmarkMemFileFree times unmapping (and so freeing) a 1 GiB memory
// file whose descriptors are closed, by one thread and by GOMAXPROCS.
func BenchmarkMemFileFree(b *testing.B) {
	defer func(n int) { memFreers = n }(memFreers)
	buf := make([]byte, 1<<20)
	for _, freers := range []int{1, 0} {
		b.Run(fmt.Sprintf("freers=%d", freers), func(b *testing.B) {
			memFreers = freers
			for range b.N {
				b.StopTimer()
				f, err := openMemFile(1 << 30)
				if err != nil {
					b.Skipf("no memory file here: %v", err)
				}
				for at := int64(0); at < 1<<30; at += int64(len(buf)) {
					if err := f.writeAt(buf, at); err != nil {
						b.Fatal(err)
					}
				}
				f.closeFD()
				b.StartTimer()
				f.unmap()
			}
			b.SetBytes(1 << 30)
		})
	}
}
