package pickle

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// argument encodings of opcodes, as pickletools names them.
type argKind uint8

const (
	argNone    argKind = iota
	argU1              // uint1
	argU2              // uint2
	argI4              // int4
	argU4              // uint4
	argF8              // float8
	argU8              // uint8 (FRAME)
	argLine            // one newline-terminated line
	argLine2           // two lines (GLOBAL, INST)
	argBytes1          // uint1 length + data
	argBytes4          // uint4 length + data
	argBytes4s         // int4 length + data (negative is an error)
	argBytes8          // uint8 length + data
)

type opInfo struct {
	name string
	arg  argKind
}

// opTable lists every opcode of pickle protocols 0 to 5.
var opTable = [256]opInfo{
	'(': {"MARK", argNone}, '.': {"STOP", argNone}, '0': {"POP", argNone},
	'1': {"POP_MARK", argNone}, '2': {"DUP", argNone}, 'F': {"FLOAT", argLine},
	'I': {"INT", argLine}, 'J': {"BININT", argI4}, 'K': {"BININT1", argU1},
	'L': {"LONG", argLine}, 'M': {"BININT2", argU2}, 'N': {"NONE", argNone},
	'P': {"PERSID", argLine}, 'Q': {"BINPERSID", argNone}, 'R': {"REDUCE", argNone},
	'S': {"STRING", argLine}, 'T': {"BINSTRING", argBytes4s}, 'U': {"SHORT_BINSTRING", argBytes1},
	'V': {"UNICODE", argLine}, 'X': {"BINUNICODE", argBytes4}, 'a': {"APPEND", argNone},
	'b': {"BUILD", argNone}, 'c': {"GLOBAL", argLine2}, 'd': {"DICT", argNone},
	'}': {"EMPTY_DICT", argNone}, 'e': {"APPENDS", argNone}, 'g': {"GET", argLine},
	'h': {"BINGET", argU1}, 'i': {"INST", argLine2}, 'j': {"LONG_BINGET", argU4},
	'l': {"LIST", argNone}, ']': {"EMPTY_LIST", argNone}, 'o': {"OBJ", argNone},
	'p': {"PUT", argLine}, 'q': {"BINPUT", argU1}, 'r': {"LONG_BINPUT", argU4},
	's': {"SETITEM", argNone}, 't': {"TUPLE", argNone}, ')': {"EMPTY_TUPLE", argNone},
	'u': {"SETITEMS", argNone}, 'G': {"BINFLOAT", argF8},
	0x80: {"PROTO", argU1}, 0x81: {"NEWOBJ", argNone}, 0x82: {"EXT1", argU1},
	0x83: {"EXT2", argU2}, 0x84: {"EXT4", argU4}, 0x85: {"TUPLE1", argNone},
	0x86: {"TUPLE2", argNone}, 0x87: {"TUPLE3", argNone}, 0x88: {"NEWTRUE", argNone},
	0x89: {"NEWFALSE", argNone}, 0x8a: {"LONG1", argBytes1}, 0x8b: {"LONG4", argBytes4s},
	'B': {"BINBYTES", argBytes4}, 'C': {"SHORT_BINBYTES", argBytes1},
	0x8c: {"SHORT_BINUNICODE", argBytes1}, 0x8d: {"BINUNICODE8", argBytes8},
	0x8e: {"BINBYTES8", argBytes8}, 0x8f: {"EMPTY_SET", argNone}, 0x90: {"ADDITEMS", argNone},
	0x91: {"FROZENSET", argNone}, 0x92: {"NEWOBJ_EX", argNone}, 0x93: {"STACK_GLOBAL", argNone},
	0x94: {"MEMOIZE", argNone}, 0x95: {"FRAME", argU8},
	0x96: {"BYTEARRAY8", argBytes8}, 0x97: {"NEXT_BUFFER", argNone}, 0x98: {"READONLY_BUFFER", argNone},
}

