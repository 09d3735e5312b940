package torchzip

import (
	"archive/zip"
	"bytes"
	"errors"
	"hash/crc32"
	"io"
	"strings"
	"testing"
)

// archive writes records (name, data) with the Writer.
func archive(t *testing.T, recs ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for i := 0; i < len(recs); i += 2 {
		if err := w.WriteRecord(recs[i], int64(len(recs[i+1])), strings.NewReader(recs[i+1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestReaderRoundTrip: what the Writer writes, the Reader finds by
// torch's case-folded names, in place, with the CRC32 of its bytes.
func TestReaderRoundTrip(t *testing.T) {
	b := archive(t, "data.pkl", "pickle bytes", "data/0", strings.Repeat("x", 1000), "byteorder", "little")
	z, err := NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if z.Prefix() != "archive" {
		t.Errorf("prefix %q", z.Prefix())
	}
	if got := strings.Join(z.Keys(), ","); got != "byteorder,data.pkl,data/0,version" {
		t.Errorf("keys %s", got)
	}
	rec, ok := z.Record("DATA/0")
	if !ok || rec.Name() != "archive/data/0" || rec.Size() != 1000 || !rec.Stored() {
		t.Fatalf("record %v %+v", ok, rec)
	}
	if crc, ok := rec.CRC32(); !ok || crc != crc32.ChecksumIEEE([]byte(strings.Repeat("x", 1000))) {
		t.Errorf("crc %08x %v", crc, ok)
	}
	sec, err := rec.Data()
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(sec)
	if string(data) != strings.Repeat("x", 1000) {
		t.Error("data differs")
	}
	if _, off, _ := sec.Outer(); off%Alignment != 0 {
		t.Errorf("payload at %d, not aligned", off)
	}
	pkl, _ := z.Record("data.pkl")
	if b, err := pkl.ReadAll(100); err != nil || string(b) != "pickle bytes" {
		t.Errorf("ReadAll: %q %v", b, err)
	}
	if _, err := pkl.ReadAll(5); !errors.Is(err, ErrMalformed) {
		t.Errorf("ReadAll over its limit: %v", err)
	}
	var spans []Span
	for _, k := range z.Keys() {
		r, _ := z.Record(k)
		sp, err := r.Span()
		if err != nil {
			t.Fatal(err)
		}
		spans = append(spans, sp)
	}
	if err := CheckOverlaps(spans); err != nil {
		t.Errorf("disjoint records: %v", err)
	}
	var g SpanGuard
	g.Seed(spans)
	if err := g.Add(spans[0]); err != nil {
		t.Errorf("a known span again: %v", err)
	}
	alias := spans[1]
	alias.Name = "archive/data/1"
	if err := g.Add(alias); !errors.Is(err, ErrMalformed) {
		t.Errorf("an aliased span: %v", err)
	}
	if err := CheckOverlaps(append(spans, alias)); !errors.Is(err, ErrMalformed) {
		t.Errorf("aliased records: %v", err)
	}
}

// zipOf writes a zip with archive/zip: names as given, stored or deflated.
func zipOf(t *testing.T, method uint16, names ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range names {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: n, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("abc"))
	}
	zw.Close()
	return buf.Bytes()
}

// TestReaderRefuses: what torch would not read as one archive.
func TestReaderRefuses(t *testing.T) {
	cases := []struct {
		name string
		b    []byte
		want error
		rec  string
	}{
		{"no top folder", zipOf(t, zip.Store, "data.pkl"), ErrNotTorchZip, "data.pkl"},
		{"case-folded duplicate", zipOf(t, zip.Store, "a/data.pkl", "a/DATA.pkl"), ErrMalformed, "a/DATA.pkl"},
		{"empty", zipOf(t, zip.Store), ErrMalformed, ""},
		{"cut short", zipOf(t, zip.Store, "a/data.pkl")[:40], ErrTruncated, ""},
	}
	for _, tc := range cases {
		_, err := NewReader(bytes.NewReader(tc.b), int64(len(tc.b)))
		var re *RecordError
		if !errors.Is(err, tc.want) || (tc.rec != "") != errors.As(err, &re) || (re != nil && re.Name != tc.rec) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	b := zipOf(t, zip.Deflate, "a/data.pkl")
	z, err := NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := z.Record("data.pkl")
	if rec.Stored() || rec.Check() != nil {
		t.Errorf("deflated record: stored %v, check %v", rec.Stored(), rec.Check())
	}
	if got, err := rec.ReadAll(10); err != nil || string(got) != "abc" {
		t.Errorf("deflated ReadAll: %q %v", got, err)
	}
}
