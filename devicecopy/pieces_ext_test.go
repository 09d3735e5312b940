package devicecopy_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ckpt-dev/ckpt/convert"
	"github.com/ckpt-dev/ckpt/devicecopy"
	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

// pieceReaderAt serves data as an object store does
// (statedict.PieceReaderAt): it reports each read in pieces of random,
// unaligned sizes, in a random order, some of them twice (a retried
// request).
type pieceReaderAt struct {
	data []byte

	mu     sync.Mutex
	rng    *rand.Rand
	calls  int
	pieces int
}

func (r *pieceReaderAt) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(r.data).ReadAt(p, off)
}

func (r *pieceReaderAt) ReadAtPieces(p []byte, off int64, landed func([]byte, int64)) (int, error) {
	n, err := r.ReadAt(p, off)
	r.mu.Lock()
	r.calls++
	var cuts []int
	for k := 0; k < n; k += 1 + r.rng.Intn(300<<10) {
		cuts = append(cuts, k)
	}
	cuts = append(cuts, n)
	order := r.rng.Perm(len(cuts) - 1)
	again := r.rng.Perm(len(cuts) - 1)[:len(cuts)/4]
	r.pieces += len(order) + len(again)
	r.mu.Unlock()
	for _, k := range append(order, again...) {
		landed(p[cuts[k]:cuts[k+1]], off+int64(cuts[k]))
	}
	return n, err
}

// writePth converts a generated safetensors file to a torch zip (a CRC32 for
// every record; payloads aligned to 64 bytes, not to digest chunks), and
// returns its bytes.
func writePth(t *testing.T) []byte {
	t.Helper()
	src := writeSafetensors(t, 3, 17<<20) // two segments each
	ck, err := statedict.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	out := filepath.Join(t.TempDir(), "model.pt")
	if _, err := convert.Convert(context.Background(), ck, out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recordOffset returns where the payload of the zip record name starts.
func recordOffset(t *testing.T, data []byte, name string) int64 {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range zr.File {
		if f.Name == name {
			off, err := f.DataOffset()
			if err != nil {
				t.Fatal(err)
			}
			return off
		}
	}
	t.Fatalf("no record %s", name)
	return 0
}

// loadFrom opens the checkpoint of size bytes that r serves and loads
// every tensor to host memory.
func loadFrom(t *testing.T, r io.ReaderAt, size int64) (*devicecopy.HostResult, error) {
	t.Helper()
	ck, err := statedict.NewReader(r, size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	plan, err := remap.NewPlan(ck.Tensors, remap.To(remap.Device{Type: "cpu", Index: -1}))
	if err != nil {
		t.Fatal(err)
	}
	return devicecopy.LoadHost(context.Background(), ck, plan)
}

// TestLoadHostPieces loads storages from a reader that reports its reads
// piece by piece, out of order and with repeats, as objstore does, and
// checks that the CRC32 and digest LoadHost computes from the pieces are
// those of the bytes, and that a damaged byte is still caught.
func TestLoadHostPieces(t *testing.T) {
	data := writePth(t)
	r := &pieceReaderAt{data: data, rng: rand.New(rand.NewSource(3))}
	res, err := loadFrom(t, r, int64(len(r.data)))
	if err != nil {
		t.Fatal(err)
	}
	if r.calls == 0 || r.pieces <= r.calls {
		t.Fatalf("%d ReadAtPieces calls, %d pieces: the storages were not read by pieces", r.calls, r.pieces)
	}
	if len(res.Storages) != 3 {
		t.Fatalf("%d storages", len(res.Storages))
	}
	for _, hs := range res.Storages {
		if !hs.CRCChecked {
			t.Errorf("storage %s: CRC32 not checked", hs.Storage.Key)
		}
		if want := digest.SumBytes(hs.Data); hs.Digest != want {
			t.Errorf("storage %s: digest %v, want %v", hs.Storage.Key, hs.Digest, want)
		}
		if i := recordOffset(t, data, hs.Storage.Record); !bytes.Equal(data[i:i+int64(len(hs.Data))], hs.Data) {
			t.Errorf("storage %s: bytes differ from the file's", hs.Storage.Key)
		}
	}

	// Damage one byte of the middle storage: the CRC32 combined from the
	// pieces must disagree with the archive's.
	hs := res.Storages[1]
	start := recordOffset(t, data, hs.Storage.Record)
	at := start + int64(len(hs.Data)) - 70000
	bad := append([]byte(nil), data...)
	bad[at] ^= 0x20
	r = &pieceReaderAt{data: bad, rng: rand.New(rand.NewSource(4))}
	_, err = loadFrom(t, r, int64(len(r.data)))
	var ce *devicecopy.CRCError
	if !errors.As(err, &ce) || ce.Storage != hs.Storage.Key {
		t.Fatalf("damaged storage: got %v, want a CRC error for storage %s", err, hs.Storage.Key)
	}
	if want := crc32.ChecksumIEEE(bad[start : start+int64(len(hs.Data))]); ce.Got != want || ce.Want != hs.Storage.CRC32 {
		t.Errorf("CRC error got %08x want %08x; expected got %08x want %08x", ce.Got, ce.Want, want, hs.Storage.CRC32)
	}
}

// slowFirstReaderAt holds its first large read until others have
// completed (or a timeout), as a slow request does.
type slowFirstReaderAt struct {
	r        io.ReaderAt
	mu       sync.Mutex
	first    bool
	others   int
	release  chan struct{}
	timedOut bool // the slow read gave up waiting for the others
}

func (s *slowFirstReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if len(p) < 8<<20 {
		return s.r.ReadAt(p, off)
	}
	s.mu.Lock()
	first := !s.first
	s.first = true
	s.mu.Unlock()
	if first {
		select {
		case <-s.release:
		case <-time.After(60 * time.Second):
			s.mu.Lock()
			s.timedOut = true
			s.mu.Unlock()
		}
		return s.r.ReadAt(p, off)
	}
	n, err := s.r.ReadAt(p, off)
	s.mu.Lock()
	s.others++
	if s.others == devicecopy.StreamDepth {
		close(s.release)
	}
	s.mu.Unlock()
	return n, err
}

// TestLoadHostSlowRequest: one slow segment read does not hold up the
// others: while the first waits, StreamDepth more complete (with a window
// of StreamDepth segments started in order and taken out in order, at
// most StreamDepth-1 could).
func TestLoadHostSlowRequest(t *testing.T) {
	size := int64(devicecopy.StreamDepth+2) * devicecopy.SegmentSize
	data, err := os.ReadFile(writeSafetensors(t, 1, size))
	if err != nil {
		t.Fatal(err)
	}
	r := &slowFirstReaderAt{r: bytes.NewReader(data), release: make(chan struct{})}
	res, err := loadFrom(t, r, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	// The slow read is released only once StreamDepth others completed
	// (or after a minute): whether it had to give up says whether the
	// others waited for it, whatever the machine's load.
	if r.timedOut {
		t.Errorf("only %d reads completed while the first was held: the other reads waited for the slow one", r.others)
	}
	if want := digest.SumBytes(data[int64(len(data))-size:]); res.Storages[0].Digest != want {
		t.Errorf("digest %v, want %v", res.Storages[0].Digest, want)
	}
}
