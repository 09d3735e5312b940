package statedict_test

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/hostile"
	"github.com/ckpt-dev/ckpt/statedict"
)

// FuzzPickleBounded asserts the resource bound, not only the absence of
// panics: any data.pkl of n bytes (inside a torch zip that holds four
// small storage records) opens, or fails, allocating at most 64 MiB plus
// 512 bytes per input byte, garbage included. Reference bombs, floods and
// huge claimed sizes must all stay under it (docs/limits.md).
func FuzzPickleBounded(f *testing.F) {
	for _, c := range hostile.Cases() {
		if c.Big || filepath.Ext(c.Name) != ".pt" {
			continue
		}
		if pkl := dataPKL(c.Data()); pkl != nil && len(pkl) < 64<<10 {
			f.Add(pkl)
		}
	}
	m, _ := filepath.Glob(filepath.Join(fixtures, "*.pt"))
	for _, p := range m {
		if b, err := os.ReadFile(p); err == nil {
			if pkl := dataPKL(b); pkl != nil {
				f.Add(pkl)
			}
		}
	}
	records := map[string][]byte{}
	for _, k := range []string{"0", "1", "2", "3"} {
		records["data/"+k] = make([]byte, 64)
	}
	f.Fuzz(func(t *testing.T, pkl []byte) {
		if len(pkl) > 1<<20 {
			return
		}
		in := hostile.TorchZip(pkl, records, false)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		ck, err := statedict.NewReader(bytes.NewReader(in), int64(len(in)))
		runtime.ReadMemStats(&after)
		if err == nil {
			ck.Close()
		}
		if alloc, bound := after.TotalAlloc-before.TotalAlloc, uint64(64<<20+512*len(in)); alloc > bound {
			t.Fatalf("%d bytes allocated for a %d-byte pickle (bound %d); err=%v", alloc, len(pkl), bound, err)
		}
	})
}

// dataPKL returns the data.pkl record of a torch zip, or nil.
func dataPKL(b []byte) []byte {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil
	}
	for _, f := range zr.File {
		if filepath.Base(f.Name) == "data.pkl" && f.UncompressedSize64 < 1<<20 {
			rc, err := f.Open()
			if err != nil {
				return nil
			}
			defer rc.Close()
			data, _ := io.ReadAll(rc)
			return data
		}
	}
	return nil
}