const (
	highestProtocol = 5
	// maxNameLen bounds module and attribute names of globals; real ones are
	// far shorter, and the bound keeps global resolution linear.
	maxNameLen = 1024
	// maxIntDigits mirrors Python's limit on int() of a decimal string,
	// which protocol-0 INT and LONG go through.
	maxIntDigits = 4300
)

// aval is what the validating pass knows about a stack slot: an index
// into scanner.strs for strings (so that STACK_GLOBAL can be resolved
// statically), or notStr.
type aval int32

const notStr aval = -1

// globalAval marks a slot holding the object the idx-th global resolved
// to (a module, class or function, as imported), for BUILD's check.
func globalAval(idx int) aval { return aval(-2 - idx) }

// global returns the index of the global a slot holds, if it holds one.
func (v aval) global() (int, bool) {
	if v <= -2 {
		return int(-2 - v), true
	}
	return 0, false
}

// frozenMark tags the persistent id that a rewritten FROZENSET passes.
type frozenMark struct{ _ byte }

// program is a validated pickle rewritten for gopickle.
type program struct {
	code    []byte
	globals []*pyClass  // indexed by the rewritten GLOBAL/INST module "\x00<index>"
	fsMark  *frozenMark // marker of the rewritten FROZENSET (see machine.persistentLoad)
	used    []uint64    // scanner.used, for re-runs that locate errors
	end     int         // bytes of the original input through STOP
	data    []byte      // original input, for locating errors
	limits  Limits
}

type scanner struct {
	ctx    context.Context
	data   []byte
	str    string // data viewed as a string (no copy); what outlives the scan is cloned
	nbytes int64  // bytes of str and bytes values so far (Limits.MaxBytes)
	lim    Limits
	pos    int
	out    []byte
	stack  []aval
	strs   []string
	marks  []int
	memo   memoTable
	used   []uint64 // bit i: some GET reads what the i-th PUT stored (see markUsed)
	stop   int      // bytes through the first STOP, as markUsed found it (0: none found)
	nput   int      // PUTs seen so far
	prog   *program
	index  map[[2]string]int
	intern map[string]int // internal helper globals by name
	rt     *hookEnv
	// audit, when set, records every global instead of refusing unsafe
	// ones (see Globals); start is the offset of the current opcode.
	audit *[]GlobalUse
	start int
	// frameEnd is where the current FRAME ends (0: none); crossings are
	// frame ends that an opcode or its argument reached past (see Globals).
	frameEnd  int
	crossings []int
	argData   int // where the current opcode's counted data starts (0: none)
}

// scan validates data and rewrites it into a program gopickle can run.
//
// gopickle v0.2.0 panics or misbehaves on some streams; this pass is what
// keeps it safe, so Unpickle has no recover:
//   - its dispatch table has 255 entries, so opcode 0xff indexes past it:
//     unknown opcodes are refused here;
//   - it allocates every counted length read from the stream (up to 2^63):
//     lengths must fit in the bytes left;
//   - LONG1 with no bytes indexes bytes[-1]: rewritten to BININT1 0;
//   - DICT and SETITEMS with an odd item count index past the end: refused;
//   - memo GET of an unknown index pushes None: refused;
//   - sets and OrderedDicts live in Go maps that panic on unhashable keys
//     (bytes): EMPTY_SET and FROZENSET are rewritten, and every global goes
//     through FindClass, so gopickle never builds either;
//   - LONG4 is decoded in quadratic time: rewritten to a call of our decoder;
//   - STRING and UNICODE arguments are passed through undecoded: rewritten
//     to BINUNICODE after decoding Python's escapes.
func scan(ctx context.Context, data []byte, lim Limits) (*program, error) {
	s := newScanner(data, lim)
	s.ctx = ctx
	if err := s.markUsed(); err != nil {
		return nil, err
	}
	// The rewritten stream is about the size of what gopickle runs: the
	// opcodes through STOP, not whatever follows it (a 1 GiB zero padding
	// after STOP must not cost another GiB). Without a STOP the validating
	// pass fails; append grows the buffer as needed either way.
	if s.stop > 0 {
		s.out = make([]byte, 0, s.stop+64)
	}
	if _, err := s.run(-1); err != nil {
		return nil, err
	}
	return s.prog, nil
}

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

