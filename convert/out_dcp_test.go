package convert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ckpt-dev/ckpt/internal/testenv"
	"github.com/ckpt-dev/ckpt/statedict"
)

// dcpInputs are the inputs the DCP writer is tested on: a DCP save with
// nested values, a training checkpoint .pt and a safetensors file.
var dcpInputs = []string{dcpFixture, fixtures + "cuda_training.pt", fixtures + "model.safetensors"}

// objects returns a checkpoint's non-tensor values by name.
func objects(t *testing.T, path string) map[string]any {
	t.Helper()
	ck := open(t, path)
	m := map[string]any{}
	for _, o := range ck.Objects {
		m[o.Name] = o.Value
	}
	return m
}

// TestDCPWriteReadsBack: ckpt reads its own DCP output back identically
// (tensors byte for byte with their dtypes, values equal), for 1, 2 and 3
// ranks, with tensors chunked by --split rules and whole.
func TestDCPWriteReadsBack(t *testing.T) {
	for _, in := range dcpInputs {
		for _, tc := range []struct {
			ranks int
			split string
		}{{1, ""}, {2, ""}, {3, "*=0"}, {4, "*.weight=-1"}} {
			name := fmt.Sprintf("%s/%d%s", filepath.Base(in), tc.ranks, tc.split)
			t.Run(name, func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "dcp")
				opts := []Option{WithFormat(DCP), WithDCPRanks(tc.ranks)}
				if tc.split != "" {
					rules, err := statedict.ParseSplitRules(tc.split)
					if err != nil {
						t.Fatal(err)
					}
					opts = append(opts, WithSplit(rules))
				}
				sum := convert(t, in, out, opts...)
				if len(sum.Files) != tc.ranks || sum.Index != filepath.Join(out, ".metadata") {
					t.Errorf("files %v, index %q", sum.Files, sum.Index)
				}
				compareFiles(t, in, out)
				if want, got := objects(t, in), objects(t, out); !reflect.DeepEqual(want, got) {
					t.Errorf("values differ:\n got %v\nwant %v", got, want)
				}
				ck := open(t, out)
				if ck.Format != statedict.FormatDCP {
					t.Errorf("format %q", ck.Format)
				}
				if tc.split == "*=0" {
					for _, tn := range ck.Tensors {
						want := 1 // torch.chunk's non-empty parts
						if len(tn.Shape) > 0 {
							want = 0
							for r := range tc.ranks {
								if rg := statedict.ChunkRange(tn.Shape[0], r, tc.ranks); rg.Stop > rg.Start {
									want++
								}
							}
						}
						if len(tn.Chunks()) != want {
							t.Errorf("%s %v: %d chunks, want %d", tn.Name, tn.Shape, len(tn.Chunks()), want)
						}
					}
				}
			})
		}
	}
}

// TestDCPWriteBalanced: whole tensors go largest first to the least
// loaded rank, so no rank holds more than the largest tensor beyond an
// even share.
func TestDCPWriteBalanced(t *testing.T) {
	out := filepath.Join(t.TempDir(), "dcp")
	convert(t, dcpFixture, out, WithFormat(DCP), WithDCPRanks(3))
	ck := open(t, out)
	load := map[int]int64{}
	var total, largest int64
	for _, tn := range ck.Tensors {
		cs := tn.Chunks()
		if len(cs) != 1 {
			t.Fatalf("%s: %d chunks, want it whole", tn.Name, len(cs))
		}
		n := tn.NumEl() * int64(tn.DType.Size())
		load[cs[0].Rank] += n
		total += n
		largest = max(largest, n)
	}
	for r := range 3 {
		if load[r] > total/3+largest {
			t.Errorf("rank %d holds %d of %d bytes (largest tensor %d)", r, load[r], total, largest)
		}
		if load[r] == 0 {
			t.Errorf("rank %d holds nothing", r)
		}
	}
}

// readDir returns every file of dir, by name.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	for _, name := range dirFiles(t, dir) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		m[name] = b
	}
	return m
}

