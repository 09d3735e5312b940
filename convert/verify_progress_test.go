package convert

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ckpt-dev/ckpt/statedict"
)

// Check and Compare report progress up to the total they announce.
func TestVerifyProgress(t *testing.T) {
	ctx := context.Background()
	ck, err := statedict.Open("../testdata/fixtures/training.pt")
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var done, total, calls int64
	if _, err := Check(ctx, ck, WithCheckProgress(func(d, tot int64) { done, total, calls = d, tot, calls+1 })); err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, s := range ck.Storages {
		if s.HasCRC {
			want += s.NBytes
		}
	}
	if calls == 0 || done != total || total != want || want == 0 {
		t.Errorf("check: %d of %d in %d calls, want %d", done, total, calls, want)
	}
	out := filepath.Join(t.TempDir(), "m.safetensors")
	if _, err := Convert(ctx, ck, out); err != nil {
		t.Fatal(err)
	}
	st, err := statedict.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	done, total, calls = 0, 0, 0
	if _, err := Check(ctx, st, WithCheckProgress(func(d, tot int64) { done, total, calls = d, tot, calls+1 })); err != nil {
		t.Fatal(err)
	}
	if calls != int64(len(st.Tensors)) || done != total || total == 0 {
		t.Errorf("check safetensors digests: %d of %d in %d calls", done, total, calls)
	}
	done, total = 0, 0
	rep, err := Compare(ctx, st, st, CompareOptions{Progress: func(d, tot int64) { done, total = d, tot }})
	if err != nil || len(rep.Differences) != 0 {
		t.Fatal(rep, err)
	}
	if done != total || total == 0 {
		t.Errorf("compare: %d of %d", done, total)
	}
}