func newScanner(data []byte, lim Limits) *scanner {
	return &scanner{
		ctx:    context.Background(),
		data:   data,
		str:    unsafe.String(unsafe.SliceData(data), len(data)),
		lim:    lim,
		memo:   memoTable{sparse: make(map[int]memoSlot), denseMax: len(data) + 1},
		prog:   &program{data: data, limits: lim, fsMark: &frozenMark{}},
		index:  make(map[[2]string]int),
		intern: make(map[string]int),
		rt:     &hookEnv{budget: 2*int64(len(data)) + 1<<16, total: 2*int64(len(data)) + 1<<16, maxDepth: lim.MaxDepth},
	}
}

// origin maps a count of rewritten bytes consumed by gopickle back to the
// offset and name of the original opcode being executed.
func (p *program) origin(consumed int) (int, string) {
	s := newScanner(p.data, p.limits)
	s.used = p.used
	off, _ := s.run(consumed)
	if off < 0 || off >= len(p.data) {
		return len(p.data), "EOF"
	}
	return off, opTable[p.data[off]].name
}

// run walks the opcodes. With target >= 0 it stops at the first opcode
// whose rewritten form reaches target bytes of output and returns its offset.
func (s *scanner) run(target int) (int, error) {
	ops := 0
	for {
		start := s.pos
		if start >= len(s.data) {
			return -1, &OpError{Offset: int64(start), Op: "EOF", Err: truncated("pickle ends without STOP")}
		}
		op := s.data[start]
		info := opTable[op]
		if info.name == "" {
			return -1, &OpError{Offset: int64(start), Op: fmt.Sprintf("0x%02x", op), Err: malformed("unknown opcode 0x%02x", op)}
		}
		ops++
		if ops > s.lim.MaxOps {
			return -1, &OpError{Offset: int64(start), Op: info.name, Err: limitErr("MaxOps", "opcodes", int64(ops), int64(s.lim.MaxOps))}
		}
		if ops%ctxEvery == 0 {
			if err := s.ctx.Err(); err != nil {
				return -1, &OpError{Offset: int64(start), Op: info.name, Err: err}
			}
		}
		s.pos++
		s.start = start
		s.argData = 0
		stop, err := s.step(op, info, start)
		if err != nil {
			return -1, &OpError{Offset: int64(start), Op: info.name, Err: err}
		}
		if s.frameEnd > 0 && start < s.frameEnd && s.pos > s.frameEnd && len(s.crossings) < maxCrossings {
			// Where another reader may resume: Python's C unpickler
			// refills its buffer from the file at a crossing, dropping
			// or skipping bytes, so the next opcode it reads may start
			// anywhere from the frame's end to a little past the start
			// of the counted data; each such point is read again.
			last := s.frameEnd
			if s.argData > 0 {
				last = max(last, s.argData+8)
			}
			last = min(last, len(s.data))
			for at := s.frameEnd; at <= last && len(s.crossings) < maxCrossings; at++ {
				s.crossings = append(s.crossings, at)
			}
		}
		if len(s.stack) > s.lim.MaxStack {
			return -1, &OpError{Offset: int64(start), Op: info.name, Err: limitErr("MaxStack", "items on the stack", int64(len(s.stack)), int64(s.lim.MaxStack))}
		}
		if target >= 0 && len(s.out) >= target {
			return start, nil
		}
		if stop {
			s.prog.code = s.out
			s.prog.end = s.pos
			return start, nil
		}
	}
}

