package digest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"testing"

	"github.com/cespare/xxhash/v2"
)

const (
	prime32 = 2654435761
	prime64 = 11400714785074694797
)

// sanityBuffer fills the buffer xxHash's own self-test (xxhsum -b) uses.
func sanityBuffer(n int) []byte {
	b := make([]byte, n)
	gen := uint64(prime32)
	for i := range b {
		b[i] = byte(gen >> 56)
		gen *= prime64
	}
	return b
}

func xxh64(b []byte, seed uint64) uint64 {
	h := xxhash.NewWithSeed(seed)
	h.Write(b)
	return h.Sum64()
}

// TestXXH64Vectors checks the XXH64 primitive against published values:
// xxHash's own sanity table (cli/xsum_sanity_check.c) and the widely quoted
// string vectors.
func TestXXH64Vectors(t *testing.T) {
	buf := sanityBuffer(222)
	for _, v := range []struct {
		n    int
		seed uint64
		want uint64
	}{
		{0, 0, 0xEF46DB3751D8E999},
		{0, prime32, 0xAC75FDA2929B17EF},
		{1, 0, 0xE934A84ADB052768},
		{1, prime32, 0x5014607643A9B4C3},
		{4, 0, 0x9136A0DCA57457EE},
		{14, 0, 0x8282DCC4994E35C8},
		{14, prime32, 0xC3BD6BF63DEB6DF0},
		{222, 0, 0xB641AE8CB691C174},
		{222, prime32, 0x20CB8AB7AE10C14A},
	} {
		if got := xxh64(buf[:v.n], v.seed); got != v.want {
			t.Errorf("XXH64(sanity[:%d], %d) = %016x, want %016x", v.n, v.seed, got, v.want)
		}
	}
	for _, v := range []struct {
		s    string
		want uint64
	}{
		{"", 0xef46db3751d8e999},
		{"a", 0xd24ec4f1a98c6e5b},
		{"abc", 0x44bc2cf5ad770999},
	} {
		if got := xxh64([]byte(v.s), 0); got != v.want {
			t.Errorf("XXH64(%q, 0) = %016x, want %016x", v.s, got, v.want)
		}
	}
}

// reference computes xxh64c exactly as docs/checksum.md words it, with no
// sharing of code with the package.
func reference(b []byte) Value {
	var list []byte
	for i := 0; i*ChunkSize < len(b); i++ {
		chunk := b[i*ChunkSize : min(len(b), (i+1)*ChunkSize)]
		list = binary.LittleEndian.AppendUint64(list, xxh64(chunk, uint64(i)))
	}
	return Value(xxh64(list, uint64(len(b))))
}

// pattern is the golden-vector input of docs/checksum.md: byte i is i mod 251.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

var sizes = []int{0, 1, 31, 32, 33, ChunkSize - 1, ChunkSize, ChunkSize + 1,
	3*ChunkSize + 5, batchChunks * ChunkSize, batchChunks*ChunkSize + 1, 40*ChunkSize + 12345}

