package pickle

// markUsed is a first, light pass over the opcodes that finds which PUTs
// some GET reads: about half of those torch writes are never read, and a
// MEMOIZE flood is nothing else. The rewritten stream keeps only the used
// ones, so gopickle's memo (a Go map) holds only what is read. The pass
// stops at the first opcode it cannot parse; the validating pass then
// reports it.
func (s *scanner) markUsed() error {
	memo := memoTable{sparse: make(map[int]memoSlot), denseMax: len(s.data) + 1}
	id := int32(0)
	for ops := 1; s.pos < len(s.data); ops++ {
		if ops%ctxEvery == 0 {
			if err := s.ctx.Err(); err != nil {
				return &OpError{Offset: int64(s.pos), Op: opTable[s.data[s.pos]].name, Err: err}
			}
		}
		op := s.data[s.pos]
		info := opTable[op]
		if op == '.' {
			s.stop = s.pos + 1
			break
		}
		if info.name == "" {
			break
		}
		s.pos++
		a, err := s.readArg(info.arg)
		if err != nil {
			break
		}
		switch op {
		case 0x94, 'p', 'q', 'r':
			i := uint64(memo.n)
			switch op {
			case 'p':
				if i, err = lineIndex(a.data); err != nil {
					break
				}
			case 'q', 'r':
				i = a.n
			}
			if err != nil || i >= uint64(s.lim.MaxMemo) {
				break
			}
			id++
			memo.set(int(i), memoSlot{put: id})
		case 'g', 'h', 'j':
			i := a.n
			if op == 'g' {
				if i, err = lineIndex(a.data); err != nil {
					break
				}
			}
			if sl, ok := memo.get(i); ok {
				w := int(sl.put-1) / 64
				if w >= len(s.used) {
					s.used = append(s.used, make([]uint64, w+1-len(s.used))...)
				}
				s.used[w] |= 1 << (uint(sl.put-1) % 64)
			}
		}
		if err != nil {
			break
		}
	}
	s.pos = 0
	s.prog.used = s.used
	return nil
}

// isUsed reports whether the id-th PUT (from 0) is read by some GET.
func (s *scanner) isUsed(id int) bool {
	w := id / 64
	return w < len(s.used) && s.used[w]&(1<<(uint(id)%64)) != 0
}

// memoSlot is what the validating pass knows about a memo entry: the
// value's abstract slot and which PUT stored it (1-based; 0: unset).
type memoSlot struct {
	v   aval
	put int32
}

// memoTable maps memo indices to slots: a slice for indices below the
// input's size (every PUT costs at least one byte, so they are dense),
// a map for the rest.
type memoTable struct {
	dense    []memoSlot
	sparse   map[int]memoSlot
	denseMax int
	n        int // distinct indices set (MEMOIZE stores at index n)
}

func (m *memoTable) get(i uint64) (memoSlot, bool) {
	if i < uint64(len(m.dense)) {
		return m.dense[i], m.dense[i].put != 0
	}
	if i >= uint64(m.denseMax) {
		sl, ok := m.sparse[int(i)]
		return sl, ok
	}
	return memoSlot{}, false
}

func (m *memoTable) set(i int, sl memoSlot) {
	if i < m.denseMax {
		if i >= len(m.dense) {
			if i >= cap(m.dense) {
				grown := make([]memoSlot, i+1, min(max(2*cap(m.dense), i+1, 64), m.denseMax))
				copy(grown, m.dense)
				m.dense = grown
			}
			m.dense = m.dense[:i+1]
		}
		if m.dense[i].put == 0 {
			m.n++
		}
		m.dense[i] = sl
		return
	}
	if _, ok := m.sparse[i]; !ok {
		m.n++
	}
	m.sparse[i] = sl
}
