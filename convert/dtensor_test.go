package convert

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConvertPartialShard: one rank's file of an FSDP2 state dict of world
// size 2 (torch 2.6, testdata/fixtures/torch2_fsdp2_w2_rank1.pt) holds half
// of each tensor: convert refuses it naming the tensor, its shard, the
// global shape and placement, and DCP, and writes nothing, to either format.
func TestConvertPartialShard(t *testing.T) {
	dir := t.TempDir()
	for _, out := range []string{"o.safetensors", "o.pth"} {
		_, err := Convert(context.Background(), open(t, fixtures+"torch2_fsdp2_w2_rank1.pt"), filepath.Join(dir, out))
		var te *TensorError
		if !errors.Is(err, ErrPartialShard) || !errors.As(err, &te) || te.Name != "0.weight" ||
			!strings.Contains(err.Error(), "[3 4] of Shard(dim=0) of [6 4]") || !strings.Contains(err.Error(), "DCP") {
			t.Errorf("%s: %v, want ErrPartialShard naming 0.weight, its shard and DCP", out, err)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("left %v behind", left)
	}
	// The world-size-1 file's shards are whole: written under their names.
	sum := convert(t, fixtures+"torch2_fsdp2_w1_rank0.pt", filepath.Join(dir, "w1.safetensors"))
	if sum.Tensors != 4 || len(sum.Dropped) != 0 {
		t.Errorf("world size 1: %+v", sum)
	}
}
