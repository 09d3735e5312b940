package remap_test

import (
	"fmt"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

func Example() {
	// A checkpoint saved from two GPUs: a tied embedding on cuda:0 (one
	// storage, two tensors), a layer on cuda:1, a mask left on the CPU and
	// Adam's step counter, which torch keeps on the CPU by design.
	emb := &statedict.Storage{Key: "0", Location: "cuda:0", NBytes: 4096}
	layer := &statedict.Storage{Key: "1", Location: "cuda:1", NBytes: 1024}
	mask := &statedict.Storage{Key: "2", Location: "cpu", NBytes: 64}
	step := &statedict.Storage{Key: "3", Location: "cpu", NBytes: 4}
	tensors := []*statedict.Tensor{
		{Name: "embed.weight", DType: dtype.Float32, Shape: []int64{32, 32}, Device: "cuda:0", Storage: emb},
		{Name: "lm_head.weight", DType: dtype.Float32, Shape: []int64{32, 32}, Device: "cuda:0", Storage: emb},
		{Name: "layer.weight", DType: dtype.Float32, Shape: []int64{16, 16}, Device: "cuda:1", Storage: layer},
		{Name: "mask", DType: dtype.Float32, Shape: []int64{16}, Device: "cpu", Storage: mask},
		{Name: "optimizer.state.0.step", DType: dtype.Float32, Device: "cpu", Storage: step},
	}

	// What --map-location 'cuda=cuda:0' would do: every GPU tensor on GPU 0.
	rules, err := remap.Parse("cuda=cuda:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	plan, err := remap.NewPlan(tensors, rules)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range plan.Entries {
		fmt.Printf("%-24s %-7s -> %s\n", e.Name, e.Source, e.Target)
	}
	for _, u := range plan.Devices() {
		fmt.Printf("%s: %d bytes, %d tensors, %d storages\n", u.Device, u.Bytes, u.Tensors, u.Storages)
	}
	for _, s := range plan.Strays {
		fmt.Printf("stray: %s on %s in a %s checkpoint (%d bytes)\n", s.Name, s.Tag, s.Dominant, s.NBytes)
	}

	// torch's exact-match dict leaves cuda:0 alone under {'cuda': 'cpu'};
	// a bare key here matches every index, and an exact key wins.
	r, _ := remap.Parse("cuda=cpu,cuda:1=cuda:0")
	for _, tag := range []string{"cuda:0", "cuda:1", "cpu"} {
		if d, ok := r.Map(tag); ok {
			fmt.Println(tag, "->", d)
		} else {
			fmt.Println(tag, "stays")
		}
	}
	// Output:
	// embed.weight             cuda:0  -> cuda:0
	// lm_head.weight           cuda:0  -> cuda:0
	// layer.weight             cuda:1  -> cuda:0
	// mask                     cpu     -> cpu
	// optimizer.state.0.step   cpu     -> cpu
	// cpu: 68 bytes, 2 tensors, 2 storages
	// cuda:0: 5120 bytes, 3 tensors, 2 storages
	// stray: mask on cpu in a cuda:0 checkpoint (64 bytes)
	// cuda:0 -> cpu
	// cuda:1 -> cuda:0
	// cpu stays
}
