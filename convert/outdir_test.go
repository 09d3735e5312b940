package convert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ckpt-dev/ckpt/statedict"
)

// memDest is a Destination in memory, with the semantics of an object
// store: an object appears whole at Commit, a pending one is invisible.
// Tests of the real stores (MinIO, the GCS and Azure emulators) are in
// the root package (convert_dcp_url_test.go).
type memDest struct {
	mu      sync.Mutex
	objects map[string][]byte
	pending int // outputs created and neither committed nor aborted
	noSize  bool
}

func newMemDest() *memDest { return &memDest{objects: map[string][]byte{}} }

func (d *memDest) Exists(_ context.Context, name string) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.objects[name]
	return ok, nil
}

func (d *memDest) Create(_ context.Context, name string, head int64) (Output, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pending++
	return &memOutput{d: d, name: name}, nil
}

func (d *memDest) Remove(_ context.Context, name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.objects, name)
	return nil
}

func (d *memDest) Name(name string) string { return "mem://b/" + name }

func (d *memDest) names() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for n := range d.objects {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// sizedMemDest is a memDest with Size (a SizeDestination).
type sizedMemDest struct{ *memDest }

func (d sizedMemDest) Size(_ context.Context, name string) (int64, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.objects[name]
	return int64(len(b)), ok, nil
}

type memOutput struct {
	d    *memDest
	name string
	buf  bytes.Buffer
	done bool
}

func (o *memOutput) Write(p []byte) (int, error) { return o.buf.Write(p) }

func (o *memOutput) WriteAt(p []byte, off int64) (int, error) {
	copy(o.buf.Bytes()[off:], p)
	return len(p), nil
}

func (o *memOutput) Finish() error { return nil }

func (o *memOutput) Commit(context.Context) error {
	o.d.mu.Lock()
	defer o.d.mu.Unlock()
	o.d.objects[o.name] = bytes.Clone(o.buf.Bytes())
	o.d.pending--
	o.done = true
	return nil
}

func (o *memOutput) Abort() error {
	if !o.done {
		o.d.mu.Lock()
		o.d.pending--
		o.d.mu.Unlock()
		o.done = true
	}
	return nil
}

// TestDestParts: through a Destination with object-store semantics, the
// union of N parts (N = 1, 2, 3, 8, run at once) is byte for byte one
// local process's output, for DCP and sharded safetensors; every output
// is reported by one part only, and nothing is left pending.
func TestDestParts(t *testing.T) {
	rules, _ := statedict.ParseSplitRules("model.embed.weight=0")
	for _, tc := range []struct {
		name, out string
		opts      []Option
	}{
		{"dcp", "dcp/", []Option{WithFormat(DCP), WithDCPRanks(3), WithSplit(rules)}},
		{"safetensors", "st/model.safetensors.index.json", []Option{WithMaxShardSize(300)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local := filepath.Join(t.TempDir(), tc.out)
			convert(t, dcpFixture, local, tc.opts...)
			dir := local
			if tc.name == "safetensors" {
				dir = filepath.Dir(local)
			}
			want := readDir(t, dir)
			for _, n := range []int{1, 2, 3, 8} {
				d := newMemDest()
				var wg sync.WaitGroup
				errs := make([]error, n)
				files := make([][]string, n)
				for i := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						ck, err := statedict.Open(dcpFixture)
						if err != nil {
							errs[i] = err
							return
						}
						defer ck.Close()
						opts := append(append([]Option{}, tc.opts...), WithDestination(sizedMemDest{d}), WithPart(Part{i, n}), WithPartWait(time.Minute))
						sum, err := Convert(context.Background(), ck, tc.out, opts...)
						if err == nil {
							files[i] = sum.Files
						}
						errs[i] = err
					}()
				}
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					t.Fatalf("%d parts: %v", n, err)
				}
				seen := map[string]bool{}
				for _, fs := range files {
					for _, f := range fs {
						if seen[f] || !strings.HasPrefix(f, "mem://b/") {
							t.Fatalf("%d parts: %s reported twice, or not by its name", n, f)
						}
						seen[f] = true
					}
				}
				got := d.names()
				if len(got) != len(want) || d.pending != 0 {
					t.Fatalf("%d parts: objects %v (%d pending), want %d", n, got, d.pending, len(want))
				}
				for name, b := range want {
					key := path.Join(path.Dir(tc.out+"x"), name)
					if !bytes.Equal(d.objects[key], b) {
						t.Errorf("%d parts: %s differs from a single local process's", n, key)
					}
				}
			}
		})
	}
}

