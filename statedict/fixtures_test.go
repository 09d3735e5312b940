package statedict_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/statedict"
)

const fixtures = "../testdata/fixtures"

// expected is what scripts/gen_fixtures.py records beside each fixture from
// what torch itself reports.
type expected struct {
	Format    string           `json:"format"`
	ByteOrder string           `json:"byteorder"`
	Tensors   []expectedTensor `json:"tensors"`
	Objects   map[string]any   `json:"objects"`
	Opaque    []string         `json:"opaque"`
	Foreign   []string         `json:"foreign"`
	Error     string           `json:"error"`
	Global    string           `json:"global"`
	Tensor    string           `json:"tensor"`
	// Reprs are Python's repr() of leaves that are not plain JSON values
	// (sets, frozensets, bytes, complex), by name.
	Reprs map[string]string `json:"reprs"`
	// StorageValues are storages saved as values, by name.
	StorageValues map[string]struct {
		DType  string `json:"dtype"`
		Size   int64  `json:"size"`
		Device string `json:"device"`
	} `json:"storage_values"`
}

type expectedTensor struct {
	Name          string         `json:"name"`
	DType         string         `json:"dtype"`
	Shape         []int64        `json:"shape"`
	Strides       []int64        `json:"strides"`
	StorageOffset int64          `json:"storage_offset"`
	Device        string         `json:"device"`
	RequiresGrad  bool           `json:"requires_grad"`
	Parameter     bool           `json:"parameter"`
	Layout        string         `json:"layout"`
	Quantized     bool           `json:"quantized"`
	StorageKey    string         `json:"storage_key"`
	StorageNBytes int64          `json:"storage_nbytes"`
	Stats         *expectedStats `json:"stats"`
	// DTensor is what torch reports of a DTensor (global shape, strides,
	// repr of the placements, mesh shape, device type, coordinate); the
	// tensor itself is the local shard.
	DTensor *statedict.DTensor `json:"dtensor"`
}

type expectedStats struct {
	Min, Max, Mean *float64
	NaN            int64 `json:"nan"`
	Inf            int64 `json:"inf"`
}

func loadExpected(t *testing.T, path string) expected {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var e expected
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return e
}

func expectedFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m) == 0 {
		t.Fatalf("no fixtures in %s: run make fixtures", dir)
	}
	return m
}

// TestFixtures opens every good fixture and checks it against what torch reported.
func TestFixtures(t *testing.T) {
	for _, ef := range expectedFiles(t, fixtures) {
		path := strings.TrimSuffix(ef, ".expected.json")
		t.Run(filepath.Base(path), func(t *testing.T) {
			want := loadExpected(t, ef)
			ck, err := statedict.Open(path)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer ck.Close()
			checkCheckpoint(t, ck, want)
		})
	}
}

func checkCheckpoint(t *testing.T, ck *statedict.Checkpoint, want expected) {
	t.Helper()
	if string(ck.Format) != want.Format {
		t.Errorf("format %q, want %q", ck.Format, want.Format)
	}
	if want.ByteOrder != "" && ck.ByteOrder != want.ByteOrder {
		t.Errorf("byteorder %q, want %q", ck.ByteOrder, want.ByteOrder)
	}
	got := map[string]*statedict.Tensor{}
	for _, tt := range ck.Tensors {
		got[tt.Name] = tt
	}
	if len(ck.Tensors) != len(want.Tensors) {
		var names []string
		for _, tt := range ck.Tensors {
			names = append(names, tt.Name)
		}
		t.Errorf("%d tensors, want %d; got %v", len(ck.Tensors), len(want.Tensors), names)
	}
	for _, w := range want.Tensors {
		g := got[w.Name]
		if g == nil {
			t.Errorf("tensor %q missing", w.Name)
			continue
		}
		checkTensor(t, g, w)
	}
	objs := map[string]statedict.Object{}
	for _, o := range ck.Objects {
		objs[o.Name] = o
	}
	for name, wv := range want.Objects {
		o, ok := objs[name]
		if !ok {
			t.Errorf("object %q missing", name)
			continue
		}
		if r, ok := want.Reprs[name]; ok {
			if got := pickle.Repr(o.Value); got != r {
				t.Errorf("object %q prints %s, Python prints %s", name, got, r)
			}
			continue
		}
		if !sameValue(o.Value, wv) {
			t.Errorf("object %q = %#v, want %#v", name, o.Value, wv)
		}
	}
	storages := 0
	for _, o := range ck.Objects {
		ref, ok := o.Value.(*pickle.StorageRef)
		if !ok {
			continue
		}
		storages++
		w, ok := want.StorageValues[o.Name]
		dt := ref.DType
		if dt == "" {
			dt = "uint8"
		}
		if !ok || o.Type != "torch.storage.TypedStorage" || dt != w.DType || ref.Len() != w.Size || ref.Location != w.Device {
			t.Errorf("storage value %q: %s %s %d %s, want %+v", o.Name, o.Type, dt, ref.Len(), ref.Location, w)
		}
	}
	if storages != len(want.StorageValues) {
		t.Errorf("%d storage values, want %d", storages, len(want.StorageValues))
	}
	if want.Objects != nil && len(ck.Objects)-storages != len(want.Objects) {
		t.Errorf("%d objects, want %d", len(ck.Objects)-storages, len(want.Objects))
	}
	var opaque, foreign []string
	for _, o := range ck.Opaque {
		opaque = append(opaque, o.Name)
	}
	for _, o := range ck.Foreign {
		foreign = append(foreign, o.Type)
	}
	if want.Opaque != nil && !sameSet(opaque, want.Opaque) {
		t.Errorf("opaque %v, want %v", opaque, want.Opaque)
	}
	if want.Foreign != nil && !sameSet(foreign, want.Foreign) {
		t.Errorf("foreign %v, want %v", foreign, want.Foreign)
	}
}