func allWays(t *testing.T, b []byte) []Value {
	t.Helper()
	var out []Value
	out = append(out, SumBytes(b))
	for _, c := range []int{1, 2, 3, 8} {
		v, err := Sum(context.Background(), bytes.NewReader(b), int64(len(b)), WithConcurrency(c))
		if err != nil {
			t.Fatalf("Sum(concurrency %d): %v", c, err)
		}
		out = append(out, v)
	}
	for _, step := range []int{1, 7, 4096, ChunkSize, ChunkSize + 3, 3 * ChunkSize, 4*ChunkSize + 7, 5 * ChunkSize, 8 * ChunkSize, 9*ChunkSize + 5, len(b) + 1} {
		if step == 1 && len(b) > 3*ChunkSize {
			continue
		}
		d, err := New(int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(b); off += step {
			if _, err := d.Write(b[off:min(len(b), off+step)]); err != nil {
				t.Fatalf("Write: %v", err)
			}
		}
		v, err := d.Sum()
		if err != nil {
			t.Fatalf("Digest.Sum: %v", err)
		}
		out = append(out, v)
	}
	var sums []uint64
	for i := 0; i*ChunkSize < len(b); i++ {
		sums = append(sums, ChunkSum(b[i*ChunkSize:min(len(b), (i+1)*ChunkSize)], uint64(i)))
	}
	v, err := Combine(int64(len(b)), sums)
	if err != nil {
		t.Fatal(err)
	}
	return append(out, v)
}

func TestAllWaysMatchDefinition(t *testing.T) {
	for _, n := range sizes {
		b := pattern(n)
		want := reference(b)
		for i, got := range allWays(t, b) {
			if got != want {
				t.Errorf("size %d, way %d: %v, want %v", n, i, got, want)
			}
		}
	}
}

// TestEmpty: empty input has no chunks, so its digest is XXH64 of nothing
// seeded with 0, the published ef46db3751d8e999.
func TestEmpty(t *testing.T) {
	if got := SumBytes(nil).String(); got != "xxh64c:ef46db3751d8e999" {
		t.Fatalf("empty = %s", got)
	}
}

// TestGolden pins the values published in docs/checksum.md for the GPU
// kernel and other implementations to check against. They were produced by
// testdata/xxh64c_ref.py, an independent XXH64 written from the xxHash
// specification, not by this package.
func TestGolden(t *testing.T) {
	for _, g := range []struct {
		n    int
		want string
	}{
		{0, "xxh64c:ef46db3751d8e999"},
		{1, "xxh64c:2bd61d69b2d5b113"},
		{ChunkSize, "xxh64c:7990f12df5a54be3"},
		{ChunkSize + 1, "xxh64c:dec45b7769639697"},
		{1 << 20, "xxh64c:429de818f75f00f4"},
		{3*ChunkSize + 100, "xxh64c:2c955a3f3ce9a7ea"},
	} {
		if got := SumBytes(pattern(g.n)).String(); got != g.want {
			t.Errorf("pattern(%d) = %s, want %s", g.n, got, g.want)
		}
	}
}

func TestSensitivity(t *testing.T) {
	b := pattern(4 * ChunkSize)
	base := SumBytes(b)
	// Swapping two whole chunks keeps the multiset of chunks but moves
	// them: the index seeds must catch it.
	sw := bytes.Clone(b)
	copy(sw[:ChunkSize], b[ChunkSize:2*ChunkSize])
	copy(sw[ChunkSize:2*ChunkSize], b[:ChunkSize])
	if SumBytes(sw) == base {
		t.Error("swapping chunks 0 and 1 did not change the digest")
	}
	flip := bytes.Clone(b)
	flip[3*ChunkSize+17] ^= 1
	if SumBytes(flip) == base {
		t.Error("one flipped bit did not change the digest")
	}
	// A zero-filled tail is a different input of a different length.
	z := make([]byte, 100)
	if SumBytes(z) == SumBytes(z[:99]) {
		t.Error("length not bound")
	}
}

func TestParse(t *testing.T) {
	v := Value(0x0123456789abcdef)
	if s := v.String(); s != "xxh64c:0123456789abcdef" {
		t.Fatalf("String = %q", s)
	}
	if got, err := Parse("xxh64c:0123456789ABCDEF"); err != nil || got != v {
		t.Fatalf("Parse = %v, %v", got, err)
	}
	for _, bad := range []string{"", "xxh64c:", "xxh64c:0123456789abcde", "xxh64c:0123456789abcdef0",
		"xxh64:0123456789abcdef", "XXH64C:0123456789abcdef", "xxh64c:0123456789abcdeg", "xxh64c:+123456789abcdef",
		" xxh64c:0123456789abcdef"} {
		if _, err := Parse(bad); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) error = %v, want ErrSyntax", bad, err)
		}
	}
}

type errReaderAt struct{ err error }

func (e errReaderAt) ReadAt(p []byte, off int64) (int, error) { return 0, e.err }

