package pickle

import (
	"encoding/binary"
	"math"
	"strconv"
)

// step validates one opcode, updates the abstract stack and emits its
// rewritten form. It reports whether the opcode was STOP.
func (s *scanner) step(op byte, info opInfo, start int) (bool, error) {
	var a arg
	var err error
	if info.arg != argNone {
		if a, err = s.readArg(info.arg); err != nil {
			return false, err
		}
	}
	raw := s.data[start:s.pos]
	other := notStr
	switch op {
	case '(':
		if len(s.marks) >= s.lim.MaxDepth {
			return false, limitErr("MaxDepth", "nested MARKs", int64(len(s.marks)+1), int64(s.lim.MaxDepth))
		}
		s.marks = append(s.marks, len(s.stack))
		s.markFrom = append(s.markFrom, s.opOut)
	case '.':
		if err := s.need(1); err != nil {
			return false, err
		}
		s.out = append(s.out, raw...)
		return true, nil
	case '0', '1':
		// A pop of what was pushed with no effect drops the push instead.
		from := -1
		if n := len(s.stack) - 1; op == '0' && n >= s.base() {
			from = s.from[n]
			s.stack = s.stack[:n]
		} else {
			if len(s.markFrom) > 0 {
				from = s.markFrom[len(s.markFrom)-1]
			}
			if _, err := s.popMark(); err != nil {
				return false, err
			}
		}
		if s.drop(from) {
			return false, nil
		}
	case '2':
		if err := s.need(1); err != nil {
			return false, err
		}
		s.push(s.stack[len(s.stack)-1])
	case 'I', 'L':
		if len(a.data) > maxIntDigits {
			return false, malformed("integer literal longer than %d digits", maxIntDigits)
		}
		s.push(other)
	case 'B', 'C', 0x8e, 0x96:
		if err := s.addBytes(len(a.data)); err != nil {
			return false, err
		}
		s.push(other)
	case 'F', 'J', 'K', 'M', 'N', 'G', 0x88, 0x89, ')', ']', 'P':
		s.push(other)
	case '}':
		s.push(dictVal)
	case 0x8a:
		if err := s.intSize(a.n); err != nil {
			return false, err
		}
		s.push(other)
		if a.n == 0 { // gopickle cannot decode an empty LONG1; it means 0
			s.out = append(s.out, 'K', 0)
			return false, nil
		}
	case 0x8b:
		// gopickle decodes LONG4 in quadratic time; build it here instead.
		if err := s.intSize(a.n); err != nil {
			return false, err
		}
		s.push(other)
		s.emitGlobal('c', s.internal("long"))
		if err := s.emitString(a.data); err != nil {
			return false, err
		}
		s.out = append(s.out, 0x85, 'R')
		return false, nil
	case 'X', 0x8c, 0x8d:
		if err := s.addBytes(len(a.data)); err != nil {
			return false, err
		}
		text := s.str[s.pos-len(a.data) : s.pos]
		if !ValidText(text) {
			// Python fails on it too (UnicodeDecodeError).
			return false, malformed("string is not valid UTF-8")
		}
		s.pushStr(start, text)
	case 'T', 'U':
		// Python 2 byte strings: torch decodes them as UTF-8 by default,
		// as latin-1 when asked; kept as they are.
		if err := s.addBytes(len(a.data)); err != nil {
			return false, err
		}
		s.pushStr(start, s.str[s.pos-len(a.data):s.pos])
	case 'S', 'V':
		var dec []byte
		if op == 'S' {
			dec, err = decodeStringLiteral(a.data)
		} else {
			dec, err = decodeRawUnicodeEscape(a.data)
		}
		if err != nil {
			return false, err
		}
		if err := s.addBytes(len(dec)); err != nil {
			return false, err
		}
		s.pushStr(start, string(dec))
		return false, s.emitString(dec)
	case 0x8f:
		s.push(other)
		s.emitGlobal('c', s.internal("set"))
		s.out = append(s.out, ')', 'R')
		return false, nil
	case 0x91:
		if _, err := s.popMark(); err != nil {
			return false, err
		}
		s.push(other)
		// gopickle keeps sets in Go maps; build the frozenset in the
		// persistent-load hook from a tuple of the items instead.
		s.out = append(s.out, 't', 'c', 0, 'F', '\n', '\n', 0x86, 'Q')
		return false, nil
	case 'Q', 0x85:
		if err := s.pop(1); err != nil {
			return false, err
		}
		s.push(other)
	case 'R', 'a', 0x81, 0x86:
		if err := s.need(2); err != nil {
			return false, err
		}
		v := s.stack[len(s.stack)-2] // the callable, or APPEND's list
		s.stack = s.stack[:len(s.stack)-2]
		switch op {
		case 'R', 0x81:
			s.push(s.resultOf(v))
		case 'a':
			s.push(v.kept())
		default:
			s.push(other)
		}
	case 0x87, 0x92:
		if err := s.need(3); err != nil {
			return false, err
		}
		v := other
		if op == 0x92 { // NEWOBJ_EX: cls, args, kwargs
			v = s.resultOf(s.stack[len(s.stack)-3])
		}
		s.stack = s.stack[:len(s.stack)-3]
		s.push(v)
	case 'b':
		if err := s.need(2); err != nil {
			return false, err
		}
		if g, ok := s.stack[len(s.stack)-2].global(); ok && s.audit != nil {
			s.recordBuild(g)
		}
		s.stack = s.stack[:len(s.stack)-1]
	case 's':
		if err := s.need(3); err != nil {
			return false, err
		}
		s.checkSetItem(s.stack[len(s.stack)-3])
		s.stack = s.stack[:len(s.stack)-2]
	case 'e', 'u', 0x90:
		n, err := s.popMark()
		if err != nil {
			return false, err
		}
		if op == 'u' && n%2 != 0 {
			return false, malformed("odd number of items for SETITEMS")
		}
		if err := s.need(1); err != nil {
			return false, err
		}
		v := s.stack[len(s.stack)-1] // the container, changed in place
		if op == 'u' {
			s.checkSetItem(v)
		}
		s.stack = s.stack[:len(s.stack)-1]
		s.push(v.kept())
	case 'd', 'l', 't':
		n, err := s.popMark()
		if err != nil {
			return false, err
		}
		if op == 'd' && n%2 != 0 {
			return false, malformed("odd number of items for DICT")
		}
		if op == 'd' {
			s.push(dictVal)
		} else {
			s.push(other)
		}
	case 'o':
		cls := other
		if b := s.base(); len(s.marks) > 0 && b < len(s.stack) {
			cls = s.stack[b]
		}
		n, err := s.popMark()
		if err != nil {
			return false, err
		}
		if n == 0 {
			return false, malformed("OBJ without a class")
		}
		s.push(s.resultOf(cls))
	case 'c', 'i':
		idx, err := s.global(string(a.data), string(a.line2))
		if err != nil {
			return false, err
		}
		if op == 'i' {
			if _, err := s.popMark(); err != nil {
				return false, err
			}
			s.push(s.resultOf(globalAval(idx))) // an instance
		} else {
			s.push(globalAval(idx))
		}
		s.emitGlobal(op, idx)
		return false, nil
	case 0x93:
		if err := s.need(2); err != nil {
			return false, err
		}
		mod, name := s.stack[len(s.stack)-2], s.stack[len(s.stack)-1]
		if (!mod.isStr() || !name.isStr()) && s.audit != nil {
			s.recordGlobal("", "", true)
			s.stack = s.stack[:len(s.stack)-2]
			s.push(other)
			s.out = append(s.out, '0', '0', 'N')
			return false, nil
		}
		if !mod.isStr() || !name.isStr() {
			return false, malformed("STACK_GLOBAL needs two strings")
		}
		idx, err := s.global(s.strAt(mod), s.strAt(name))
		if err != nil {
			return false, err
		}
		s.stack = s.stack[:len(s.stack)-2]
		s.push(globalAval(idx))
		s.out = append(s.out, '0', '0')
		s.emitGlobal('c', idx)
		return false, nil
	case 0x94, 'p', 'q', 'r':
		if err := s.need(1); err != nil {
			return false, err
		}
		i := uint64(s.memo.n)
		switch op {
		case 'p':
			if i, err = lineIndex(a.data); err != nil {
				return false, err
			}
		case 'q', 'r':
			i = a.n
		}
		idx, err := s.memoIndex(i)
		if err != nil {
			return false, err
		}
		id := s.nput
		s.nput++
		s.memo.set(idx, memoWord(s.stack[len(s.stack)-1]))
		if s.isUsed(id) {
			s.emitPut(idx)
		}
		return false, nil
	case 'g', 'h', 'j':
		i := a.n
		if op == 'g' {
			if i, err = lineIndex(a.data); err != nil {
				return false, err
			}
		}
		w, ok := s.memo.get(i)
		if !ok || i >= uint64(s.lim.MaxMemo) {
			return false, malformed("memo index %d was never stored", i)
		}
		if s.noGet {
			return false, errGetSeen
		}
		s.push(memoAval(w))
	case 0x80:
		if a.n > highestProtocol {
			return false, malformed("unsupported protocol %d", a.n)
		}
	case 0x95:
		if a.n > uint64(len(s.data)-s.pos) {
			return false, truncated("frame of %d bytes exceeds the %d bytes left", a.n, len(s.data)-s.pos)
		}
		s.frameEnd = s.pos + int(a.n)
		return false, nil // frames only group opcodes; gopickle need not see them
	case 0x98:
		if err := s.need(1); err != nil {
			return false, err
		}
		return false, nil
	case 0x97:
		return false, malformed("out-of-band buffers are not supported")
	case 0x82, 0x83, 0x84:
		return false, malformed("the extension registry is not supported")
	}
	switch {
	case s.noEmit:
	case len(raw) == 1:
		s.out = append(s.out, op)
	default:
		s.out = append(s.out, raw...)
	}
	return false, nil
}

// emitPut writes a used PUT of memo index idx (an unused one is not
// written: gopickle need not store it) as BINPUT, LONG_BINPUT or PUT of
// its index, so that dropping the unused ones keeps MEMOIZE's implicit
// indices. The memo entry is an effect: the fence moves past it.
func (s *scanner) emitPut(idx int) {
	switch {
	case s.noEmit:
		return
	case idx <= math.MaxUint8:
		s.out = append(s.out, 'q', byte(idx)) // gopickle reads it without allocating
	case idx <= math.MaxUint32:
		s.out = binary.LittleEndian.AppendUint32(append(s.out, 'r'), uint32(idx))
	default:
		s.out = append(strconv.AppendInt(append(s.out, 'p'), int64(idx), 10), '\n')
	}
	s.fence = len(s.out)
}
