package convert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"unsafe"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/safetensors"
	"github.com/ckpt-dev/ckpt/statedict"
)

// rowAdd adds 0.25 * row + 0.001 * column to the tensors named, as a
// RowTransform (the row streamed a block at a time) and through Apply.
type rowAdd map[string]int64 // name -> columns

func (a rowAdd) Transforms(t *statedict.Tensor) bool { return a[t.Name] > 0 }

func (a rowAdd) Apply(_ context.Context, t *statedict.Tensor, v []float32) error {
	cols := a[t.Name]
	for i := range v {
		v[i] += 0.25*float32(int64(i)/cols) + 0.001*float32(int64(i)%cols)
	}
	return nil
}

func (a rowAdd) RowCols(t *statedict.Tensor) int64 { return a[t.Name] }

func (a rowAdd) MergeRows(_ context.Context, t *statedict.Tensor) (func([]byte, dtype.DType, []byte, int64, int64), func(), error) {
	cols := a[t.Name]
	return func(dst []byte, to dtype.DType, src []byte, r0, r1 int64) {
		v := make([]float32, (r1-r0)*cols)
		dtype.DecodeFloat32(t.DType, v, src)
		for i := range v {
			v[i] += 0.25*float32(r0+int64(i)/cols) + 0.001*float32(int64(i)%cols)
		}
		dtype.EncodeFloat32(to, dst, v)
	}, func() {}, nil
}

// wholeOnly hides rowAdd's row methods: every tensor goes through Apply.
type wholeOnly struct{ TensorTransform }

// TestRowTransformStreams: a RowTransform's tensors, streamed a block of
// rows at a time (several blocks, the last one short, next to a tensor
// not transformed), are written with the bytes the same transform gives
// through Apply, to safetensors and .pt, cast or not; the progress counts
// every input byte.
func TestRowTransformStreams(t *testing.T) {
	dir := t.TempDir()
	in := writeRelease(t, dir, "{}", []rawTensor{
		{"big", "BF16", []int64{700, 300}, encoded(dtype.BFloat16, 700*300, 1)}, // 1.6 blocks of 256 KiB
		{"plain", "F32", []int64{10}, encoded(dtype.Float32, 10, 2)},
		{"wide", "F32", []int64{333, 257}, encoded(dtype.Float32, 333*257, 3)},
	})
	tr := rowAdd{"big": 300, "wide": 257}
	for _, ext := range []string{".safetensors", ".pt"} {
		for _, opts := range [][]Option{nil, {WithDType(dtype.Float32)}, {WithDType(dtype.BFloat16)}} {
			var read int64
			rows := filepath.Join(dir, "rows"+ext)
			convert(t, in, rows, append([]Option{WithTransform(tr), WithForce(true), WithProgress(func(n int64) { read += n })}, opts...)...)
			whole := filepath.Join(dir, "whole"+ext)
			convert(t, in, whole, append([]Option{WithTransform(wholeOnly{tr}), WithForce(true)}, opts...)...)
			a, err := os.ReadFile(rows)
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(whole)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Errorf("%s %d options: the row-streamed output differs from Apply's", ext, len(opts))
			}
			if want := int64(700*300*2 + 10*4 + 333*257*4); read != want {
				t.Errorf("%s: progress %d bytes, want %d", ext, read, want)
			}
			if raw := rawOf(t, rows); raw["plain float32"] != string(encoded(dtype.Float32, 10, 2)) && len(opts) == 0 {
				t.Errorf("%s: the tensor not transformed changed", ext)
			}
		}
	}
}

// TestRowStreamReadSizes: a row stream read with buffers of every kind of
// size (a byte, less than a row, ending inside a row, whole blocks and
// more, a mix), with one worker and with several, gives the bytes of the
// transform applied to the whole input at once, and the transform is
// handed whole rows, each once (in any order: Read transforms some rows
// itself beside the workers); progress
// counts every input byte; Close (twice) calls the transform's release
// once.
func TestRowStreamReadSizes(t *testing.T) {
	const cols, rows = 1000, 700 // 2000-byte bfloat16 rows; 4.5 input blocks
	src := encoded(dtype.BFloat16, cols*rows, 4)
	add := rowAdd{"w": cols}
	fn, _, err := add.MergeRows(context.Background(), &statedict.Tensor{Name: "w", DType: dtype.BFloat16})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, cols*rows*4)
	fn(want, dtype.Float32, src, 0, rows)
	for _, sizes := range [][]int{{1}, {7, 3999}, {4000}, {4001}, {70000}, {1 << 20}, {8 << 20}, {1, 65536, 333, 2 << 20, 12345}} {
		for _, workers := range []int{1, 3} {
			setRowWorkers(t, workers)
			readSizes(t, sizes, workers, fn, src, want, cols, rows)
		}
	}
}

