package pickle

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzUnpickle checks that no input panics, hangs or escapes the error
// classes, and that results can be walked.
func FuzzUnpickle(f *testing.F) {
	files, _ := filepath.Glob("testdata/*")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		switch {
		case strings.HasSuffix(name, ".pkl"):
			f.Add(data)
		case strings.HasSuffix(name, ".pt") && strings.Contains(name, "legacy"):
			f.Add(data)
		case strings.HasSuffix(name, ".pt"):
			recs, err := readZip(name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(recs["data.pkl"])
		}
	}
	// The hostile corpus (testdata/hostile, see internal/hostile): the
	// data.pkl of each small torch zip.
	hostileFiles, _ := filepath.Glob(filepath.Join("..", "testdata", "hostile", "*.pt"))
	for _, name := range hostileFiles {
		if recs, err := readZip(name); err == nil && len(recs["data.pkl"]) < 1<<20 {
			f.Add(recs["data.pkl"])
		}
	}
	f.Add(cat(proto, v2(pid("FloatStorage", "0", "cpu", 4), 0, ints(2, 2), ints(2, 1), fls), stop))
	f.Add(cat(op(0x80, 4), op(0x8f), op('('), op('C', 1, 'x'), op(0x90), op('('), op('C', 1, 'z'), op(0x91), op(0x86), stop))
	f.Add(cat(proto, call(G("torch._utils", "_rebuild_sparse_tensor"), G("torch", "sparse_coo"),
		T(v2(pid("LongStorage", "0", "cpu", 4), 0, ints(2, 2), ints(2, 1), fls), v2(pid("FloatStorage", "1", "cpu", 2), 0, ints(2), ints(1), fls),
			call(G("torch", "Size"), ints(3, 3)))), stop))
	lim := WithLimits(Limits{MaxDepth: 200, MaxMemo: 1 << 16, MaxContainerLen: 1 << 16, MaxOps: 1 << 20})
	f.Fuzz(func(t *testing.T, data []byte) {
		v, n, err := UnpickleN(data, lim)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrLimit) && !errors.Is(err, ErrUnsafe) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if n <= 0 || n > len(data) {
			t.Fatalf("consumed %d of %d", n, len(data))
		}
		walk(v, map[any]bool{})
	})
}

// walk visits every value once, as callers are told to.
func walk(v any, seen map[any]bool) {
	switch x := v.(type) {
	case *Tuple, *List, *Dict, *Set, *Object, *Foreign:
		if seen[x] {
			return
		}
		seen[x] = true
	}
	switch x := v.(type) {
	case *Tuple:
		for _, e := range *x {
			walk(e, seen)
		}
	case *List:
		for _, e := range *x {
			walk(e, seen)
		}
	case *Dict:
		for _, e := range x.Entries {
			walk(e.Key, seen)
			walk(e.Value, seen)
		}
		walk(x.State, seen)
	case *Set:
		for _, e := range x.Items {
			walk(e, seen)
		}
	case *Object:
		for _, e := range x.Args {
			walk(e, seen)
		}
		walk(x.State, seen)
	case *Foreign:
		for _, e := range x.Args {
			walk(e, seen)
		}
		walk(x.State, seen)
	}
}
