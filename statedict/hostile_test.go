package statedict_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ckpt-dev/ckpt/internal/hostile"
	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/statedict"
)

// cost is what opening one input took.
type cost struct {
	alloc uint64        // bytes allocated, garbage included
	wall  time.Duration // wall-clock time
	cpu   time.Duration // CPU time of the process (GC included); 0 where not measured
}

// measure opens in and reports the error and what it cost.
func measure(in []byte, opts ...statedict.Option) (error, cost) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0, start := cpuTime(), time.Now()
	ck, err := statedict.NewReader(bytes.NewReader(in), int64(len(in)), opts...)
	wall, cpu := time.Since(start), cpuTime()-cpu0
	runtime.ReadMemStats(&after)
	if ck != nil {
		ck.Close()
	}
	return err, cost{alloc: after.TotalAlloc - before.TotalAlloc, wall: wall, cpu: cpu}
}

// Every case of the hostile corpus fails with its expected error (or
// loads) in bounded time and allocation: 64 MiB plus 200 bytes per byte of
// the uncompressed input, garbage included (a list of None costs gopickle
// about 100 bytes per 1-byte item as its slices grow; see
// docs/limits.md), 10 s plus 1 s per MiB. The committed
// files must be what the generator writes.
func TestHostileCorpus(t *testing.T) {
	for _, c := range hostile.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			if c.Pending != "" {
				t.Skipf("pending: %s", c.Pending)
			}
			if c.Big && testing.Short() {
				t.Skip("large case")
			}
			if c.Dir != nil {
				dir := filepath.Join("..", "testdata", "hostile", c.Name)
				for name, data := range c.Dir() {
					if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, data) {
						t.Fatalf("testdata/hostile/%s/%s is missing or stale (%v): run go run ./internal/hostile/gen", c.Name, name, err)
					}
				}
				_, err := statedict.Open(dir)
				if err == nil || !strings.Contains(err.Error(), c.Want) || !strings.Contains(err.Error(), c.Name) {
					t.Fatalf("want an error naming %s containing %q, got %v", c.Name, c.Want, err)
				}
				return
			}
			in := c.Data()
			if !c.Big {
				got, err := os.ReadFile(filepath.Join("..", "testdata", "hostile", c.Name))
				if err != nil || !bytes.Equal(got, in) {
					t.Fatalf("testdata/hostile/%s is missing or stale (%v): run go run ./internal/hostile/gen", c.Name, err)
				}
			}
			err, m := measure(in, statedict.WithName(c.Name))
			alloc := m.alloc
			t.Logf("%d bytes in: %.1f MB allocated, %v wall, %v CPU: %v", len(in), float64(alloc)/1e6, m.wall, m.cpu, err)
			switch {
			case c.Want == "" && err != nil:
				t.Fatalf("want success, got %v", err)
			case c.Want != "" && (err == nil || !strings.Contains(err.Error(), c.Want)):
				t.Fatalf("want an error containing %q, got %v", c.Want, err)
			}
			if err != nil {
				msg := err.Error()
				if !strings.Contains(msg, c.Name) || strings.Contains(msg, "\n") || strings.ContainsAny(msg, "{}") && strings.Contains(msg, "&{") || strings.Contains(msg, "0xc0") {
					t.Errorf("message does not name the file on one line without Go syntax: %q", msg)
				}
			}
			if bound := 64<<20 + 200*uint64(hostile.Unpacked(in)); alloc > bound {
				t.Errorf("%d bytes allocated, bound %d", alloc, bound)
			}
			// The bound is on CPU time, which other work sharing the
			// cores does not inflate (the wall clock of a 16 MB case went
			// from about 20 s to 47 s on a loaded 2-core VM); a
			// super-linear case takes minutes of CPU, not seconds. The
			// wall clock only has to stay within a loose multiple (a case
			// that sleeps or blocks).
			limit := 10*time.Second + time.Duration(hostile.Unpacked(in)>>20)*time.Second
			if m.cpu > limit {
				t.Errorf("took %v of CPU, bound %v", m.cpu, limit)
			}
			if m.wall > 4*limit {
				t.Errorf("took %v of wall-clock time, bound %v", m.wall, 4*limit)
			}
		})
	}
}

