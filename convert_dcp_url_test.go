package ckpt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ckpt-dev/ckpt"
	"github.com/ckpt-dev/ckpt/convert"
	"github.com/ckpt-dev/ckpt/objstore"
	"github.com/ckpt-dev/ckpt/statedict"
)

// DCP outputs and --part conversions to s3:// (MinIO), gs:// and az://
// (the emulators), checked against the same conversions to local files.

const dcpBasic = "testdata/dcp/basic"

// prefixObjects returns the objects directly under the prefix u (ending
// in "/"), by name.
func prefixObjects(t *testing.T, u string) map[string][]byte {
	t.Helper()
	st, key, err := objstore.NewStore(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	names, err := st.List(key)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, n := range names {
		m[n] = readURL(t, u+n)
	}
	return m
}

// localFiles returns the files of dir, by name.
func localFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = b
	}
	return m
}

func names(m map[string][]byte) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// noTemporaries fails when the bucket holds a pending upload or a
// temporary object.
func noTemporaries(t *testing.T, b bucketURL) {
	t.Helper()
	for _, l := range b.left(t) {
		if strings.HasPrefix(l, "pending:") || strings.Contains(l, ".ckpt-tmp-") {
			t.Fatalf("left behind: %s", l)
		}
	}
}

// urlParts runs count parts of one conversion at once, as a launcher
// would (each with its own checkpoint and Store), into the URL out, and
// checks that every output is reported by one part only.
func urlParts(t *testing.T, in, out string, count int, opts ...convert.Option) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, count)
	files := make([][]string, count)
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
			o := append(append([]convert.Option{}, opts...), convert.WithPart(convert.Part{Index: i, Count: count}), convert.WithPartWait(2*time.Minute))
			sum, err := ckpt.Convert(context.Background(), ck, out, o...)
			if err != nil {
				errs[i] = fmt.Errorf("part %d: %w", i, err)
				return
			}
			files[i] = sum.Files
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, fs := range files {
		for _, f := range fs {
			if seen[f] || !strings.HasPrefix(f, "s3://") && !strings.HasPrefix(f, "gs://") && !strings.HasPrefix(f, "az://") {
				t.Fatalf("part %d reports %s (twice, or not a URL)", i, f)
			}
			seen[f] = true
		}
	}
}

// TestConvertURLParts: the union of N parts (N = 1, 2, 3, 8) written at
// once to an object store prefix is byte for byte the output of one local
// process, for a DCP output of 3 ranks with a tensor chunked and for
// sharded safetensors; no pending upload or temporary object is left.
func TestConvertURLParts(t *testing.T) {
	rules, err := statedict.ParseSplitRules("model.embed.weight=0")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, dir, file string // the output is dir + file
		opts            []convert.Option
	}{
		{"dcp", "dcp/", "", []convert.Option{convert.WithFormat(convert.DCP), convert.WithDCPRanks(3), convert.WithSplit(rules)}},
		{"safetensors", "st/", "model.safetensors.index.json", []convert.Option{convert.WithMaxShardSize(300)}},
	}
	eachBackend(t, func(t *testing.T, b bucketURL) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				local := filepath.Join(t.TempDir(), c.dir) + string(os.PathSeparator)
				if _, err := ckpt.Convert(context.Background(), openCk(t, dcpBasic), local+c.file, c.opts...); err != nil {
					t.Fatal(err)
				}
				want := localFiles(t, local)
				if len(want) < 4 {
					t.Fatalf("want several output files, got %v", names(want))
				}
				for _, n := range []int{1, 2, 3, 8} {
					prefix := b.url(fmt.Sprintf("out/%s%d/", c.name, n))
					urlParts(t, dcpBasic, prefix+c.file, n, c.opts...)
					got := prefixObjects(t, prefix)
					if !reflect.DeepEqual(names(got), names(want)) {
						t.Fatalf("%d parts: objects %v, want %v", n, names(got), names(want))
					}
					for name, w := range want {
						if !bytes.Equal(got[name], w) {
							t.Errorf("%d parts: %s differs from a single local process's", n, name)
						}
					}
				}
				noTemporaries(t, b)
			})
		}
	})
}