func checkTensor(t *testing.T, g *statedict.Tensor, w expectedTensor) {
	t.Helper()
	errorf := func(format string, a ...any) { t.Errorf("%s: %s", w.Name, fmt.Sprintf(format, a...)) }
	if gd, wd := fmt.Sprintf("%+v", g.DTensor), fmt.Sprintf("%+v", w.DTensor); gd != wd {
		errorf("DTensor %s, torch reports %s", gd, wd)
	}
	if g.DType.String() != w.DType {
		errorf("dtype %s, want %s", g.DType, w.DType)
	}
	if fmt.Sprint(g.Shape) != fmt.Sprint(w.Shape) {
		errorf("shape %v, want %v", g.Shape, w.Shape)
	}
	if w.Strides != nil && fmt.Sprint(g.Strides) != fmt.Sprint(w.Strides) {
		errorf("strides %v, want %v", g.Strides, w.Strides)
	}
	if g.Offset != w.StorageOffset {
		errorf("offset %d, want %d", g.Offset, w.StorageOffset)
	}
	if g.Device != w.Device {
		errorf("device %q, want %q", g.Device, w.Device)
	}
	if g.RequiresGrad != w.RequiresGrad || g.Parameter != w.Parameter {
		errorf("requires_grad %v parameter %v, want %v %v", g.RequiresGrad, g.Parameter, w.RequiresGrad, w.Parameter)
	}
	if w.Layout != "" && string(g.Layout) != w.Layout {
		errorf("layout %s, want %s", g.Layout, w.Layout)
	}
	if (g.Quant != nil) != w.Quantized {
		errorf("quantized %v, want %v", g.Quant != nil, w.Quantized)
	}
	if g.Storage != nil {
		if w.StorageKey != "" && g.Storage.Key != w.StorageKey {
			errorf("storage key %q, want %q", g.Storage.Key, w.StorageKey)
		}
		if w.StorageNBytes != 0 && g.Storage.NBytes != w.StorageNBytes {
			errorf("storage bytes %d, want %d", g.Storage.NBytes, w.StorageNBytes)
		}
	}
	if w.Stats == nil {
		return
	}
	st, err := statedict.ComputeStats(context.Background(), g, nil)
	if err != nil {
		errorf("stats: %v", err)
		return
	}
	if st.NaN != w.Stats.NaN || st.Inf != w.Stats.Inf {
		errorf("nan/inf %d/%d, want %d/%d", st.NaN, st.Inf, w.Stats.NaN, w.Stats.Inf)
	}
	for _, c := range []struct {
		what string
		got  float64
		want *float64
	}{{"min", st.Min, w.Stats.Min}, {"max", st.Max, w.Stats.Max}, {"mean", st.Mean, w.Stats.Mean}} {
		if c.want == nil {
			continue
		}
		if !closeTo(c.got, *c.want) {
			errorf("%s %v, want %v", c.what, c.got, *c.want)
		}
	}
}

