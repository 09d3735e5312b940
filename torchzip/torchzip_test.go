package torchzip_test

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/big"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/ckpt-dev/ckpt/torchzip"
)

// TestWriterLayout writes to a bytes.Buffer (an io.ReaderFrom, which
// records are read into directly) and to a plain io.Writer (records are
// copied through the Writer's buffer).
func TestWriterLayout(t *testing.T) {
	for _, plain := range []bool{false, true} {
		writerLayout(t, plain)
	}
}

func writerLayout(t *testing.T, plain bool) {
	var buf bytes.Buffer
	var w io.Writer = &buf
	if plain {
		w = struct{ io.Writer }{&buf}
	}
	zw := torchzip.NewWriter(w, torchzip.WithBufferSize(4096))
	recs := map[string][]byte{"data.pkl": []byte("x"), "data/0": bytes.Repeat([]byte{7, 8, 9}, 5000), "data/1": {}}
	for _, n := range []string{"data.pkl", "data/0", "data/1"} {
		if err := zw.WriteRecord(n, int64(len(recs[n])), bytes.NewReader(recs[n])); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	recs["version"] = []byte("3\n")
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
		if f.Method != zip.Store {
			t.Errorf("%s: method %d, want stored", f.Name, f.Method)
		}
		off, err := f.DataOffset()
		if err != nil {
			t.Fatal(err)
		}
		if off%torchzip.Alignment != 0 {
			t.Errorf("%s: payload at %d, not %d-byte aligned", f.Name, off, torchzip.Alignment)
		}
		want := recs[strings.TrimPrefix(f.Name, "archive/")]
		if f.CRC32 != crc32.ChecksumIEEE(want) {
			t.Errorf("%s: CRC %08x, want %08x", f.Name, f.CRC32, crc32.ChecksumIEEE(want))
		}
		rc, _ := f.Open()
		got, err := io.ReadAll(rc) // archive/zip checks the CRC at EOF
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: read %q, %v", f.Name, got, err)
		}
	}
	if got := strings.Join(names, ","); got != "archive/data.pkl,archive/data/0,archive/data/1,archive/version" {
		t.Errorf("records %s", got)
	}
}

func TestWriterErrors(t *testing.T) {
	zw := torchzip.NewWriter(io.Discard)
	if err := zw.WriteRecord("a", 5, strings.NewReader("abc")); !errors.Is(err, torchzip.ErrDataLength) {
		t.Errorf("short record: %v", err)
	}
	if err := zw.WriteRecord("b", 1, strings.NewReader("x")); !errors.Is(err, torchzip.ErrClosed) {
		t.Errorf("after failure: %v", err)
	}
	zw = torchzip.NewWriter(io.Discard)
	if err := zw.WriteRecord("a", 1, strings.NewReader("ab")); !errors.Is(err, torchzip.ErrDataLength) {
		t.Errorf("long record: %v", err)
	}
	zw = torchzip.NewWriter(io.Discard)
	_ = zw.WriteRecord("a", 0, strings.NewReader(""))
	if err := zw.WriteRecord("a", 0, strings.NewReader("")); !errors.Is(err, torchzip.ErrInvalid) {
		t.Errorf("duplicate: %v", err)
	}
}

