package devicecopy

import (
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

const fixtureDir = "../testdata/fixtures/"

// FuzzLayout feeds Upload's arena planning two tensors with arbitrary
// sizes, offsets, shapes and strides (as a hostile file could declare them,
// seeded from the fixtures' tensors): it must refuse what does not fit
// (ErrLayout) and never panic, and whatever it accepts must lie inside the
// arena.
func FuzzLayout(f *testing.F) {
	for _, name := range []string{"zip_basic.pt", "tied.pt", "training.pt", "sparse.pt", "quantized.pt"} {
		ck, err := statedict.Open(fixtureDir + name)
		if err != nil {
			f.Fatal(err)
		}
		for _, t := range ck.Tensors {
			if t.Storage != nil && len(t.Shape) == 1 {
				f.Add(t.Storage.NBytes, t.Offset, t.Shape[0], t.Strides[0], t.Storage.NBytes, int64(0))
			}
		}
		ck.Close()
	}
	f.Add(int64(1<<55), int64(0), int64(1<<53), int64(1), int64(1<<55), int64(7))
	f.Fuzz(func(t *testing.T, n1, off, shape, stride, n2, off2 int64) {
		s1 := &statedict.Storage{Key: "0", Location: "cuda:0", DType: dtype.Float32, NBytes: n1}
		s2 := &statedict.Storage{Key: "1", Location: "cuda:1", DType: dtype.Float32, NBytes: n2}
		ck := &statedict.Checkpoint{Storages: []*statedict.Storage{s1, s2}, Tensors: []*statedict.Tensor{
			{Name: "a", DType: dtype.Float32, Shape: []int64{shape}, Strides: []int64{stride}, Offset: off, Device: "cuda:0", Storage: s1},
			{Name: "b", DType: dtype.Float32, Shape: []int64{shape, 2}, Strides: []int64{stride, 1}, Offset: off2, Device: "cuda:1", Storage: s2},
		}}
		plan, err := remap.NewPlan(ck.Tensors, remap.Rules{})
		if err != nil {
			return
		}
		st, err := layout(ck, plan)
		if err != nil {
			return
		}
		for _, ds := range st.Storages {
			a := ds.arena
			if ds.off%arenaAlign != 0 || ds.off+uint64(ds.Storage.NBytes) > a.digestOff || a.digestOff+uint64(a.chunks)*8 > a.Size {
				t.Fatalf("storage %s at %d+%d outside arena %+v", ds.Storage.Key, ds.off, ds.Storage.NBytes, a)
			}
		}
		for _, dt := range st.Tensors {
			es := int64(dt.DType.Size())
			if dt.Offset < 0 || dt.Offset*es > dt.Storage.Storage.NBytes {
				t.Fatalf("tensor %s offset %d outside its %d-byte storage", dt.Name, dt.Offset, dt.Storage.Storage.NBytes)
			}
		}
	})
}