// TestRowStreamInPlace: read with buffers larger than a block, the
// stream has every block that fits whole in the buffer transformed
// straight into it (no block computed aside and copied): the bytes the
// transform writes outside the caller's buffer are at most one row a
// Read (the row crossing its end), and the transform is only called
// while a Read is under way (nothing writes into a buffer once Read has
// returned it).
func TestRowStreamInPlace(t *testing.T) {
	const cols, rows = 1000, 700 // 4000-byte float32 rows out; blocks of 131 rows
	src := encoded(dtype.BFloat16, cols*rows, 4)
	fn, _, err := rowAdd{"w": cols}.MergeRows(context.Background(), &statedict.Tensor{Name: "w", DType: dtype.BFloat16})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, cols*rows*4)
	fn(want, dtype.Float32, src, 0, rows)
	for _, workers := range []int{1, 3} {
		setRowWorkers(t, workers)
		var mu sync.Mutex
		var cur []byte // the buffer of the Read under way; nil between Reads
		aside, late := 0, 0
		inside := func(dst []byte) bool {
			lo := uintptr(unsafe.Pointer(unsafe.SliceData(cur)))
			d := uintptr(unsafe.Pointer(unsafe.SliceData(dst)))
			return cur != nil && d >= lo && d+uintptr(len(dst)) <= lo+uintptr(len(cur))
		}
		checked := func(dst []byte, to dtype.DType, in []byte, r0, r1 int64) {
			mu.Lock()
			switch {
			case cur == nil:
				late++
			case !inside(dst):
				aside += len(dst)
			}
			mu.Unlock()
			fn(dst, to, in, r0, r1)
		}
		s := newRowStream(context.Background(), &config{}, "w", io.NopCloser(bytes.NewReader(src)), checked, dtype.Float32, cols*2, cols*4, rows)
		got, reads := readStream(t, s, []int{1 << 20}, func(buf []byte) {
			mu.Lock()
			cur = buf
			mu.Unlock()
		})
		if !bytes.Equal(got, want) {
			t.Fatalf("%d workers: the bytes read differ from the whole transform", workers)
		}
		if aside > reads*cols*4 || late > 0 {
			t.Errorf("%d workers: %d bytes transformed outside the caller's buffer in %d reads (want at most a row a read), %d calls between reads", workers, aside, reads, late)
		}
	}
}

