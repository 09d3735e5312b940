package pickle

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"unicode/utf8"
)

// decodeStringLiteral decodes the argument of protocol-0 STRING: a quoted
// literal with Python escapes (codecs.escape_decode).
func decodeStringLiteral(l []byte) ([]byte, error) {
	if len(l) < 2 || l[0] != l[len(l)-1] || (l[0] != '\'' && l[0] != '"') {
		return nil, malformed("STRING argument must be quoted")
	}
	l = l[1 : len(l)-1]
	out := make([]byte, 0, len(l))
	for i := 0; i < len(l); i++ {
		c := l[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		if i >= len(l) {
			return nil, malformed("trailing backslash in STRING")
		}
		switch c = l[i]; c {
		case '\n':
		case '\\', '\'', '"':
			out = append(out, c)
		case 'a':
			out = append(out, 7)
		case 'b':
			out = append(out, 8)
		case 'f':
			out = append(out, 12)
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'v':
			out = append(out, 11)
		case 'x':
			if i+2 >= len(l) {
				return nil, malformed("truncated \\x escape in STRING")
			}
			v, err := strconv.ParseUint(string(l[i+1:i+3]), 16, 8)
			if err != nil {
				return nil, malformed("bad \\x escape in STRING")
			}
			out = append(out, byte(v))
			i += 2
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v, j := 0, i
			for ; j < len(l) && j < i+3 && l[j] >= '0' && l[j] <= '7'; j++ {
				v = v*8 + int(l[j]-'0')
			}
			out = append(out, byte(v))
			i = j - 1
		default:
			out = append(out, '\\', c)
		}
	}
	return out, nil
}

// decodeRawUnicodeEscape decodes the argument of protocol-0 UNICODE
// (Python's raw-unicode-escape codec) into UTF-8. Bytes stand for the code
// points U+0000..U+00FF; \uXXXX and \UXXXXXXXX are the only escapes, and a
// backslash before any other byte keeps both, as CPython does.
func decodeRawUnicodeEscape(l []byte) ([]byte, error) {
	out := make([]byte, 0, len(l))
	for i := 0; i < len(l); i++ {
		c := l[i]
		if c != '\\' || i+1 >= len(l) {
			out = utf8.AppendRune(out, rune(c))
			continue
		}
		i++
		n := 0
		switch l[i] {
		case 'u':
			n = 4
		case 'U':
			n = 8
		default:
			out = append(out, '\\')
			out = utf8.AppendRune(out, rune(l[i]))
			continue
		}
		if i+n >= len(l) {
			return nil, malformed("truncated \\u escape in UNICODE")
		}
		v, err := strconv.ParseUint(string(l[i+1:i+1+n]), 16, 32)
		if err != nil || v > utf8.MaxRune {
			return nil, malformed("bad \\u escape in UNICODE")
		}
		out = utf8.AppendRune(out, rune(v))
		i += n
	}
	return out, nil
}

// strAt returns the string a slot holds (v.isStr()): read again from the
// opcode that pushed it, which the validating pass has checked already.
func (s *scanner) strAt(v aval) string {
	if v <= strFloor {
		return s.strs[strFloor-v]
	}
	off := int(v)
	d := s.data
	switch d[off] {
	case 'X', 'T':
		n := int(binary.LittleEndian.Uint32(d[off+1:]))
		return s.str[off+5 : off+5+n]
	case 0x8c, 'U':
		n := int(d[off+1])
		return s.str[off+2 : off+2+n]
	case 0x8d:
		n := int(binary.LittleEndian.Uint64(d[off+1:]))
		return s.str[off+9 : off+9+n]
	case 'S', 'V':
		l := d[off+1:]
		l = l[:bytes.IndexByte(l, '\n')]
		var dec []byte
		if d[off] == 'S' {
			dec, _ = decodeStringLiteral(l)
		} else {
			dec, _ = decodeRawUnicodeEscape(l)
		}
		return string(dec)
	}
	panic("pickle: strAt of a slot that holds no string")
}
