package digest

import (
	"errors"
	"testing"
)

// ParseMetadata reads what ckpt convert records, and refuses anything
// else under MetadataKey with ErrMetadata naming the tensor.
func TestParseMetadata(t *testing.T) {
	d, err := New(5)
	if err != nil {
		t.Fatal(err)
	}
	d.Write([]byte("hello"))
	v, err := d.Sum()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseMetadata(map[string]string{"format": "pt", MetadataKey: `{"a.weight":"` + v.String() + `"}`})
	if err != nil || len(got) != 1 || got["a.weight"] != v {
		t.Fatalf("%v, %v", got, err)
	}
	if got, err := ParseMetadata(map[string]string{"format": "pt"}); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("no digests: %v, %v", got, err)
	}
	for _, bad := range []string{`[]`, `{"a":1}`, `{"a.weight":"xxh64c:zz"}`, ``} {
		if _, err := ParseMetadata(map[string]string{MetadataKey: bad}); !errors.Is(err, ErrMetadata) {
			t.Errorf("%q: %v, want ErrMetadata", bad, err)
		}
	}
}

func FuzzParseMetadata(f *testing.F) {
	for _, s := range []string{`{"a":"xxh64c:0123456789abcdef"}`, `{"a":"xxh64c:0"}`, `[]`, `{"a":1}`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseMetadata(map[string]string{MetadataKey: s})
		if err == nil && d == nil {
			t.Error("nil map without error")
		}
	})
}
