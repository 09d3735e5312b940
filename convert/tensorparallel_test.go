package convert

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/statedict"
)

const tpFixture = "../testdata/fixtures/cuda_tagged.pt"

// failingDest is a memDest whose Create fails for names containing bad.
type failingDest struct {
	*memDest
	bad string
}

func (d failingDest) Create(ctx context.Context, name string, head int64) (Output, error) {
	if strings.Contains(name, d.bad) {
		return nil, errors.New("injected create failure")
	}
	return d.memDest.Create(ctx, name, head)
}

// TensorParallel with a Destination writes each rank's file as an object
// under the prefix, names them as the Destination does, and on a failing
// rank removes the objects of the ranks already written.
func TestTensorParallelToDestination(t *testing.T) {
	ck := open(t, tpFixture)
	rules, err := statedict.ParseSplitRules("*=0")
	if err != nil {
		t.Fatal(err)
	}
	d := newMemDest()
	sums, err := TensorParallel(context.Background(), ck, "tp/", 2, rules, WithDestination(d))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"tp/rank-00000-of-00002.safetensors", "tp/rank-00001-of-00002.safetensors"}
	if got := d.names(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("objects %v, want %v", got, want)
	}
	for r, s := range sums {
		if len(s.Files) != 1 || s.Files[0] != "mem://b/"+want[r] {
			t.Errorf("rank %d: files %v", r, s.Files)
		}
	}
	f := failingDest{newMemDest(), "rank-00001"}
	if _, err := TensorParallel(context.Background(), ck, "tp/", 2, rules, WithDestination(f)); err == nil || !strings.Contains(err.Error(), "rank 1 of 2") {
		t.Fatalf("failing rank 1: %v", err)
	}
	if got := f.names(); len(got) != 0 || f.pending != 0 {
		t.Fatalf("left behind after a failure: %v, %d pending", got, f.pending)
	}
}

// A URL output without a Destination is refused (ErrDestination) in every
// mode, with nothing written: no local directory named "s3:" or "gs:".
func TestURLOutputWithoutDestination(t *testing.T) {
	ck := open(t, tpFixture)
	dir := t.TempDir()
	t.Chdir(dir)
	ctx := context.Background()
	_, err1 := Convert(ctx, ck, "s3://b/x/model.safetensors")
	_, err2 := Convert(ctx, ck, "gs://b/x/", WithFormat(DCP))
	_, err3 := TensorParallel(ctx, ck, "s3://b/tp/", 2, nil)
	_, err4 := Convert(ctx, ck, "az://b/x/", WithMaxShardSize(20))
	for i, err := range []error{err1, err2, err3, err4} {
		if !errors.Is(err, ErrDestination) {
			t.Errorf("output %d: %v, want ErrDestination", i+1, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Errorf("wrote %s in the working directory", entries[0].Name())
	}
}