// arg holds a decoded opcode argument.
type arg struct {
	n     uint64 // integer arguments and lengths
	data  []byte // counted data or the (first) line, without newline
	line2 []byte // second line of GLOBAL/INST
}

func (s *scanner) readArg(k argKind) (arg, error) {
	var a arg
	switch k {
	case argNone:
		return a, nil
	case argU1, argU2, argI4, argU4, argF8, argU8:
		n := 1
		switch k {
		case argU2:
			n = 2
		case argI4, argU4:
			n = 4
		case argF8, argU8:
			n = 8
		}
		if len(s.data)-s.pos < n {
			return a, truncated("truncated argument")
		}
		b := s.data[s.pos : s.pos+n]
		s.pos += n
		switch k {
		case argU1:
			a.n = uint64(b[0])
		case argU2:
			a.n = uint64(binary.LittleEndian.Uint16(b))
		case argI4, argU4:
			a.n = uint64(binary.LittleEndian.Uint32(b))
		case argU8:
			a.n = binary.LittleEndian.Uint64(b)
		}
		return a, nil
	case argLine, argLine2:
		l, err := s.line()
		if err != nil {
			return a, err
		}
		a.data = l
		if k == argLine2 {
			if a.line2, err = s.line(); err != nil {
				return a, err
			}
		}
		return a, nil
	}
	// counted data
	var size uint64
	switch k {
	case argBytes1:
		if len(s.data)-s.pos < 1 {
			return a, truncated("truncated length")
		}
		size = uint64(s.data[s.pos])
		s.pos++
	case argBytes4, argBytes4s:
		if len(s.data)-s.pos < 4 {
			return a, truncated("truncated length")
		}
		v := binary.LittleEndian.Uint32(s.data[s.pos:])
		if k == argBytes4s && int32(v) < 0 {
			return a, malformed("negative length %d", int32(v))
		}
		size = uint64(v)
		s.pos += 4
	case argBytes8:
		if len(s.data)-s.pos < 8 {
			return a, truncated("truncated length")
		}
		size = binary.LittleEndian.Uint64(s.data[s.pos:])
		s.pos += 8
	}
	s.argData = s.pos
	if size > uint64(len(s.data)-s.pos) {
		return a, truncated("length %d exceeds the %d bytes left", size, len(s.data)-s.pos)
	}
	a.n = size
	a.data = s.data[s.pos : s.pos+int(size)]
	s.pos += int(size)
	return a, nil
}

func (s *scanner) line() ([]byte, error) {
	i := bytes.IndexByte(s.data[s.pos:], '\n')
	if i < 0 {
		return nil, truncated("unterminated line")
	}
	l := s.data[s.pos : s.pos+i]
	s.pos += i + 1
	return l, nil
}

func (s *scanner) base() int {
	if len(s.marks) == 0 {
		return 0
	}
	return s.marks[len(s.marks)-1]
}

func (s *scanner) need(n int) error {
	if len(s.stack)-s.base() < n {
		return malformed("stack underflow")
	}
	return nil
}

func (s *scanner) pop(n int) error {
	if err := s.need(n); err != nil {
		return err
	}
	s.stack = s.stack[:len(s.stack)-n]
	return nil
}

func (s *scanner) push(v aval) { s.stack = append(s.stack, v) }

func (s *scanner) pushStr(str string) {
	s.strs = append(s.strs, str)
	s.push(aval(len(s.strs) - 1))
}

// popMark removes the items above the topmost MARK and the MARK itself and
// returns how many items there were.
func (s *scanner) popMark() (int, error) {
	if len(s.marks) == 0 {
		return 0, malformed("no MARK on the stack")
	}
	b := s.marks[len(s.marks)-1]
	n := len(s.stack) - b
	s.stack = s.stack[:b]
	s.marks = s.marks[:len(s.marks)-1]
	if n > s.lim.MaxContainerLen {
		return 0, limitErr("MaxContainerLen", "items in one container", int64(n), int64(s.lim.MaxContainerLen))
	}
	return n, nil
}

