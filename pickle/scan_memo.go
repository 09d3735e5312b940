package pickle

import "encoding/binary"

// markUsed is a first, light pass over the opcodes that finds which PUTs
// some GET reads: about half of those torch writes are never read, and a
// MEMOIZE flood is nothing else. The rewritten stream keeps only the used
// ones, so gopickle's memo (a Go map) holds only what is read. The pass
// stops at the first opcode it cannot parse; the validating pass then
// reports it. It leaves s.memo empty for that pass, its pages kept.
func (s *scanner) markUsed() error {
	d := s.data
	id := uint32(0)
	next := s.pos + ctxEvery // s.pos at which ctx is looked at again
	for s.pos < len(d) {
		if s.pos >= next {
			next = s.pos + ctxEvery
			if err := s.ctx.Err(); err != nil {
				return &OpError{Offset: int64(s.pos), Op: opTable[d[s.pos]].name, Err: err}
			}
		}
		op := d[s.pos]
		if w := skipWidth[op]; w != 0 {
			// No memo effect and a fixed width: most opcodes of a flood.
			s.pos += int(w)
			continue
		}
		if op == '.' {
			s.stop = s.pos + 1
			break
		}
		var i uint64
		w, put := 0, false
		switch op {
		case 0x94:
			i, w, put = uint64(s.memo.n), 1, true
		case 'q', 'h':
			if s.pos+2 <= len(d) {
				i, w, put = uint64(d[s.pos+1]), 2, op == 'q'
			}
		case 'r', 'j':
			if s.pos+5 <= len(d) {
				i, w, put = uint64(binary.LittleEndian.Uint32(d[s.pos+1:])), 5, op == 'r'
			}
		}
		if w == 0 { // any other opcode, or one cut short
			info := opTable[op]
			if info.name == "" {
				break
			}
			start := s.pos
			s.pos++
			a, err := s.readArg(info.arg)
			if err != nil || op != 'p' && op != 'g' {
				if err != nil {
					break
				}
				continue
			}
			if i, err = lineIndex(a.data); err != nil {
				break
			}
			w, put = s.pos-start, op == 'p'
			s.pos = start
		}
		s.pos += w
		if put {
			if i < uint64(s.lim.MaxMemo) {
				id++
				s.memo.set(int(i), id)
			}
			continue
		}
		// A GET whose item is popped at once is dropped from the
		// rewritten stream (see drop): it uses nothing.
		if p, ok := s.memo.get(i); ok && (s.pos >= len(d) || d[s.pos] != '0') {
			w := int(p-1) / 64
			if w >= len(s.used) {
				s.used = append(s.used, make([]uint64, w+1-len(s.used))...)
			}
			s.used[w] |= 1 << (uint(p-1) % 64)
		}
	}
	s.pos = 0
	s.prog.used = s.used
	s.memo.reset()
	return nil
}

// skipWidth is, for the opcodes that markUsed passes over without looking
// (no memo effect, a fixed-width argument), their size with the argument;
// 0 for the others.
var skipWidth = func() (t [256]uint8) {
	for op, info := range opTable {
		if info.name == "" || op == '.' {
			continue
		}
		switch op {
		case 0x94, 'p', 'q', 'r', 'g', 'h', 'j':
			continue
		}
		switch info.arg {
		case argNone:
			t[op] = 1
		case argU1:
			t[op] = 2
		case argU2:
			t[op] = 3
		case argI4, argU4:
			t[op] = 5
		case argF8, argU8:
			t[op] = 9
		}
	}
	return t
}()

// isUsed reports whether the id-th PUT (from 0) is read by some GET.
func (s *scanner) isUsed(id int) bool {
	w := id / 64
	return w < len(s.used) && s.used[w]&(1<<(uint(id)%64)) != 0
}

// memoPage is the number of slots of one page of memoTable's dense part.
const memoPage = 1 << 14

// memoTable maps memo indices to one nonzero 32-bit word each (0: unset):
// which PUT stored the entry in markUsed, the value's abstract slot in
// the validating pass (see memoWord). Indices below the input's size
// (every PUT costs at least one byte, so they are dense) live in pages
// allocated as they are first written, never copied; a map holds the
// rest. At most 4 bytes per input byte, plus the map's entries, one per
// PUT of a larger index.
type memoTable struct {
	pages    [][]uint32
	sparse   map[int]uint32
	denseMax int
	n        int // distinct indices set (MEMOIZE stores at index n)
}

func newMemoTable(size int) memoTable {
	return memoTable{sparse: make(map[int]uint32), denseMax: size + 1}
}

func (m *memoTable) get(i uint64) (uint32, bool) {
	if i < uint64(m.denseMax) {
		p := i / memoPage
		if p >= uint64(len(m.pages)) || m.pages[p] == nil {
			return 0, false
		}
		w := m.pages[p][i%memoPage]
		return w, w != 0
	}
	w, ok := m.sparse[int(i)]
	return w, ok
}

// set stores w (nonzero) at index i.
func (m *memoTable) set(i int, w uint32) {
	if i < m.denseMax {
		p := i / memoPage
		if p >= len(m.pages) {
			m.pages = append(m.pages, make([][]uint32, p+1-len(m.pages))...)
		}
		if m.pages[p] == nil {
			m.pages[p] = make([]uint32, memoPage)
		}
		if m.pages[p][i%memoPage] == 0 {
			m.n++
		}
		m.pages[p][i%memoPage] = w
		return
	}
	if _, ok := m.sparse[i]; !ok {
		m.n++
	}
	m.sparse[i] = w
}

// reset empties the table and keeps its pages for reuse.
func (m *memoTable) reset() {
	for _, p := range m.pages {
		clear(p)
	}
	clear(m.sparse)
	m.n = 0
}

// memoWord encodes an abstract slot as a nonzero memo word; memoAval
// decodes it. (No slot is math.MinInt32: that would be global 2^31-2.)
func memoWord(v aval) uint32 { return uint32(v) ^ 1<<31 }
func memoAval(w uint32) aval { return aval(w ^ 1<<31) }
