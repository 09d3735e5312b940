package pickle

import (
	"bytes"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxReprLen bounds the text Repr returns; longer values end in "...".
const maxReprLen = 4096

// Repr renders a value of the tree Unpickle returns the way Python's
// repr() shows it: None, True, 3, 1.0, 'text', b'raw', (1,), [1, 2],
// {'a': 1}, {1, 2}, set(), frozenset({1, 2}), (1+2j), torch.float32,
// device(type='cuda', index=1). Values Python shows by class (tensors,
// storages, objects) are rendered as <...> descriptions. Shared and cyclic
// containers print as "[...]" (or "{...}") when met again on the current path, as Python
// does. The result is at most about 4 KiB.
func Repr(v any) string {
	r := &reprer{onPath: map[any]bool{}}
	r.value(v)
	return r.b.String()
}

type reprer struct {
	b      strings.Builder
	onPath map[any]bool
	full   bool
}

func (r *reprer) write(s string) {
	if r.full {
		return
	}
	if r.b.Len()+len(s) > maxReprLen {
		r.b.WriteString(s[:max(0, maxReprLen-r.b.Len())])
		r.b.WriteString("...")
		r.full = true
		return
	}
	r.b.WriteString(s)
}

// enter guards containers against cycles; it reports false (and writes
// what Python writes, "[...]" for a list) for a container already on the
// path.
func (r *reprer) enter(c any, again string) bool {
	if r.onPath[c] {
		r.write(again)
		return false
	}
	r.onPath[c] = true
	return true
}

func (r *reprer) items(open, close string, items []any, trailingComma bool) {
	r.write(open)
	for i, it := range items {
		if r.full {
			return
		}
		if i > 0 {
			r.write(", ")
		}
		r.value(it)
	}
	if trailingComma && len(items) == 1 {
		r.write(",")
	}
	r.write(close)
}

func (r *reprer) value(v any) {
	if r.full {
		return
	}
	switch x := v.(type) {
	case nil:
		r.write("None")
	case bool:
		if x {
			r.write("True")
		} else {
			r.write("False")
		}
	case int64:
		r.write(strconv.FormatInt(x, 10))
	case int:
		r.write(strconv.Itoa(x))
	case *big.Int:
		r.write(x.String())
	case float64:
		r.write(FloatRepr(x))
	case complex128:
		r.write(complexRepr(x))
	case string:
		r.write(strRepr(x, maxReprLen+1)) // write cuts it and adds "..."
	case []byte:
		r.write(bytesRepr(x, maxReprLen+1))
	case Global:
		r.write(x.String())
	case Device:
		typ, idx, ok := strings.Cut(string(x), ":")
		if ok {
			r.write("device(type=" + StrRepr(typ) + ", index=" + idx + ")")
		} else {
			r.write("device(type=" + StrRepr(typ) + ")")
		}
	case *Tuple:
		if r.enter(x, "(...)") {
			r.items("(", ")", *x, true)
			delete(r.onPath, x)
		}
	case *List:
		if r.enter(x, "[...]") {
			r.items("[", "]", *x, false)
			delete(r.onPath, x)
		}
	case *Set:
		if !r.enter(x, "{...}") {
			return
		}
		defer delete(r.onPath, x)
		switch {
		case x.Frozen && len(x.Items) == 0:
			r.write("frozenset()")
		case x.Frozen:
			r.items("frozenset({", "})", x.Items, false)
		case len(x.Items) == 0:
			r.write("set()")
		default:
			r.items("{", "}", x.Items, false)
		}
	case *Dict:
		if !r.enter(x, "{...}") {
			return
		}
		defer delete(r.onPath, x)
		if x.Class != "" {
			r.write(x.Class[strings.LastIndexByte(x.Class, '.')+1:] + "(")
			if len(x.Entries) == 0 {
				r.write(")")
				return
			}
		}
		r.write("{")
		for i, e := range x.Entries {
			if r.full {
				return
			}
			if i > 0 {
				r.write(", ")
			}
			r.value(e.Key)
			r.write(": ")
			r.value(e.Value)
		}
		r.write("}")
		if x.Class != "" {
			r.write(")")
		}
	case *Tensor:
		r.write("<tensor " + x.DType + " " + dimsRepr(x.Shape) + ">")
	case *StorageRef:
		r.write(StorageRepr(x))
	case *Object:
		r.write("<" + x.Module + "." + x.Name + " object>")
	case *Foreign:
		r.write("<" + x.Module + "." + x.Name + " object>")
	default:
		r.write("<unknown value>")
	}
}

// StorageRepr describes a storage saved by itself (torch.save(t.storage()),
// a TypedStorage or UntypedStorage in a container) with the dtype, size and
// device torch.load gives it: "<storage float32, 6 elements, cpu>" (an
// untyped storage loads as uint8, one element per byte).
func StorageRepr(s *StorageRef) string {
	dt := s.DType
	if dt == "" {
		dt = "uint8"
	}
	return "<storage " + dt + ", " + strconv.FormatInt(s.Len(), 10) + " elements, " + s.Location + ">"
}

func dimsRepr(d []int64) string {
	parts := make([]string, len(d))
	for i, n := range d {
		parts[i] = strconv.FormatInt(n, 10)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// FloatRepr formats f as Python's repr(float) does: the shortest digits
// that round-trip, positional for exponents -4 to 15 (always with a
// fractional part), scientific otherwise; inf, -inf and nan.
func FloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exps, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(exps)
	if exp < -4 || exp >= 16 {
		return mant + "e" + exps[:1] + pad2(exps[1:])
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

func pad2(s string) string {
	if len(s) < 2 {
		return "0" + s
	}
	return s
}

func complexRepr(c complex128) string {
	im := FloatRepr(imag(c))
	if strings.HasSuffix(im, ".0") {
		im = strings.TrimSuffix(im, ".0")
	}
	if real(c) == 0 && !math.Signbit(real(c)) {
		return im + "j"
	}
	re := FloatRepr(real(c))
	re = strings.TrimSuffix(re, ".0")
	sign := "+"
	if strings.HasPrefix(im, "-") {
		sign = ""
	}
	return "(" + re + sign + im + "j)"
}

// StrRepr quotes s as Python's repr(str) does: single quotes unless s
// holds a single quote and no double quote, escapes for backslash, the
// quote, \t \n \r and other non-printable characters.
func StrRepr(s string) string { return strRepr(s, -1) }

// strRepr is StrRepr that stops once it has written limit bytes (limit <
// 0: no limit), so that a value of hundreds of MB costs what is shown.
func strRepr(s string, limit int) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for i := 0; i < len(s); {
		if limit >= 0 && b.Len() >= limit {
			return b.String()
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 { // not UTF-8: shown as Python shows a surrogate escape
			b.WriteString(`\udc` + strconv.FormatUint(uint64(0x80|s[i]&0x7f), 16))
			i++
			continue
		}
		i += n
		switch {
		case r == '\\' || r == rune(q):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\x` + hex2(uint64(r)))
		case r < 0x80 || unicode.IsPrint(r):
			b.WriteRune(r)
		case r <= 0xff:
			b.WriteString(`\x` + hex2(uint64(r)))
		case r <= 0xffff:
			b.WriteString(`\u` + hexN(uint64(r), 4))
		default:
			b.WriteString(`\U` + hexN(uint64(r), 8))
		}
	}
	b.WriteByte(q)
	return b.String()
}

// BytesRepr quotes b as Python's repr(bytes) does: b'raw', with \xNN for
// bytes outside printable ASCII.
func BytesRepr(p []byte) string { return bytesRepr(p, -1) }

// bytesRepr is BytesRepr that stops once it has written limit bytes
// (limit < 0: no limit).
func bytesRepr(p []byte, limit int) string {
	q := byte('\'')
	if bytes.IndexByte(p, '\'') >= 0 && bytes.IndexByte(p, '"') < 0 {
		q = '"'
	}
	var b strings.Builder
	b.WriteString("b")
	b.WriteByte(q)
	for _, c := range p {
		if limit >= 0 && b.Len() >= limit {
			return b.String()
		}
		switch {
		case c == '\\' || c == q:
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c < 0x20 || c >= 0x7f:
			b.WriteString(`\x` + hex2(uint64(c)))
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte(q)
	return b.String()
}

func hex2(n uint64) string { return hexN(n, 2) }

func hexN(n uint64, w int) string {
	s := strconv.FormatUint(n, 16)
	for len(s) < w {
		s = "0" + s
	}
	return s
}