// runParts runs count parts of one conversion at once, as a launcher
// would, into out.
func runParts(t *testing.T, in, out string, count int, opts ...Option) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	written := map[string]bool{}
	errs := make([]error, count)
	for i := range count {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ck, err := statedict.Open(in)
			if err != nil {
				errs[i] = err
				return
			}
			defer ck.Close()
			var sum *Summary
			sum, errs[i] = Convert(context.Background(), ck, out, append(opts, WithPart(Part{i, count}))...)
			if errs[i] == nil && i > 0 && sum.Index != "" && filepath.Ext(sum.Index) == ".metadata" {
				errs[i] = fmt.Errorf("part %d reports the index %s", i, sum.Index)
			}
			if errs[i] == nil {
				mu.Lock()
				for _, f := range sum.Files {
					if written[f] {
						errs[i] = fmt.Errorf("%s reported by two parts", f)
					}
					written[f] = true
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// TestDCPWriteParts: the union of N parts (N = 1, 2, 3) of a DCP output
// of 3 ranks, and of a sharded safetensors output, is byte-identical to
// the output of one process.
func TestDCPWriteParts(t *testing.T) {
	rules, _ := statedict.ParseSplitRules("model.embed.weight=0")
	for _, tc := range []struct {
		name string
		out  string
		opts []Option
	}{
		{"dcp", "dcp", []Option{WithFormat(DCP), WithDCPRanks(3), WithSplit(rules)}},
		{"safetensors", "st/model.safetensors.index.json", []Option{WithMaxShardSize(300)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			one := filepath.Join(t.TempDir(), tc.out)
			convert(t, dcpFixture, one, tc.opts...)
			dirOf := func(out string) string {
				if tc.name == "safetensors" {
					return filepath.Dir(out)
				}
				return out
			}
			want := readDir(t, dirOf(one))
			if len(want) < 3 {
				t.Fatalf("want several output files, got %d", len(want))
			}
			for _, n := range []int{1, 2, 3, 8} {
				out := filepath.Join(t.TempDir(), tc.out)
				runParts(t, dcpFixture, out, n, tc.opts...)
				dir := dirOf(out)
				got := readDir(t, dir)
				if len(got) != len(want) {
					t.Errorf("%d parts: files %v, want %d", n, dirFiles(t, dir), len(want))
				}
				for name, b := range want {
					if !bytes.Equal(got[name], b) {
						t.Errorf("%d parts: %s differs from a single process's", n, name)
					}
				}
			}
		})
	}
}

// TestDCPWritePartWaits: part 0 alone gives up after the part wait,
// leaving its own file but no .metadata, and says which file is missing.
func TestDCPWritePartWaits(t *testing.T) {
	out := filepath.Join(t.TempDir(), "dcp")
	ck := open(t, dcpFixture)
	_, err := Convert(context.Background(), ck, out, WithFormat(DCP), WithDCPRanks(2),
		WithPart(Part{0, 2}), WithPartWait(10*time.Millisecond))
	if !errors.Is(err, ErrPartMissing) {
		t.Fatalf("got %v, want ErrPartMissing", err)
	}
	if got := dirFiles(t, out); !reflect.DeepEqual(got, []string{"__0_0.distcp"}) {
		t.Errorf("files %v", got)
	}
	// Part 1 then completes the set; part 0 again writes the metadata.
	if _, err := Convert(context.Background(), ck, out, WithFormat(DCP), WithDCPRanks(2), WithPart(Part{1, 2})); err != nil {
		t.Fatal(err)
	}
	if _, err := Convert(context.Background(), ck, out, WithFormat(DCP), WithDCPRanks(2), WithPart(Part{0, 2}), WithForce(true)); err != nil {
		t.Fatal(err)
	}
	compareFiles(t, dcpFixture, out)
}

// TestDCPWriteRefuses: options a DCP output cannot honour fail before
// anything is written.
func TestDCPWriteRefuses(t *testing.T) {
	dir := t.TempDir()
	ck := open(t, dcpFixture)
	for _, opts := range [][]Option{
		{WithFormat(DCP), WithMaxShardSize(100)},
		{WithFormat(DCP), WithCompress("zstd")},
		{WithFormat(DCP), WithDCPRanks(-1)},
		{WithFormat(DCP), WithPart(Part{2, 2})},
		{WithFormat(PyTorch), WithMaxShardSize(300), WithPart(Part{0, 2})},
	} {
		out := filepath.Join(dir, "o")
		if _, err := Convert(context.Background(), ck, out, opts...); !errors.Is(err, ErrOption) {
			t.Errorf("got %v, want ErrOption", err)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s written", out)
		}
	}
	out := filepath.Join(dir, "exists")
	convert(t, dcpFixture, out, WithFormat(DCP))
	if _, err := Convert(context.Background(), ck, out, WithFormat(DCP)); !errors.Is(err, ErrExists) {
		t.Errorf("second write: got %v, want ErrExists", err)
	}
}

// TestInteropDCPWrite: torch 2.x loads ckpt's DCP output: dcp_to_torch_save
// equals the input tensor for tensor and value for value, and
// torch.distributed.checkpoint.load in 1, 2 and 4 gloo processes (world
// sizes other than the 3 ranks written) fills a state dict of the input's
// structure (nested for the .pt) with the input's tensors and values,
// whole and --split chunks alike, and in 2 and 4 processes into DTensors
// sharded Shard(0) (as FSDP2 holds them, uneven and empty shards
// included).
func TestInteropDCPWrite(t *testing.T) {
	testenv.RequireFeature(t, "torch with torch.distributed.checkpoint.format_utils (2.2+) and safetensors",
		"from torch.distributed.checkpoint.format_utils import dcp_to_torch_save; import safetensors")
	rules, _ := statedict.ParseSplitRules("*=0")
	for _, in := range dcpInputs[1:] { // a .pt and a safetensors file: torch reads them directly
		out := filepath.Join(t.TempDir(), "dcp")
		convert(t, in, out, WithFormat(DCP), WithDCPRanks(3), WithSplit(rules))
		abs, _ := filepath.Abs(in)
		var stderr bytes.Buffer
		cmd := exec.Command(testenv.Python(), "../scripts/dcp_write_check.py", out, abs, "1", "2", "4")
		cmd.Stderr = &stderr
		got, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: dcp_write_check.py: %v\n%s%s", in, err, got, stderr.String())
		}
		t.Logf("%s: %s", in, got)
	}
}

// TestInteropDCPNested: a nested training checkpoint (a small model's
// state_dict, AdamW's after one step, a step counter, nested lists, tuples
// and dicts of values) that torch 2.x saved with torch.save converts to a
// DCP whose .metadata has the planner_data and state_dict_metadata keys
// torch's own dcp.save of the same dict writes (as does the conversion of
// torch's DCP itself), and that dcp.load reads into a freshly built nested
// dict of the same structure with every tensor and value of the input; 1
// and 2 ranks, and 3 with --split '*=0'. ckpt reads every output back as
// the input's tensors and values, and in the tree it reads torch's DCP as.
func TestInteropDCPNested(t *testing.T) {
	testenv.RequireFeature(t, "torch with torch.distributed.checkpoint.format_utils (2.2+)",
		"from torch.distributed.checkpoint.format_utils import dcp_to_torch_save")
	dir := t.TempDir()
	src, torchDCP := filepath.Join(dir, "src.pt"), filepath.Join(dir, "torch_dcp")
	script := func(args ...string) {
		t.Helper()
		var stderr bytes.Buffer
		cmd := exec.Command(testenv.Python(), append([]string{"../scripts/dcp_nested_check.py"}, args...)...)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("dcp_nested_check.py %s: %v\n%s%s", args[0], err, out, stderr.String())
		}
	}
	script("make", src, torchDCP)
	rules, _ := statedict.ParseSplitRules("*=0")
	outs := map[string][]Option{
		"r1":       {WithFormat(DCP)},
		"r2":       {WithFormat(DCP), WithDCPRanks(2)},
		"r3split":  {WithFormat(DCP), WithDCPRanks(3), WithSplit(rules)},
		"fromdcp2": {WithFormat(DCP), WithDCPRanks(2)},
	}
	args := []string{"check", src, torchDCP}
	wantTree := treeShape(open(t, torchDCP).Root)
	for _, name := range slices.Sorted(maps.Keys(outs)) {
		in := src
		if name == "fromdcp2" {
			in = torchDCP
		}
		out := filepath.Join(dir, name)
		if sum := convert(t, in, out, outs[name]...); sum.Structure != "tree" {
			t.Errorf("%s: structure %q", name, sum.Structure)
		}
		args = append(args, out)
		compareFiles(t, src, out)
		if want, got := objects(t, src), objects(t, out); !reflect.DeepEqual(want, got) {
			t.Errorf("%s: values differ:\n got %v\nwant %v", name, got, want)
		}
		if got := treeShape(open(t, out).Root); got != wantTree {
			t.Errorf("%s: tree read back\n got %s\nwant %s (torch's DCP)", name, got, wantTree)
		}
	}
	script(args...)
}
