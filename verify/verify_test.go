package verify_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/ckpt-dev/ckpt/convert"
	"github.com/ckpt-dev/ckpt/verify"

	"github.com/ckpt-dev/ckpt/statedict"
)

// verify.Check and verify.Compare report progress up to the total they announce.
func TestVerifyProgress(t *testing.T) {
	ctx := context.Background()
	ck, err := statedict.Open("../testdata/fixtures/training.pt")
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var done, total, calls int64
	if _, err := verify.Check(ctx, ck, verify.WithCheckProgress(func(d, tot int64) { done, total, calls = d, tot, calls+1 })); err != nil {
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
	if _, err := convert.Convert(ctx, ck, out); err != nil {
		t.Fatal(err)
	}
	st, err := statedict.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	done, total, calls = 0, 0, 0
	if _, err := verify.Check(ctx, st, verify.WithCheckProgress(func(d, tot int64) { done, total, calls = d, tot, calls+1 })); err != nil {
		t.Fatal(err)
	}
	if calls != int64(len(st.Tensors)) || done != total || total == 0 {
		t.Errorf("check safetensors digests: %d of %d in %d calls", done, total, calls)
	}
	done, total = 0, 0
	rep, err := verify.Compare(ctx, st, st, verify.CompareOptions{Progress: func(d, tot int64) { done, total = d, tot }})
	if err != nil || len(rep.Differences) != 0 {
		t.Fatal(rep, err)
	}
	if done != total || total == 0 {
		t.Errorf("compare: %d of %d", done, total)
	}
}

// TestCompareReadError: a tensor that cannot be read is an error naming
// it, not a difference, and Compare returns it.
func TestCompareReadError(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "o.safetensors")
	src, err := statedict.Open("../testdata/fixtures/training.pt")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := convert.Convert(context.Background(), src, out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := statedict.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	// The same header over a file cut short: the last tensors' bytes are gone.
	short, err := statedict.NewReader(&cutReader{b, int64(len(b) - 8)}, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	_, err = verify.Compare(context.Background(), ck, short, verify.CompareOptions{})
	var se *statedict.Error
	if !errors.As(err, &se) || se.Tensor == "" {
		t.Fatalf("got %v, want a statedict.Error naming the tensor", err)
	}
}

// cutReader serves b but fails reads past n.
type cutReader struct {
	b []byte
	n int64
}

func (c *cutReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > c.n {
		return 0, io.ErrUnexpectedEOF
	}
	return copy(p, c.b[off:]), nil
}