// TestConvertURLDCPReadsBack: a single-process DCP output to an object
// store prefix is byte for byte the local one, and ckpt reads it back
// from there identically to its input (tensors byte for byte with their
// dtypes, values equal), whole and chunked; a second conversion to it is
// refused without --force.
func TestConvertURLDCPReadsBack(t *testing.T) {
	inputs := []string{dcpBasic, fixtures + "cuda_training.pt", fixtures + "model.safetensors"}
	eachBackend(t, func(t *testing.T, b bucketURL) {
		ctx := context.Background()
		for i, in := range inputs {
			for _, split := range []string{"", "*=0"} {
				opts := []convert.Option{convert.WithFormat(convert.DCP), convert.WithDCPRanks(2)}
				if split != "" {
					rules, err := statedict.ParseSplitRules(split)
					if err != nil {
						t.Fatal(err)
					}
					opts = append(opts, convert.WithSplit(rules))
				}
				prefix := b.url(fmt.Sprintf("out/rb%d%s/", i, strings.Trim(split, "*=")))
				sum, err := ckpt.Convert(ctx, openCk(t, in), prefix, opts...)
				if err != nil {
					t.Fatalf("%s: %v", in, err)
				}
				if sum.Index != prefix+".metadata" || !reflect.DeepEqual(sum.Files, []string{prefix + "__0_0.distcp", prefix + "__1_0.distcp"}) {
					t.Fatalf("%s: files %v, index %s", in, sum.Files, sum.Index)
				}
				local := filepath.Join(t.TempDir(), "dcp")
				if _, err := ckpt.Convert(ctx, openCk(t, in), local, opts...); err != nil {
					t.Fatal(err)
				}
				want, got := localFiles(t, local), prefixObjects(t, prefix)
				if !reflect.DeepEqual(names(got), names(want)) {
					t.Fatalf("%s: objects %v, local files %v", in, names(got), names(want))
				}
				for name, w := range want {
					if !bytes.Equal(got[name], w) {
						t.Errorf("%s: %s differs from the local output", in, name)
					}
				}
				src := openCk(t, in)
				back, err := ckpt.Open(ctx, prefix)
				if err != nil {
					t.Fatal(err)
				}
				if back.Format != statedict.FormatDCP || len(back.Tensors) != len(src.Tensors) {
					t.Fatalf("%s: read back as %s with %d tensors, want dcp with %d", in, back.Format, len(back.Tensors), len(src.Tensors))
				}
				for _, ta := range src.Tensors {
					tb := back.Tensor(ta.Name)
					if tb == nil {
						t.Fatalf("%s: no tensor %q read back", in, ta.Name)
					}
					x, err1 := ta.ReadAll()
					y, err2 := tb.ReadAll()
					if err1 != nil || err2 != nil || !bytes.Equal(x, y) || ta.DType != tb.DType {
						t.Errorf("%s: %q differs (%v, %v)", in, ta.Name, err1, err2)
					}
				}
				values := func(ck *statedict.Checkpoint) map[string]any {
					m := map[string]any{}
					for _, o := range ck.Objects {
						m[o.Name] = o.Value
					}
					return m
				}
				if w, g := values(src), values(back); !reflect.DeepEqual(w, g) {
					t.Errorf("%s: values differ:\n got %v\nwant %v", in, g, w)
				}
				back.Close()
			}
		}
		// Existing objects are refused before anything is written.
		prefix := b.url("out/rb0/")
		before := readURL(t, prefix+".metadata")
		_, err := ckpt.Convert(ctx, openCk(t, fixtures+"model.safetensors"), prefix, convert.WithFormat(convert.DCP), convert.WithDCPRanks(2))
		if !errors.Is(err, convert.ErrExists) || !strings.Contains(err.Error(), prefix) {
			t.Fatalf("second conversion: got %v, want ErrExists naming the object", err)
		}
		if !bytes.Equal(readURL(t, prefix+".metadata"), before) {
			t.Fatal("the existing .metadata changed")
		}
		noTemporaries(t, b)
	})
}

