package pickle

import "unicode/utf8"

// ValidText reports whether s is text Python's unpickler accepts in a
// BINUNICODE opcode: UTF-8, where code points U+D800-U+DFFF (lone
// surrogates, which Python strings may hold) are allowed as well, as
// Python's "surrogatepass" error handler does. Strings that are not
// valid text cannot be loaded by Python: Unpickle rejects them
// (ErrMalformed), and writers of pickles should too.
func ValidText(s string) bool {
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			// A surrogate: ED A0..BF 80..BF.
			if i+2 < len(s) && s[i] == 0xed && s[i+1]&0xe0 == 0xa0 && s[i+2]&0xc0 == 0x80 {
				i += 3
				continue
			}
			return false
		}
		i += n
	}
	return true
}