// TestDestPartMissing: part 0 alone gives up with ErrPartMissing, writes
// no .metadata and takes back its own object (a failed call leaves
// nothing at a Destination); after part 1, part 0 completes the output.
// A Destination without Size is refused for --part.
func TestDestPartMissing(t *testing.T) {
	d := newMemDest()
	ck := open(t, dcpFixture)
	opts := []Option{WithFormat(DCP), WithDCPRanks(2), WithDestination(sizedMemDest{d})}
	_, err := Convert(context.Background(), ck, "dcp/", append(opts, WithPart(Part{0, 2}), WithPartWait(50*time.Millisecond))...)
	if !errors.Is(err, ErrPartMissing) || !strings.Contains(err.Error(), "mem://b/dcp/__1_0.distcp") {
		t.Fatalf("got %v, want ErrPartMissing naming the object", err)
	}
	if got := d.names(); len(got) != 0 || d.pending != 0 {
		t.Fatalf("left %v, %d pending", got, d.pending)
	}
	for _, i := range []int{1, 0} {
		if _, err := Convert(context.Background(), ck, "dcp/", append(opts, WithPart(Part{i, 2}))...); err != nil {
			t.Fatal(err)
		}
	}
	local := filepath.Join(t.TempDir(), "dcp")
	convert(t, dcpFixture, local, WithFormat(DCP), WithDCPRanks(2))
	want := readDir(t, local)
	if got := d.names(); !reflect.DeepEqual(got, []string{"dcp/.metadata", "dcp/__0_0.distcp", "dcp/__1_0.distcp"}) {
		t.Fatalf("objects %v", got)
	}
	for name, b := range want {
		if !bytes.Equal(d.objects["dcp/"+name], b) {
			t.Errorf("%s differs", name)
		}
	}
	// Existing objects: refused without --force, before anything is
	// written.
	if _, err := Convert(context.Background(), ck, "dcp/", opts...); !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "mem://b/dcp/") {
		t.Fatalf("got %v, want ErrExists", err)
	}
	if _, err := Convert(context.Background(), ck, "x/", WithFormat(DCP), WithDestination(newMemDest()), WithPart(Part{0, 2})); !errors.Is(err, ErrOption) {
		t.Fatalf("--part to a Destination without Size: got %v, want ErrOption", err)
	}
}

// TestDestDCPFailure: a DCP conversion to a Destination failing after its
// .distcp objects are committed (at the .metadata) removes them.
func TestDestDCPFailure(t *testing.T) {
	local := filepath.Join(t.TempDir(), "dcp")
	convert(t, dcpFixture, local, WithFormat(DCP), WithDCPRanks(2))
	var distcp int64
	for name, b := range readDir(t, local) {
		if name != ".metadata" {
			distcp += int64(len(b))
		}
	}
	d := newMemDest()
	left := distcp
	_, err := Convert(context.Background(), open(t, dcpFixture), "dcp/", WithFormat(DCP), WithDCPRanks(2), WithDestination(d),
		WithOutputWrapper(func(w io.Writer) io.Writer { return &failingWriter{w, &left} }))
	if !errors.Is(err, errFailing) {
		t.Fatalf("got %v", err)
	}
	if got := d.names(); len(got) != 0 || d.pending != 0 {
		t.Fatalf("left %v, %d pending", got, d.pending)
	}
}

var errFailing = fmt.Errorf("injected write failure")

// failingWriter fails once its budget of bytes is spent.
type failingWriter struct {
	w io.Writer
	n *int64
}

func (f *failingWriter) Write(p []byte) (int, error) {
	if *f.n -= int64(len(p)); *f.n < 0 {
		return 0, errFailing
	}
	return f.w.Write(p)
}