// TestConvertURLDCPFailureLeavesNothing: a DCP conversion to an object
// store that fails while writing its second rank's file, is cancelled,
// or fails writing the .metadata once both ranks' objects are committed,
// leaves nothing: no object (the committed ones are removed), no pending
// upload.
func TestConvertURLDCPFailureLeavesNothing(t *testing.T) {
	big := bigSafetensors(t, 20<<20)
	opts := []convert.Option{convert.WithFormat(convert.DCP), convert.WithDCPRanks(2)}
	local := filepath.Join(t.TempDir(), "dcp")
	if _, err := ckpt.Convert(context.Background(), openCk(t, big), local, opts...); err != nil {
		t.Fatal(err)
	}
	var distcp int64 // the bytes before the .metadata
	for name, b := range localFiles(t, local) {
		if name != ".metadata" {
			distcp += int64(len(b))
		}
	}
	eachBackend(t, func(t *testing.T, b bucketURL) {
		for _, c := range []struct {
			name             string
			cancelAt, failAt int64
		}{
			{"rank-1-fails", 0, 15 << 20}, // the second tensor, on rank 1
			{"cancel", 15 << 20, 0},
			{"metadata-fails", 0, distcp},
		} {
			ctx, cancel := context.WithCancel(context.Background())
			o := append([]convert.Option{}, opts...)
			if c.cancelAt > 0 {
				var read int64
				o = append(o, convert.WithProgress(func(n int64) {
					if read += n; read >= c.cancelAt {
						cancel()
					}
				}))
			} else {
				left := c.failAt
				o = append(o, convert.WithOutputWrapper(func(w io.Writer) io.Writer { return failAfter{w, &left} }))
			}
			prefix := b.url("out/" + c.name + "/")
			_, err := ckpt.Convert(ctx, openCk(t, big), prefix, o...)
			cancel()
			if c.cancelAt > 0 && !errors.Is(err, context.Canceled) || c.cancelAt == 0 && !errors.Is(err, errInjected) {
				t.Fatalf("%s: got %v", c.name, err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("%s: error of more than one line: %q", c.name, err)
			}
			if left := prefixObjects(t, prefix); len(left) != 0 {
				t.Fatalf("%s: left behind: %v", c.name, names(left))
			}
			if left := b.left(t); len(left) != 0 {
				t.Fatalf("%s: left behind: %v", c.name, left)
			}
		}
	})
}

// TestConvertURLPartMissing: part 0 alone gives up after a short
// --part-wait with ErrPartMissing naming the missing object, writes no
// .metadata and takes back its own object; once part 1 has written its
// share, part 0 completes the output, equal to one local process's. A
// part's object of another size than planned is refused at once.
func TestConvertURLPartMissing(t *testing.T) {
	eachBackend(t, func(t *testing.T, b bucketURL) {
		ctx := context.Background()
		prefix := b.url("out/dcp/")
		opts := []convert.Option{convert.WithFormat(convert.DCP), convert.WithDCPRanks(2)}
		part := func(i int, extra ...convert.Option) error {
			o := append(append([]convert.Option{}, opts...), convert.WithPart(convert.Part{Index: i, Count: 2}))
			_, err := ckpt.Convert(ctx, openCk(t, dcpBasic), prefix, append(o, extra...)...)
			return err
		}
		start := time.Now()
		err := part(0, convert.WithPartWait(300*time.Millisecond))
		if !errors.Is(err, convert.ErrPartMissing) || !strings.Contains(err.Error(), prefix+"__1_0.distcp") {
			t.Fatalf("got %v, want ErrPartMissing naming __1_0.distcp", err)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("gave up after %s", d)
		}
		if left := prefixObjects(t, prefix); len(left) != 0 {
			t.Fatalf("left behind: %v", names(left))
		}
		noTemporaries(t, b)
		if err := part(1); err != nil {
			t.Fatal(err)
		}
		if err := part(0, convert.WithPartWait(time.Minute)); err != nil {
			t.Fatal(err)
		}
		local := filepath.Join(t.TempDir(), "dcp")
		if _, err := ckpt.Convert(ctx, openCk(t, dcpBasic), local, opts...); err != nil {
			t.Fatal(err)
		}
		want, got := localFiles(t, local), prefixObjects(t, prefix)
		if !reflect.DeepEqual(names(got), names(want)) {
			t.Fatalf("objects %v, want %v", names(got), names(want))
		}
		for name, w := range want {
			if !bytes.Equal(got[name], w) {
				t.Errorf("%s differs from a single local process's", name)
			}
		}
		// Another conversion's rank 1 (an object larger than planned) is
		// refused at once, not waited for.
		other := b.url("out/other/")
		st, key, err := objstore.NewStore(ctx, other)
		if err != nil {
			t.Fatal(err)
		}
		w, err := st.Create(ctx, key+"__1_0.distcp")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(make([]byte, len(want["__1_0.distcp"])+1)); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		_, err = ckpt.Convert(ctx, openCk(t, dcpBasic), other, append(opts, convert.WithPart(convert.Part{Index: 0, Count: 2}), convert.WithForce(true), convert.WithPartWait(time.Minute))...)
		if !errors.Is(err, convert.ErrPartMissing) || !strings.Contains(err.Error(), "the plan says") || time.Since(start) > 30*time.Second {
			t.Fatalf("got %v after %s, want ErrPartMissing for the size at once", err, time.Since(start))
		}
		if ok, err := st.Exists(ctx, key+".metadata"); ok || err != nil {
			t.Fatalf(".metadata written (%v)", err)
		}
	})
}
