package pickle

import "encoding/binary"

// fastWidth is, for the opcodes runFast takes, their size with the
// argument; 0 for the others.
var fastWidth = func() (t [256]uint8) {
	for _, op := range []byte{'N', ')', ']', '}', 0x88, 0x89, '0', '1', '(', '2', 0x94} {
		t[op] = 1
	}
	t['K'], t['M'], t['J'], t['G'] = 2, 3, 5, 9
	t['q'], t['h'], t['r'], t['j'] = 2, 2, 5, 5
	return t
}()

// runFast is the validating pass's loop for the opcodes of fastWidth:
// constants, POP, MARK, POP_MARK, DUP and the binary memo opcodes, whose
// checks are a few compares each. It does to the scanner what step would,
// starting at s.pos with ops opcodes counted, and returns the count when
// the next opcode is one for step: another kind, one that fails a check
// (step reports it), one that may reach past a FRAME's end, or the opcode
// at which run looks at its limits and the context.
func (s *scanner) runFast(ops int) int {
	d := s.data
	limit := len(d)
	if s.frameEnd > s.pos {
		limit = max(s.frameEnd-8, 0) // no opcode of 9 bytes or less starting before it crosses
	}
	next := min(s.lim.MaxOps, (ops/ctxEvery+1)*ctxEvery-1)
	pos := s.pos
	for ops < next && pos < limit {
		op := d[pos]
		w := int(fastWidth[op])
		if w == 0 || pos+w > len(d) {
			break
		}
		switch op {
		case '0':
			n := len(s.stack) - 1
			if n < s.base() {
				s.pos = pos
				return ops
			}
			s.stack = s.stack[:n]
			if !s.drop(s.from[n]) {
				s.emit(op)
			}
		case '1':
			if len(s.marks) == 0 || len(s.stack)-s.marks[len(s.marks)-1] > s.lim.MaxContainerLen {
				s.pos = pos
				return ops
			}
			from := s.markFrom[len(s.markFrom)-1]
			s.stack = s.stack[:s.marks[len(s.marks)-1]]
			s.marks = s.marks[:len(s.marks)-1]
			s.markFrom = s.markFrom[:len(s.marks)]
			if !s.drop(from) {
				s.emit(op)
			}
		case '(':
			if len(s.marks) >= s.lim.MaxDepth {
				s.pos = pos
				return ops
			}
			s.marks = append(s.marks, len(s.stack))
			s.markFrom = append(s.markFrom, s.outPos())
			s.emit(op)
		case 0x94, 'q', 'r':
			idx := s.memo.n
			switch op {
			case 'q':
				idx = int(d[pos+1])
			case 'r':
				idx = int(binary.LittleEndian.Uint32(d[pos+1:]))
			}
			if len(s.stack) <= s.base() || idx >= s.lim.MaxMemo {
				s.pos = pos
				return ops
			}
			id := s.nput
			s.nput++
			s.memo.set(idx, memoWord(s.stack[len(s.stack)-1]))
			if s.isUsed(id) {
				s.emitPut(idx)
			}
		case 'h', 'j':
			idx := uint64(d[pos+1])
			if op == 'j' {
				idx = uint64(binary.LittleEndian.Uint32(d[pos+1:]))
			}
			wd, ok := s.memo.get(idx)
			if !ok || idx >= uint64(s.lim.MaxMemo) || s.noGet || len(s.stack) >= s.lim.MaxStack {
				s.pos = pos
				return ops
			}
			s.from = append(s.from[:len(s.stack)], s.outPos())
			s.stack = append(s.stack, memoAval(wd))
			if !s.noEmit {
				s.out = append(s.out, d[pos:pos+w]...)
			}
		default:
			if len(s.stack) >= s.lim.MaxStack || op == '2' && len(s.stack) <= s.base() {
				s.pos = pos
				return ops
			}
			v := notStr
			if op == '2' {
				v = s.stack[len(s.stack)-1]
			} else if op == '}' {
				v = dictVal
			}
			s.from = append(s.from[:len(s.stack)], s.outPos())
			s.stack = append(s.stack, v)
			if s.noEmit {
			} else if w == 1 {
				s.out = append(s.out, op)
			} else {
				s.out = append(s.out, d[pos:pos+w]...)
			}
		}
		pos += w
		ops++
	}
	s.pos = pos
	return ops
}

// outPos is where the next pure push begins in out, for from and markFrom
// (-1 when out is not kept).
func (s *scanner) outPos() int {
	if s.noEmit {
		return -1
	}
	return len(s.out)
}

// emit appends a one-byte opcode to out.
func (s *scanner) emit(op byte) {
	if !s.noEmit {
		s.out = append(s.out, op)
	}
}
