package ieeecrc

import (
	"hash/crc32"
	"math/bits"
	"math/rand"
	"testing"
)

// xpowRef is x^n modulo the IEEE polynomial, in normal bit order, one
// shift at a time.
func xpowRef(n int) uint32 {
	r := uint64(1)
	for range n {
		r <<= 1
		if r&(1<<32) != 0 {
			r ^= 0x104C11DB7
		}
	}
	return uint32(r)
}

// TestConstants derives fold_amd64.s's constants from the polynomial.
func TestConstants(t *testing.T) {
	k := func(n int) uint64 { return uint64(bits.Reverse32(xpowRef(n))) << 1 }
	for _, c := range []struct {
		d      int
		lo, hi uint64
	}{{2048, 0x11542778a, 0x1322d1430}, {512, 0x154442bd4, 0x1c6e41596}} {
		if k(c.d+32) != c.lo || k(c.d-32) != c.hi {
			t.Errorf("D=%d: constants %#x %#x, derived %#x %#x", c.d, c.lo, c.hi, k(c.d+32), k(c.d-32))
		}
	}
}

// TestUpdateMatchesStdlib compares Update with hash/crc32 on random data
// of many lengths, split at random points, from random initial values;
// on a CPU without the vector path it compares the stdlib with itself and
// says so.
func TestUpdateMatchesStdlib(t *testing.T) {
	if !haveFold4 {
		t.Log("no AVX-512 VPCLMULQDQ here: Update is hash/crc32's")
	}
	r := rand.New(rand.NewSource(1))
	buf := make([]byte, 3<<20+77)
	r.Read(buf)
	lengths := []int{0, 1, 255, 256, minVector - 1, minVector, minVector + 1, minVector + 255, minVector + 256, 8191, 65536, 1 << 20, len(buf)}
	for range 200 {
		lengths = append(lengths, r.Intn(len(buf)))
	}
	for _, n := range lengths {
		off := r.Intn(64)
		if off+n > len(buf) {
			off = 0
		}
		p := buf[off : off+n]
		init := r.Uint32()
		if got, want := Update(init, p), crc32.Update(init, crc32.IEEETable, p); got != want {
			t.Fatalf("Update(%#x, %d bytes at %d) = %#x, want %#x", init, n, off, got, want)
		}
		h := New()
		cut := r.Intn(n + 1)
		h.Write(p[:cut])
		h.Write(p[cut:])
		if got, want := h.Sum32(), crc32.ChecksumIEEE(p); got != want {
			t.Fatalf("New over %d bytes cut at %d = %#x, want %#x", n, cut, got, want)
		}
		if got, want := Checksum(p), crc32.ChecksumIEEE(p); got != want {
			t.Fatalf("Checksum(%d bytes) = %#x, want %#x", n, got, want)
		}
	}
}

// TestFold4Flips checks that one flipped bit anywhere changes the CRC as
// hash/crc32 says (the chains each cover their own bytes).
func TestFold4Flips(t *testing.T) {
	p := make([]byte, 16<<10)
	rand.New(rand.NewSource(2)).Read(p)
	for _, i := range []int{0, 3, 4, 63, 64, 200, 255, 256, 511, 4095, 8192, len(p) - 257, len(p) - 1} {
		p[i] ^= 0x10
		if got, want := Checksum(p), crc32.ChecksumIEEE(p); got != want {
			t.Fatalf("bit flipped at %d: %#x, want %#x", i, got, want)
		}
		p[i] ^= 0x10
	}
}

func FuzzUpdate(f *testing.F) {
	f.Add(uint32(0), make([]byte, 5000))
	f.Fuzz(func(t *testing.T, init uint32, p []byte) {
		if got, want := Update(init, p), crc32.Update(init, crc32.IEEETable, p); got != want {
			t.Fatalf("Update(%#x, %d bytes) = %#x, want %#x", init, len(p), got, want)
		}
	})
}

func BenchmarkUpdate(b *testing.B) {
	p := make([]byte, 256<<10)
	b.Run("ieeecrc", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			Update(0, p)
		}
	})
	b.Run("stdlib", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			crc32.ChecksumIEEE(p)
		}
	})
}

// TestCombine joins the CRCs of two pieces cut anywhere.
func TestCombine(t *testing.T) {
	p := make([]byte, 100000)
	rand.New(rand.NewSource(3)).Read(p)
	for _, cut := range []int{0, 1, 7, 4096, 50001, len(p) - 1, len(p)} {
		a, b := crc32.ChecksumIEEE(p[:cut]), crc32.ChecksumIEEE(p[cut:])
		if got, want := Combine(a, b, int64(len(p)-cut)), crc32.ChecksumIEEE(p); got != want {
			t.Fatalf("cut at %d: %#x, want %#x", cut, got, want)
		}
	}
}