// TestRowStreamCancelled: once the stream's context is cancelled, Read
// returns the context's error naming the tensor, and no bytes: the
// workers skip the arithmetic of the blocks placed in its buffer.
func TestRowStreamCancelled(t *testing.T) {
	const cols, rows = 1000, 700
	src := encoded(dtype.BFloat16, cols*rows, 4)
	fn, _, err := rowAdd{"w": cols}.MergeRows(context.Background(), &statedict.Tensor{Name: "w", DType: dtype.BFloat16})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newRowStream(ctx, &config{}, "w", io.NopCloser(bytes.NewReader(src)), fn, dtype.Float32, cols*2, cols*4, rows)
	buf := make([]byte, 1<<20)
	if _, err := s.Read(buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	if n, err := s.Read(buf); n != 0 || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "w") {
		t.Errorf("after cancel: %d bytes, %v; want none and the context's error naming w", n, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// setRowWorkers sets rowWorkers for the rest of the test.
func setRowWorkers(t *testing.T, n int) {
	old := rowWorkers
	rowWorkers = n
	t.Cleanup(func() { rowWorkers = old })
}

// readSizes is one case of TestRowStreamReadSizes.
func readSizes(t *testing.T, sizes []int, workers int, fn func([]byte, dtype.DType, []byte, int64, int64), src, want []byte, cols, rows int64) {
	var mu sync.Mutex
	handed := make([]int, rows)
	checked := func(dst []byte, to dtype.DType, in []byte, r0, r1 int64) {
		mu.Lock()
		if int64(len(in)) != (r1-r0)*cols*2 || int64(len(dst)) != (r1-r0)*cols*4 || r1 <= r0 || r1 > rows {
			t.Errorf("sizes %v: rows %d to %d handed %d bytes in, %d out", sizes, r0, r1, len(in), len(dst))
		}
		for r := r0; r < r1 && r < rows; r++ {
			handed[r]++
		}
		mu.Unlock()
		fn(dst, to, in, r0, r1)
	}
	var read int64
	c := &config{}
	c.progress = func(n int64) { read += n }
	s := newRowStream(context.Background(), c, "w", io.NopCloser(bytes.NewReader(src)), checked, dtype.Float32, cols*2, cols*4, rows)
	released := 0
	s.finish = func() { released++ }
	got, _ := readStream(t, s, sizes, nil)
	if s.Close(); released != 1 {
		t.Errorf("sizes %v: the transform's release called %d times, want once", sizes, released)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("sizes %v: %d bytes read, want %d, or they differ", sizes, len(got), len(want))
	}
	if read != int64(len(src)) {
		t.Errorf("sizes %v: progress %d bytes, want %d", sizes, read, len(src))
	}
	for r, k := range handed {
		if k != 1 {
			t.Fatalf("sizes %v, %d workers: row %d handed %d times, want once", sizes, workers, r, k)
		}
	}
}

// readStream reads s to its end with buffers of the sizes in turn and
// closes it, returning the bytes and the number of Reads; around, when
// not nil, is called with each Read's buffer before it and with nil after.
func readStream(t *testing.T, s *rowStream, sizes []int, around func([]byte)) ([]byte, int) {
	var got []byte
	for i := 0; ; i++ {
		buf := make([]byte, sizes[i%len(sizes)])
		if around != nil {
			around(buf)
		}
		n, err := s.Read(buf)
		if around != nil {
			around(nil)
		}
		got = append(got, buf[:n]...)
		if err == io.EOF {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return got, i + 1
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// setRowChunkBytes sets rowChunkBytes for the rest of the test.
func setRowChunkBytes(t *testing.T, n int64) {
	old := rowChunkBytes
	rowChunkBytes = n
	t.Cleanup(func() { rowChunkBytes = old })
}

// TestRowStreamWorkers: a conversion whose row-transformed tensors go in
// many small blocks (one or five rows of 600 and 1028 bytes) over several
// workers writes the file one worker writes in blocks of 256 KiB, byte for
// byte (the tensors' bytes in order, the output digests in the header),
// from an input whose digests are checked; and it is the file Apply gives.
func TestRowStreamWorkers(t *testing.T) {
	dir := t.TempDir()
	raw := writeRelease(t, dir, "{}", []rawTensor{
		{"big", "BF16", []int64{700, 300}, encoded(dtype.BFloat16, 700*300, 1)},
		{"plain", "F32", []int64{10}, encoded(dtype.Float32, 10, 2)},
		{"wide", "F32", []int64{333, 257}, encoded(dtype.Float32, 333*257, 3)},
	})
	in := filepath.Join(dir, "in.safetensors") // with ckpt's digests
	convert(t, raw, in)
	tr := rowAdd{"big": 300, "wide": 257}
	out := func(name string, opts ...Option) []byte {
		p := filepath.Join(dir, name)
		convert(t, in, p, append([]Option{WithTransform(tr)}, opts...)...)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	setRowWorkers(t, 1)
	one := out("one.safetensors")
	whole := out("whole.safetensors", WithTransform(wholeOnly{tr}))
	if !bytes.Equal(one, whole) {
		t.Fatal("one worker: the row-streamed output differs from Apply's")
	}
	for _, c := range []struct {
		chunk   int64
		workers int
	}{{1, 4}, {5 * 600, 3}, {5 * 1028, 2}, {1, 1}} {
		setRowWorkers(t, c.workers)
		setRowChunkBytes(t, c.chunk)
		if got := out(fmt.Sprintf("w%d-%d.safetensors", c.workers, c.chunk)); !bytes.Equal(got, one) {
			t.Errorf("%d workers, blocks of %d bytes: the output differs from one worker's", c.workers, c.chunk)
		}
	}
}

// TestRowStreamDamagedInput: a row-transformed tensor whose input fails
// its digest, streamed in small blocks over several workers, fails the
// conversion naming the tensor, and no output is left; an input that ends
// early fails the stream's Read (its error, not a hang) with the workers
// still busy, and Close returns.
func TestRowStreamDamagedInput(t *testing.T) {
	dir := t.TempDir()
	raw := writeRelease(t, dir, "{}", []rawTensor{
		{"big", "BF16", []int64{700, 300}, encoded(dtype.BFloat16, 700*300, 1)},
		{"wide", "F32", []int64{333, 257}, encoded(dtype.Float32, 333*257, 3)},
	})
	in := filepath.Join(dir, "in.safetensors")
	convert(t, raw, in)
	b, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	h, err := safetensors.Parse(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range h.Tensors {
		if ti.Name == "big" {
			b[h.DataOffset+(ti.Begin+ti.End)/2] ^= 0x40 // a row half way
		}
	}
	bad := filepath.Join(dir, "bad.safetensors")
	if err := os.WriteFile(bad, b, 0o644); err != nil {
		t.Fatal(err)
	}
	setRowWorkers(t, 3)
	setRowChunkBytes(t, 4*600)
	outDir := filepath.Join(dir, "out")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"o.safetensors", "o.pt"} {
		_, err := Convert(context.Background(), open(t, bad), filepath.Join(outDir, name), WithTransform(rowAdd{"big": 300, "wide": 257}))
		if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "big") {
			t.Errorf("to %s: %v, want ErrDamaged naming big", name, err)
		}
		if files := dirFiles(t, outDir); len(files) != 0 {
			t.Errorf("to %s: left %v", name, files)
		}
	}

	// A read error half way, straight on the stream.
	const cols, rows = 300, 700
	src := encoded(dtype.BFloat16, cols*rows, 1)
	fn, _, err := rowAdd{"w": cols}.MergeRows(context.Background(), &statedict.Tensor{Name: "w", DType: dtype.BFloat16})
	if err != nil {
		t.Fatal(err)
	}
	short := io.NopCloser(io.MultiReader(bytes.NewReader(src[:len(src)/2]), iotest.ErrReader(io.ErrUnexpectedEOF)))
	s := newRowStream(context.Background(), &config{}, "w", short, fn, dtype.BFloat16, cols*2, cols*2, rows)
	got, err := io.ReadAll(s)
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "w") || len(got) > len(src)/2 {
		t.Errorf("short input: %d bytes read, %v; want at most %d and the read error naming w", len(got), err, len(src)/2)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