func (s *scanner) memoIndex(i uint64) (int, error) {
	if i >= uint64(s.lim.MaxMemo) {
		return 0, limitErr("MaxMemo", "as a memo index", int64(min(i, math.MaxInt64)), int64(s.lim.MaxMemo)-1)
	}
	return int(i), nil
}

// lineIndex parses a protocol-0 memo index the way gopickle does (strconv.Atoi).
func lineIndex(l []byte) (uint64, error) {
	i, err := strconv.Atoi(string(l))
	if err != nil || i < 0 {
		return 0, malformed("bad memo index %q", l)
	}
	return uint64(i), nil
}

func (s *scanner) emitGlobal(op byte, idx int) {
	s.out = append(s.out, op, 0)
	s.out = strconv.AppendInt(s.out, int64(idx), 10)
	s.out = append(s.out, '\n', '\n')
}

// global resolves module.name once per distinct pair and returns its index.
func (s *scanner) global(module, name string) (int, error) {
	if len(module) > maxNameLen || len(name) > maxNameLen {
		return 0, malformed("global name longer than %d bytes", maxNameLen)
	}
	if s.audit != nil {
		s.recordGlobal(module, name, false)
	}
	key := [2]string{module, name}
	if i, ok := s.index[key]; ok {
		return i, nil
	}
	// The names may point into the caller's buffer (see scanner.str).
	module, name = strings.Clone(module), strings.Clone(name)
	key = [2]string{module, name}
	c, err := resolve(module, name, s.rt)
	if err != nil && s.audit != nil { // audited, never run: keep walking
		c, err = &pyClass{module: module, name: name, kind: kindForeign, rt: s.rt}, nil
	}
	if err != nil {
		return 0, err
	}
	s.prog.globals = append(s.prog.globals, c)
	s.index[key] = len(s.prog.globals) - 1
	return len(s.prog.globals) - 1, nil
}

// internal returns the index of one of this package's helper callables.
func (s *scanner) internal(name string) int {
	if i, ok := s.intern[name]; ok {
		return i
	}
	c := internalClass(name, s.rt)
	s.prog.globals = append(s.prog.globals, c)
	s.intern[name] = len(s.prog.globals) - 1
	return len(s.prog.globals) - 1
}

// emitString writes a BINUNICODE opcode carrying b (which gopickle turns
// into a Go string without validating it).
func (s *scanner) emitString(b []byte) error {
	if uint64(len(b)) > math.MaxUint32 {
		return fmt.Errorf("%w: string of %d bytes", ErrLimit, len(b))
	}
	s.out = append(s.out, 'X')
	s.out = binary.LittleEndian.AppendUint32(s.out, uint32(len(b)))
	s.out = append(s.out, b...)
	return nil
}

// addBytes counts n bytes of str or bytes values against Limits.MaxBytes.
func (s *scanner) addBytes(n int) error {
	s.nbytes += int64(n)
	if s.nbytes > s.lim.MaxBytes {
		return limitErr("MaxBytes", "bytes of str and bytes values", s.nbytes, s.lim.MaxBytes)
	}
	return nil
}

// intSize checks the byte length of a LONG1 or LONG4 against Limits.MaxIntBytes.
func (s *scanner) intSize(n uint64) error {
	if n > uint64(s.lim.MaxIntBytes) {
		return limitErr("MaxIntBytes", "bytes in one integer", int64(n), int64(s.lim.MaxIntBytes))
	}
	return nil
}