// TestRoundTrip writes a state dict with tied weights, a view, a
// parameter and plain values, and reads it back with package statedict.
func TestRoundTrip(t *testing.T) {
	s0 := &torchzip.StorageRef{Key: "0", DType: dtype.Float32, Location: "cuda:1", NumEl: 6}
	s1 := &torchzip.StorageRef{Key: "1", DType: dtype.Int64, Location: "cpu", NumEl: 2}
	entries := []torchzip.Entry{
		{Name: "w", Tensor: &torchzip.TensorRef{Storage: s0, Shape: []int64{2, 3}, Strides: []int64{3, 1}, Parameter: true, RequiresGrad: true}},
		{Name: "tied", Tensor: &torchzip.TensorRef{Storage: s0, Shape: []int64{2, 3}, Strides: []int64{3, 1}}},
		{Name: "view", Tensor: &torchzip.TensorRef{Storage: s0, Offset: 1, Shape: []int64{2}, Strides: []int64{2}}},
		{Name: "ids", Tensor: &torchzip.TensorRef{Storage: s1, Shape: []int64{2}, Strides: []int64{1}}},
		{Name: "epoch", Value: int64(-70000)},
		{Name: "big", Value: new(big.Int).Lsh(big.NewInt(-3), 70)},
		{Name: "name", Value: "héllo"},
		{Name: "flag", Value: true},
		{Name: "none", Value: nil},
	}
	data0 := make([]byte, 24)
	for i := range data0 {
		data0[i] = byte(i)
	}
	ck := openArchive(t, entries, data0, make([]byte, 16))
	if len(ck.Tensors) != 4 || len(ck.Storages) != 2 {
		t.Fatalf("%d tensors, %d storages", len(ck.Tensors), len(ck.Storages))
	}
	w, tied, view := ck.Tensor("w"), ck.Tensor("tied"), ck.Tensor("view")
	if !w.Parameter || !w.RequiresGrad || tied.Parameter || w.Storage != tied.Storage || view.Storage != w.Storage {
		t.Errorf("parameter/tie lost: %+v %+v", w, tied)
	}
	if w.Device != "cuda:1" || view.Offset != 1 || view.Strides[0] != 2 || !w.Storage.HasCRC {
		t.Errorf("w %+v view %+v", w, view)
	}
	b, err := view.ReadAll()
	if err != nil || !bytes.Equal(b, append(append([]byte{}, data0[4:8]...), data0[12:16]...)) {
		t.Errorf("view data %v %v", b, err)
	}
	vals := map[string]string{}
	for _, o := range ck.Objects {
		vals[o.Name] = o.Type
	}
	if len(vals) != 5 || vals["epoch"] != "int" || vals["big"] != "int" || vals["name"] != "str" {
		t.Errorf("objects %v", ck.Objects)
	}
	for _, o := range ck.Objects {
		if o.Name == "big" && o.Value.(*big.Int).Cmp(new(big.Int).Lsh(big.NewInt(-3), 70)) != 0 {
			t.Errorf("big = %v", o.Value)
		}
		if o.Name == "epoch" && o.Value != int64(-70000) {
			t.Errorf("epoch = %v", o.Value)
		}
	}
}

func TestEncodeRefuses(t *testing.T) {
	s := &torchzip.StorageRef{Key: "0", DType: dtype.Invalid, Location: "cpu", NumEl: 1}
	for _, c := range []struct {
		e    torchzip.Entry
		want error
	}{
		{torchzip.Entry{Name: "f", Value: struct{}{}}, torchzip.ErrUnsupportedValue},
		{torchzip.Entry{Name: "b", Value: []byte("x")}, torchzip.ErrUnsupportedValue},
		{torchzip.Entry{Name: "t", Tensor: &torchzip.TensorRef{Storage: s, Shape: []int64{1}, Strides: []int64{1}}}, torchzip.ErrUnsupportedDType},
		{torchzip.Entry{Name: "t", Tensor: &torchzip.TensorRef{Storage: s, Shape: []int64{1}}}, torchzip.ErrInvalid},
	} {
		_, err := torchzip.EncodeStateDict([]torchzip.Entry{c.e})
		var re *torchzip.RecordError
		if !errors.Is(err, c.want) || !errors.As(err, &re) || re.Name != c.e.Name {
			t.Errorf("%+v: %v, want %v", c.e, err, c.want)
		}
	}
	if _, err := torchzip.EncodeStateDict([]torchzip.Entry{{Name: "a"}, {Name: "a"}}); !errors.Is(err, torchzip.ErrInvalid) {
		t.Errorf("duplicate key: %v", err)
	}
}