// A shared tensor keeps every name it is reached by (tied weights), and a
// DAG of shared lists names every path while the budget allows.
func TestSharedNamesListed(t *testing.T) {
	in := hostile.TorchZip(hostile.DAG(3, hostile.Tensor("0"), hostile.ListPair), map[string][]byte{"data/0": make([]byte, 4)}, false)
	ck, err := statedict.NewReader(bytes.NewReader(in), int64(len(in)))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if len(ck.Tensors) != 8 || len(ck.Storages) != 1 {
		t.Fatalf("%d tensors over %d storages, want 8 over 1", len(ck.Tensors), len(ck.Storages))
	}
	if ck.Tensors[0].Name != "0.0.0" || ck.Tensors[7].Name != "1.1.1" {
		t.Fatalf("names %s ... %s", ck.Tensors[0].Name, ck.Tensors[7].Name)
	}
	// The budget is an option: 16 levels name 65536 tensors.
	in = hostile.TorchZip(hostile.DAG(16, hostile.Tensor("0"), hostile.ListPair), map[string][]byte{"data/0": make([]byte, 4)}, false)
	err, _ = measure(in)
	var le *pickle.LimitError
	if !errors.As(err, &le) || le.Limit != "statedict.WithMaxNames" || !errors.Is(err, pickle.ErrLimit) {
		t.Fatalf("default budget: %v", err)
	}
	if err, _ := measure(in, statedict.WithMaxNames(1<<18)); err != nil {
		t.Fatalf("raised budget: %v", err)
	}
}

// Opening stops when the context ends.
func TestOpenContextCanceled(t *testing.T) {
	in := hostile.TorchZip(hostile.Proto(hostile.Flood('N', 0x94, 1<<20)), nil, true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := statedict.NewReaderContext(ctx, bytes.NewReader(in), int64(len(in)))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "x.pt")
	if err := os.WriteFile(p, in, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := statedict.OpenContext(ctx, p); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), p) {
		t.Fatalf("OpenContext: %v", err)
	}
}

// A set is one value, printed as Python prints it (never as a Go value).
func TestSetIsValue(t *testing.T) {
	pkl := []byte("\x80\x04}\x8c\x01s\x8f(K\x01K\x02\x90s.")
	in := hostile.TorchZip(pkl, nil, false)
	ck, err := statedict.NewReader(bytes.NewReader(in), int64(len(in)))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if len(ck.Objects) != 1 || ck.Objects[0].Name != "s" || pickle.Repr(ck.Objects[0].Value) != "{1, 2}" {
		t.Fatalf("objects %+v", ck.Objects)
	}
}

// countingCtx is a context whose Err reports Canceled from its trigger-th
// call on: cancellation at a deterministic point of the work.
type countingCtx struct {
	context.Context
	calls, trigger int
}

func (c *countingCtx) Err() error {
	c.calls++
	if c.trigger > 0 && c.calls >= c.trigger {
		return context.Canceled
	}
	return nil
}

// A context that ends while a large pickle is being read stops it at the
// next look, whichever pass is running (the used-PUT pass, the validating
// pass, the machine, conversion, the walk): cancelled at points spread over
// all the looks a full read makes, each read fails with context.Canceled
// after at most one more look.
func TestOpenContextMidway(t *testing.T) {
	if testing.Short() {
		t.Skip("reads a 1 MiB pickle several times")
	}
	in := hostile.TorchZip(hostile.Proto(hostile.NoneList(1<<20)), nil, true)
	open := func(ctx context.Context) error {
		_, err := statedict.NewReaderContext(ctx, bytes.NewReader(in), int64(len(in)), statedict.WithMaxNames(1<<30))
		return err
	}
	full := &countingCtx{Context: context.Background()}
	if err := open(full); err != nil {
		t.Fatal(err)
	}
	if full.calls < 50 {
		t.Fatalf("a full read looked at the context %d times", full.calls)
	}
	for _, k := range []int{1, full.calls / 10, full.calls / 3, full.calls / 2, 9 * full.calls / 10, full.calls} {
		ctx := &countingCtx{Context: context.Background(), trigger: k}
		err := open(ctx)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled at look %d of %d: err = %v", k, full.calls, err)
		}
		if ctx.calls > k+1 {
			t.Errorf("cancelled at look %d: %d looks in all", k, ctx.calls)
		}
	}
}
