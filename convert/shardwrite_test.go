package convert

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// withShardWorkers runs fn with n shards written at once; with meet set,
// each shard's goroutine waits (up to a few seconds) until two shards are
// in flight, and the result says whether two ever were at the same time.
func withShardWorkers(n int, meet bool, fn func()) (overlapped bool) {
	oldN, oldHook := shardWorkers, shardStarted
	defer func() { shardWorkers, shardStarted = oldN, oldHook }()
	shardWorkers = func() int { return n }
	var once sync.Once
	two := make(chan struct{})
	var mu sync.Mutex
	started := 0
	if meet {
		shardStarted = func(int) {
			mu.Lock()
			started++
			if started == 2 {
				once.Do(func() { close(two) })
			}
			mu.Unlock()
			select {
			case <-two:
			case <-time.After(3 * time.Second):
			}
		}
	}
	fn()
	select {
	case <-two:
		return true
	default:
		return false
	}
}

// TestShardsAtOnce: shards written several at once (the goroutines are
// made to meet, so two are provably in flight together) are byte for byte
// the shards and index written one after another, for safetensors and
// .pth output, with the in-kernel copy and without it.
func TestShardsAtOnce(t *testing.T) {
	for _, f := range []Format{Safetensors, PyTorch} {
		for _, copyOn := range []bool{false, true} {
			var got [2]map[string][]byte
			for i, n := range []int{1, 4} {
				dir := t.TempDir()
				var overlapped bool
				withRangeCopy(copyOn, func() {
					overlapped = withShardWorkers(n, n > 1, func() {
						convert(t, fixtures+"training.pt", dir, WithMaxShardSize(200), WithFormat(f))
					})
				})
				if n > 1 && !overlapped {
					t.Errorf("%s: no two shards were written at once", f)
				}
				got[i] = readDir(t, dir)
			}
			if len(got[0]) < 3 || len(got[0]) != len(got[1]) {
				t.Fatalf("%s: files %d one at a time, %d at once", f, len(got[0]), len(got[1]))
			}
			for name, b := range got[0] {
				if !bytes.Equal(b, got[1][name]) {
					t.Errorf("%s copy %v: %s differs when shards are written at once", f, copyOn, name)
				}
			}
		}
	}
}

// TestShardsAtOnceDamaged: a damaged record in any shard, with the shards
// written at once, fails the conversion with ErrDamaged naming the record
// (the same message as one shard at a time), and nothing is left in the
// output directory: no shard, no index, no temporary file, although the
// other shards were finished or in flight.
func TestShardsAtOnceDamaged(t *testing.T) {
	for rec, b := range damagedCopies(t, fixtures+"training.pt") {
		in, outDir := writeDamaged(t, b)
		var msgs [2]string
		for i, n := range []int{1, 4} {
			var err error
			withRangeCopy(true, func() {
				withShardWorkers(n, n > 1, func() {
					_, err = Convert(context.Background(), open(t, in), outDir, WithMaxShardSize(200), WithFormat(Safetensors))
				})
			})
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), rec) {
				t.Errorf("%s damaged, %d at once: %v", rec, n, err)
			}
			if files := dirFiles(t, outDir); len(files) != 0 {
				t.Errorf("%s damaged, %d at once: left %v", rec, n, files)
			}
			if err != nil {
				msgs[i] = err.Error()
			}
		}
		if msgs[0] != msgs[1] {
			t.Errorf("messages differ:\n%s\n%s", msgs[0], msgs[1])
		}
	}
}

// TestShardsAtOnceCancel: a cancelled conversion with shards written at
// once reports the cancellation and leaves nothing.
func TestShardsAtOnceCancel(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	withShardWorkers(4, false, func() {
		shardStarted = func(i int) {
			if i == 1 {
				cancel()
			}
		}
		_, err = Convert(ctx, open(t, fixtures+"training.pt"), dir, WithMaxShardSize(200), WithFormat(Safetensors))
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err %v", err)
	}
	if files := dirFiles(t, dir); len(files) != 0 {
		t.Errorf("left %v", files)
	}
}

// TestShardFirstError: the error reported is the first shard's own, not
// a cancellation another shard's failure caused, unless the caller
// cancelled.
func TestShardFirstError(t *testing.T) {
	bad := errors.New("bad")
	cancelled := context.Canceled
	if got := firstShardErr(context.Background(), []error{nil, cancelled, bad, nil}); got != bad {
		t.Errorf("got %v, want bad", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := firstShardErr(ctx, []error{nil, cancelled, bad}); got != cancelled {
		t.Errorf("caller cancelled: got %v", got)
	}
	if got := firstShardErr(context.Background(), []error{nil, nil}); got != nil {
		t.Errorf("got %v", got)
	}
}