// TestManyEntries crosses the SETITEMS batch size.
func TestManyEntries(t *testing.T) {
	var entries []torchzip.Entry
	for i := range 2500 {
		entries = append(entries, torchzip.Entry{Name: strings.Repeat("k", 1+i%7) + string(rune('a'+i%26)) + big.NewInt(int64(i)).String(), Value: int64(i)})
	}
	pkl, err := torchzip.EncodeStateDict(entries)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := torchzip.NewWriter(&buf)
	if err := zw.WriteRecord("data.pkl", int64(len(pkl)), bytes.NewReader(pkl)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	ck, err := statedict.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if len(ck.Objects) != 2500 {
		t.Errorf("%d objects", len(ck.Objects))
	}
}

// TestNotText: names and strings Python could not decode are refused,
// naming the entry, instead of written into a pickle torch cannot load.
func TestNotText(t *testing.T) {
	_, err := torchzip.EncodeStateDict([]torchzip.Entry{{Name: "embed\xffweight", Value: int64(1)}})
	var re *torchzip.RecordError
	if !errors.Is(err, torchzip.ErrInvalid) || !errors.As(err, &re) || re.Name != "embed\xffweight" {
		t.Errorf("bad key: %v", err)
	}
	if _, err := torchzip.EncodeStateDict([]torchzip.Entry{{Name: "note", Value: "\xc3"}}); !errors.Is(err, torchzip.ErrInvalid) {
		t.Errorf("bad string value: %v", err)
	}
	if _, err := torchzip.EncodeStateDict([]torchzip.Entry{{Name: "surrogate\xed\xa0\x80", Value: int64(1)}}); err != nil {
		t.Errorf("lone surrogate (Python can hold it): %v", err)
	}
	if _, err := torchzip.EncodeTree(&pickle.Dict{Entries: []pickle.DictEntry{{Key: "k\xff", Value: int64(1)}}}); !errors.Is(err, torchzip.ErrInvalid) {
		t.Errorf("tree key: %v", err)
	}
}

// TestRoundTripTorch2DTypes writes float8 and uint16 tensors the way torch
// 2.x does (_rebuild_tensor_v3 over an UntypedStorage, tied and viewed,
// one a parameter) and reads them back with package statedict.
func TestRoundTripTorch2DTypes(t *testing.T) {
	f8 := &torchzip.StorageRef{Key: "0", DType: dtype.Float8E4M3FN, Location: "cuda:0", NumEl: 6}
	u16 := &torchzip.StorageRef{Key: "1", DType: dtype.Uint16, Location: "cpu", NumEl: 3}
	entries := []torchzip.Entry{
		{Name: "f8", Tensor: &torchzip.TensorRef{Storage: f8, Shape: []int64{2, 3}, Strides: []int64{3, 1}, Parameter: true, RequiresGrad: true}},
		{Name: "f8.t", Tensor: &torchzip.TensorRef{Storage: f8, Offset: 1, Shape: []int64{2, 2}, Strides: []int64{1, 3}}},
		{Name: "u16", Tensor: &torchzip.TensorRef{Storage: u16, Shape: []int64{3}, Strides: []int64{1}}},
	}
	data := []byte{0, 1, 2, 3, 4, 5}
	u16data := []byte{1, 0, 0xff, 0xff, 7, 1}
	ck := openArchive(t, entries, data, u16data)
	f, ft, u := ck.Tensor("f8"), ck.Tensor("f8.t"), ck.Tensor("u16")
	if f == nil || ft == nil || u == nil {
		t.Fatalf("tensors %v", ck.Tensors)
	}
	if f.DType != dtype.Float8E4M3FN || !f.Parameter || f.Device != "cuda:0" || f.Storage != ft.Storage || f.Storage.NBytes != 6 {
		t.Errorf("f8 %+v", f)
	}
	if u.DType != dtype.Uint16 || u.Storage.NBytes != 6 {
		t.Errorf("u16 %+v", u)
	}
	if b, err := ft.ReadAll(); err != nil || !bytes.Equal(b, []byte{1, 4, 2, 5}) {
		t.Errorf("f8.t bytes %v %v", b, err)
	}
	if b, err := u.ReadAll(); err != nil || !bytes.Equal(b, u16data) {
		t.Errorf("u16 bytes %v %v", b, err)
	}
}

// openArchive encodes entries as a state dict, writes it and the storage
// records (data/0, data/1, ... in order) to an archive, and opens that
// with package statedict.
func openArchive(t *testing.T, entries []torchzip.Entry, storages ...[]byte) *statedict.Checkpoint {
	t.Helper()
	pkl, err := torchzip.EncodeStateDict(entries)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := torchzip.NewWriter(&buf)
	if err := zw.WriteRecord("data.pkl", int64(len(pkl)), bytes.NewReader(pkl)); err != nil {
		t.Fatal(err)
	}
	for i, b := range storages {
		if err := zw.WriteRecord(fmt.Sprintf("data/%d", i), int64(len(b)), bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	ck, err := statedict.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return ck
}