func closeTo(a, b float64) bool {
	if a == b {
		return true
	}
	return math.Abs(a-b) <= 1e-6*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func sameSet(a, b []string) bool {
	a, b = append([]string(nil), a...), append([]string(nil), b...)
	sort.Strings(a)
	sort.Strings(b)
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// sameValue compares a Go leaf with the JSON value torch reported.
func sameValue(got any, want any) bool {
	switch w := want.(type) {
	case nil:
		return got == nil
	case bool:
		return got == w
	case string:
		return got == w
	case float64:
		switch g := got.(type) {
		case int64:
			return float64(g) == w
		case float64:
			return closeTo(g, w)
		}
	}
	return fmt.Sprint(got) == fmt.Sprint(want)
}

// TestBadFixtures opens every broken or hostile fixture and checks the error.
func TestBadFixtures(t *testing.T) {
	kinds := map[string]error{
		"unsafe":         pickle.ErrUnsafe,
		"format":         statedict.ErrFormat,
		"malformed":      nil, // either package's ErrMalformed
		"missing-record": statedict.ErrMissingRecord,
		"short-storage":  statedict.ErrShortStorage,
		"overflow":       statedict.ErrOverflow,
		"truncated":      statedict.ErrTruncated,
		"empty":          statedict.ErrEmpty,
		"limit":          pickle.ErrLimit,
	}
	for _, ef := range expectedFiles(t, filepath.Join(fixtures, "bad")) {
		path := strings.TrimSuffix(ef, ".expected.json")
		t.Run(filepath.Base(path), func(t *testing.T) {
			want := loadExpected(t, ef)
			if want.Error == "sparse-data" {
				checkSparseData(t, path, want.Tensor)
				return
			}
			ck, err := statedict.Open(path)
			if err == nil {
				ck.Close()
				t.Fatalf("Open succeeded, want a %s error", want.Error)
			}
			sentinel, known := kinds[want.Error]
			if !known {
				t.Fatalf("unknown expected error kind %q", want.Error)
			}
			if sentinel == nil {
				if !errors.Is(err, statedict.ErrMalformed) && !errors.Is(err, pickle.ErrMalformed) {
					t.Errorf("error %v, want malformed", err)
				}
			} else if !errors.Is(err, sentinel) {
				t.Errorf("error %v, want %v", err, sentinel)
			}
			var se *statedict.Error
			if !errors.As(err, &se) || se.File == "" {
				t.Errorf("error %v does not name the file", err)
			}
			if want.Global != "" && !strings.Contains(err.Error(), want.Global) {
				t.Errorf("error %v does not name the global %s", err, want.Global)
			}
			if want.Tensor != "" && !strings.Contains(err.Error(), want.Tensor) {
				t.Errorf("error %v does not name the tensor %s", err, want.Tensor)
			}
		})
	}
}

// checkSparseData: a sparse tensor whose invariants do not hold opens (its
// metadata is fine), dense tensors beside it read, and reading any of its
// components fails with ErrInvalidSparse naming it, as torch.load refuses
// it, on every way into the data: Tensor.Open (and ComputeStats through
// it), Tensor.Raw, Storage.Open, Storage.OpenLittleEndian, Storage.ReaderAt.
func checkSparseData(t *testing.T, path, name string) {
	ck, err := statedict.Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer ck.Close()
	parts := 0
	for _, tt := range ck.Tensors {
		_, err := statedict.ComputeStats(context.Background(), tt, nil)
		_, rawErr := tt.Raw()
		_, openErr := tt.Storage.Open()
		_, leErr := tt.Storage.OpenLittleEndian()
		_, raErr := tt.Storage.ReaderAt()
		if tt.Component == "" {
			if err := errors.Join(err, rawErr, openErr, leErr, raErr); err != nil {
				t.Errorf("%s: %v", tt.Name, err)
			}
			continue
		}
		parts++
		for i, err := range []error{err, rawErr, openErr, leErr, raErr} {
			var se *statedict.Error
			if !errors.Is(err, statedict.ErrInvalidSparse) || !errors.As(err, &se) || !strings.Contains(err.Error(), name) {
				t.Errorf("%s: path %d: error %v, want ErrInvalidSparse naming %s", tt.Name, i, err, name)
			}
		}
		if parts == 1 {
			t.Log(err)
		}
	}
	if parts == 0 {
		t.Errorf("no sparse components in %s", path)
	}
}