// step validates one opcode, updates the abstract stack and emits its
// rewritten form. It reports whether the opcode was STOP.
func (s *scanner) step(op byte, info opInfo, start int) (bool, error) {
	a, err := s.readArg(info.arg)
	if err != nil {
		return false, err
	}
	raw := s.data[start:s.pos]
	other := notStr
	switch op {
	case '(':
		if len(s.marks) >= s.lim.MaxDepth {
			return false, limitErr("MaxDepth", "nested MARKs", int64(len(s.marks)+1), int64(s.lim.MaxDepth))
		}
		s.marks = append(s.marks, len(s.stack))
	case '.':
		if err := s.need(1); err != nil {
			return false, err
		}
		s.out = append(s.out, raw...)
		return true, nil
	case '0':
		if len(s.stack) > s.base() {
			s.stack = s.stack[:len(s.stack)-1]
		} else if _, err := s.popMark(); err != nil {
			return false, err
		}
	case '1':
		if _, err := s.popMark(); err != nil {
			return false, err
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
	case 'F', 'J', 'K', 'M', 'N', 'G', 0x88, 0x89, ')', ']', '}', 'P':
		s.push(other)
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
		s.pushStr(text)
	case 'T', 'U':
		// Python 2 byte strings: torch decodes them as UTF-8 by default,
		// as latin-1 when asked; kept as they are.
		if err := s.addBytes(len(a.data)); err != nil {
			return false, err
		}
		s.pushStr(s.str[s.pos-len(a.data) : s.pos])
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
		s.pushStr(string(dec))
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
		if err := s.pop(2); err != nil {
			return false, err
		}
		s.push(other)
	case 0x87, 0x92:
		if err := s.pop(3); err != nil {
			return false, err
		}
		s.push(other)
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
		s.stack = s.stack[:len(s.stack)-2]
	case 'e', 'u', 0x90:
		n, err := s.popMark()
		if err != nil {
			return false, err
		}
		if op == 'u' && n%2 != 0 {
			return false, malformed("odd number of items for SETITEMS")
		}
		if err := s.pop(1); err != nil {
			return false, err
		}
		s.push(other)
	case 'd', 'l', 't':
		n, err := s.popMark()
		if err != nil {
			return false, err
		}
		if op == 'd' && n%2 != 0 {
			return false, malformed("odd number of items for DICT")
		}
		s.push(other)
	case 'o':
		n, err := s.popMark()
		if err != nil {
			return false, err
		}
		if n == 0 {
			return false, malformed("OBJ without a class")
		}
		s.push(other)
	case 'c', 'i':
		idx, err := s.global(string(a.data), string(a.line2))
		if err != nil {
			return false, err
		}
		if op == 'i' {
			if _, err := s.popMark(); err != nil {
				return false, err
			}
			s.push(other) // an instance
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
		if (mod < 0 || name < 0) && s.audit != nil {
			s.recordGlobal("", "", true)
			s.stack = s.stack[:len(s.stack)-2]
			s.push(other)
			s.out = append(s.out, '0', '0', 'N')
			return false, nil
		}
		if mod < 0 || name < 0 {
			return false, malformed("STACK_GLOBAL needs two strings")
		}
		idx, err := s.global(s.strs[mod], s.strs[name])
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
		s.memo.set(idx, memoSlot{v: s.stack[len(s.stack)-1], put: int32(id + 1)})
		if !s.isUsed(id) {
			return false, nil // never read: gopickle need not store it
		}
		// A used PUT is written as LONG_BINPUT (or PUT) of its index, so
		// that dropping the unused ones keeps MEMOIZE's implicit indices.
		if idx <= math.MaxUint32 {
			s.out = binary.LittleEndian.AppendUint32(append(s.out, 'r'), uint32(idx))
		} else {
			s.out = append(strconv.AppendInt(append(s.out, 'p'), int64(idx), 10), '\n')
		}
		return false, nil
	case 'g', 'h', 'j':
		i := a.n
		if op == 'g' {
			if i, err = lineIndex(a.data); err != nil {
				return false, err
			}
		}
		sl, ok := s.memo.get(i)
		if !ok || i >= uint64(s.lim.MaxMemo) {
			return false, malformed("memo index %d was never stored", i)
		}
		s.push(sl.v)
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
	s.out = append(s.out, raw...)
	return false, nil
}

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