func TestErrors(t *testing.T) {
	ctx := context.Background()
	b := pattern(3*ChunkSize + 10)

	_, err := Sum(ctx, bytes.NewReader(b), int64(len(b))+5)
	var le *LengthError
	if !errors.As(err, &le) || !errors.Is(err, ErrLength) || le.Got != int64(len(b)) || le.Declared != int64(len(b))+5 {
		t.Errorf("short input: %v", err)
	}
	boom := errors.New("boom")
	if _, err := Sum(ctx, errReaderAt{boom}, 10); !errors.Is(err, boom) {
		t.Errorf("read error not wrapped: %v", err)
	}
	if _, err := Sum(ctx, bytes.NewReader(b), -1); !errors.Is(err, ErrSize) {
		t.Errorf("negative size: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Sum(cctx, bytes.NewReader(b), int64(len(b))); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	// Reading a prefix of a longer input is fine and is that prefix's digest.
	if v, err := Sum(ctx, bytes.NewReader(b), 100); err != nil || v != SumBytes(b[:100]) {
		t.Errorf("prefix: %v %v", v, err)
	}

	if _, err := New(-1); !errors.Is(err, ErrSize) {
		t.Errorf("New(-1): %v", err)
	}
	d, _ := New(5)
	if _, err := d.Sum(); !errors.Is(err, ErrLength) {
		t.Errorf("early Sum: %v", err)
	}
	if n, err := d.Write(make([]byte, 6)); n != 0 || !errors.Is(err, ErrLength) {
		t.Errorf("overlong Write: %d %v", n, err)
	}
	d.Write([]byte("abcde"))
	if v, err := d.Sum(); err != nil || v != SumBytes([]byte("abcde")) {
		t.Errorf("Sum after rejected write: %v %v", v, err)
	}
	if _, err := Combine(ChunkSize+1, []uint64{1}); !errors.Is(err, ErrChunkCount) {
		t.Errorf("Combine count: %v", err)
	}
	if _, err := Combine(-1, nil); !errors.Is(err, ErrSize) {
		t.Errorf("Combine size: %v", err)
	}
}

// FuzzSum checks that every way of computing the digest agrees with the
// definition, on inputs stretched past several chunk and batch boundaries.
func FuzzSum(f *testing.F) {
	f.Add([]byte("abc"), uint16(0), uint32(1))
	f.Add([]byte{}, uint16(5), uint32(0))
	f.Add(pattern(251), uint16(300), uint32(65536))
	f.Add(pattern(4096), uint16(200), uint32(70000))
	f.Fuzz(func(t *testing.T, seed []byte, reps uint16, step uint32) {
		b := bytes.Repeat(seed, int(reps)%400+1)
		if len(b) > 20*ChunkSize {
			b = b[:20*ChunkSize]
		}
		want := reference(b)
		if got := SumBytes(b); got != want {
			t.Fatalf("SumBytes %v want %v", got, want)
		}
		got, err := Sum(context.Background(), bytes.NewReader(b), int64(len(b)), WithConcurrency(3))
		if err != nil || got != want {
			t.Fatalf("Sum %v %v want %v", got, err, want)
		}
		s := int(step%(3*ChunkSize)) + 1
		d, _ := New(int64(len(b)))
		for off := 0; off < len(b); off += s {
			d.Write(b[off:min(len(b), off+s)])
		}
		if got, err := d.Sum(); err != nil || got != want {
			t.Fatalf("Digest step %d: %v %v want %v", s, got, err, want)
		}
	})
}

func FuzzParse(f *testing.F) {
	f.Add("xxh64c:ef46db3751d8e999")
	f.Add("xxh64c:EF46DB3751D8E999")
	f.Add("xxh64c:")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("Parse(%q) = %v", s, err)
			}
			return
		}
		if back, err := Parse(v.String()); err != nil || back != v {
			t.Fatalf("round trip of %q: %v %v", s, back, err)
		}
	})
}

func benchData() []byte { return pattern(64 << 20) }

// BenchmarkSum reports GB/s (b.SetBytes) for xxh64c on one goroutine and on
// all of GOMAXPROCS, against CRC32-IEEE over the same bytes.
func BenchmarkSum(b *testing.B) {
	data := benchData()
	ctx := context.Background()
	b.Run("xxh64c/serial", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := Sum(ctx, bytes.NewReader(data), int64(len(data)), WithConcurrency(1)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("xxh64c/parallel", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := Sum(ctx, bytes.NewReader(data), int64(len(data))); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("xxh64c/digest-writer", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			d, _ := New(int64(len(data)))
			if _, err := io.Copy(d, bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("crc32-ieee/serial", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			crc32.ChecksumIEEE(data)
		}
	})
}
