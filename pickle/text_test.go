package pickle

import (
	"errors"
	"testing"
)

// TestValidText follows Python: bytes.decode("utf-8", "surrogatepass").
func TestValidText(t *testing.T) {
	for _, c := range []struct {
		s    string
		want bool
	}{
		{"", true}, {"encoder.weight", true}, {"é∑😀", true},
		{"\xed\xa0\x80", true}, {"a\xed\xbf\xbfb", true}, // lone surrogates U+D800, U+DFFF
		{"\xff", false}, {"embed\x7f\xffeight", false}, {"\xc3", false}, {"\xed\xa0", false},
		{"\xc0\xaf", false}, {"\xf4\x90\x80\x80", false}, // overlong, beyond U+10FFFF
	} {
		if got := ValidText(c.s); got != c.want {
			t.Errorf("ValidText(%q) = %v, want %v", c.s, got, c.want)
		}
	}
}

// TestInvalidUnicode: a BINUNICODE string that is not UTF-8 is malformed
// (Python's unpickler fails on it too); lone surrogates and Python 2 byte
// strings are not.
func TestInvalidUnicode(t *testing.T) {
	_, err := Unpickle(cat(op(0x80, 2), S("embed\x7f\xffeight"), op('.')))
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("invalid UTF-8: got %v, want ErrMalformed", err)
	}
	for _, p := range [][]byte{
		cat(op(0x80, 2), S("\xed\xa0\x80"), op('.')),
		cat(op(0x80, 2, 'U', 2, 0xff, 0xfe), op('.')),
	} {
		if _, err := Unpickle(p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
}
