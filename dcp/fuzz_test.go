package dcp

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ckpt-dev/ckpt/pickle"
)

const fixtures = "../testdata/dcp"

// FuzzMetadata feeds mutations of a real DCP .metadata (seeds: the
// fixture's and the damaged ones under testdata/dcp/bad) to the Reader
// over the fixture's .distcp files: parsing, tiling and locating items
// must return, not panic or hang; the chunks a tensor keeps lie inside
// its shape and cover it exactly when Chunks reports no problem; each
// item located has the length its location says; and metadata that
// Encode accepts parses back to the same entries.
func FuzzMetadata(f *testing.F) {
	dir := filepath.Join(fixtures, "basic")
	seed, err := os.ReadFile(filepath.Join(dir, MetadataFile))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	bad, _ := filepath.Glob(filepath.Join(fixtures, "bad", "*.metadata"))
	for _, p := range bad {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add(seed[:len(seed)/2])
	f.Add([]byte{0x80, 0x04, 0x4e, 0x2e}) // None
	fsys := DirFS(dir)
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(fsys, data, WithPickleLimits(limitsForFuzz()))
		if err != nil {
			return
		}
		defer r.Close()
		md := r.Metadata()
		for i := range md.Entries {
			e := &md.Entries[i]
			if !e.Tensor {
				if it, err := r.Item(e.Value); err == nil && it.Size() != e.Value.Length {
					t.Fatalf("%s: item of %d bytes at %+v", e.FQN, it.Size(), e.Value)
				}
				continue
			}
			kept, err := r.Chunks(e)
			var vol int64
			for _, c := range kept {
				v := int64(1)
				for d := range e.Size {
					if c.Offsets[d] < 0 || c.Sizes[d] <= 0 || c.Offsets[d]+c.Sizes[d] > e.Size[d] {
						t.Fatalf("%s: kept chunk %v+%v outside %v", e.FQN, c.Offsets, c.Sizes, e.Size)
					}
					v *= c.Sizes[d]
				}
				vol += v
				if err == nil {
					if it, err := r.Item(c.Location); err != nil || it.Size() != c.Length {
						t.Fatalf("%s: chunk at %+v: %v", e.FQN, c.Location, err)
					}
				}
			}
			if n, _ := numel(e.Size); err == nil && vol != n {
				t.Fatalf("%s: no problem, but chunks cover %d of %d elements", e.FQN, vol, n)
			}
		}
		b, err := md.Encode()
		if err != nil {
			return
		}
		back, err := ParseMetadata(b)
		if err != nil {
			t.Fatalf("Encode wrote what ParseMetadata refuses: %v", err)
		}
		for i, e := range md.Entries {
			g := back.Entries[i]
			if g.FQN != e.FQN || g.Tensor != e.Tensor || g.DType != e.DType || !reflect.DeepEqual(g.Size, e.Size) ||
				!reflect.DeepEqual(g.Chunks, e.Chunks) || g.Value != e.Value {
				t.Fatalf("entry %d: %+v parses back as %+v", i, e, g)
			}
		}
	})
}

// FuzzSavedOffsets feeds DCP_SHARDING_INFO values to SavedOffsets: it
// must return, not panic; what it accepts is at most 64 non-negative
// offsets per tensor; and ChunksAway agrees with them.
func FuzzSavedOffsets(f *testing.F) {
	f.Add(`{"col": {"saved_offsets": [0, 0]}, "mesh": {"saved_offsets": [0, 0]}, "rep": {"saved_offsets": [0]}}`)
	f.Add(`{"col": {"saved_offsets": [0, 1]}, "mesh": {"saved_offsets": [1, 0]}, "rep": {"saved_offsets": [5]}}`)
	f.Add(`{"col": {"saved_offsets": [0, 4611686018427387904]}}`)
	f.Add(`{"col": {"saved_offsets": []}}`)
	f.Add(`{"a": {}}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, info string) {
		md := map[string]string{ShardingInfoKey: info}
		offs, ok, err := SavedOffsets(md)
		if !ok {
			t.Fatal("the key is there, but SavedOffsets says it is not")
		}
		away := false
		for name, o := range offs {
			if len(o) > 64 {
				t.Fatalf("%q: %d offsets", name, len(o))
			}
			for _, v := range o {
				if v < 0 {
					t.Fatalf("%q: offset %d", name, v)
				}
				away = away || v != 0
			}
		}
		if err == nil && ChunksAway(md) != away {
			t.Fatalf("ChunksAway %v, offsets %v", !away, offs)
		}
	})
}

// limitsForFuzz bounds each input's unpickling so that a fuzz run does
// not spend its time on one long pickle.
func limitsForFuzz() pickle.Limits {
	l := pickle.DefaultLimits()
	l.MaxOps = 1 << 20
	return l
}
