package pickle

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unsafe"
)

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
	// from[i] is where in out the push of stack[i] began when that push
	// had no effect but the item (see pureOps), else -1; markFrom is the
	// same for marks. fence is where out's last opcode with effects ended:
	// a pop of an item pushed at or after it drops the push from out
	// instead of adding a POP (see drop). opOut is len(out) when the
	// current opcode began, -1 when it has effects.
	from     []int
	markFrom []int
	fence    int
	opOut    int
	// noEmit: out is not kept (Globals needs no rewritten stream).
	noEmit bool
	// noGet: the pass runs without markUsed's findings, and fails with
	// errGetSeen at the first GET (see scan).
	noGet  bool
	used   []uint64 // bit i: some GET reads what the i-th PUT stored (see markUsed)
	stop   int      // bytes through the first STOP, as markUsed found it (0: none found)
	nput   int      // PUTs seen so far
	prog   *program
	index  map[[2]string]int
	intern map[string]int // internal helper globals by name
	made   []aval         // made[i]: what calling prog.globals[i] builds (see madeBy; Globals' audit only)
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
	// ops counts the opcodes run has walked. starts, when set, records
	// where each opcode begins (a bit per byte); rejoin, when set, ends the
	// walk at an opcode that begins where one of rejoin's does (the bit of
	// rejoinAt plus its offset) with nothing on the stack, no mark and no
	// memo entry (see reread).
	ops      int
	starts   []uint64
	rejoin   []uint64
	rejoinAt int
	rejoined bool
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
//
// Most floods read no memo entry: the pass first runs as if no GET
// followed, and only at the first GET does it start over, after
// markUsed has found which PUTs are read.
func scan(ctx context.Context, data []byte, lim Limits) (*program, error) {
	s := newScanner(data, lim)
	s.ctx = ctx
	s.noGet = true
	_, err := s.run(-1)
	if !errors.Is(err, errGetSeen) {
		if err != nil {
			return nil, err
		}
		return s.prog, nil
	}
	memo := s.memo
	memo.reset()
	s = newScanner(data, lim)
	s.ctx = ctx
	s.memo = memo
	if err := s.markUsed(); err != nil {
		return nil, err
	}
	// The rewritten stream is at most about the size of what gopickle
	// runs: the opcodes through STOP, not whatever follows it (a 1 GiB
	// zero padding after STOP must not cost another GiB), and much less
	// when pushes are dropped. Without a STOP the validating pass fails;
	// append grows the buffer past 1 MiB as needed either way.
	if s.stop > 0 {
		s.out = make([]byte, 0, min(s.stop+64, 1<<20))
	}
	if _, err := s.run(-1); err != nil {
		return nil, err
	}
	return s.prog, nil
}

func newScanner(data []byte, lim Limits) *scanner {
	return &scanner{
		ctx:    context.Background(),
		data:   data,
		str:    unsafe.String(unsafe.SliceData(data), len(data)),
		lim:    lim,
		memo:   newMemoTable(len(data)),
		prog:   &program{data: data, limits: lim, fsMark: &frozenMark{}},
		index:  make(map[[2]string]int),
		intern: make(map[string]int),
		rt:     &hookEnv{budget: 2*int64(len(data)) + 1<<16, total: 2*int64(len(data)) + 1<<16, maxDepth: lim.MaxDepth},
	}
}

// errGetSeen stops a pass run with noGet at its first GET.
var errGetSeen = errors.New("pickle: a GET needs the used PUTs")

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

// run walks the opcodes. With target >= 0 it walks to STOP and returns the
// offset of the opcode whose rewritten form holds byte target-1 of the
// final output (an opcode dropped later no longer counts).
func (s *scanner) run(target int) (int, error) {
	hit := -1 // with target >= 0: the opcode that wrote byte target-1, if still written
	for {
		if target < 0 && s.starts == nil && s.rejoin == nil {
			s.ops = s.runFast(s.ops)
		}
		start := s.pos
		if s.starts != nil && start < len(s.data) {
			s.starts[start/64] |= 1 << (start % 64)
		}
		if s.rejoin != nil && len(s.stack) == 0 && len(s.marks) == 0 && s.memo.n == 0 && hasBit(s.rejoin, s.rejoinAt+start) {
			s.rejoined = true
			return start, nil
		}
		if start >= len(s.data) {
			return -1, &OpError{Offset: int64(start), Op: "EOF", Err: truncated("pickle ends without STOP")}
		}
		op := s.data[start]
		if opTable[op].name == "" {
			return -1, &OpError{Offset: int64(start), Op: fmt.Sprintf("0x%02x", op), Err: malformed("unknown opcode 0x%02x", op)}
		}
		s.ops++
		if s.ops > s.lim.MaxOps {
			return -1, &OpError{Offset: int64(start), Op: opTable[op].name, Err: limitErr("MaxOps", "opcodes", int64(s.ops), int64(s.lim.MaxOps))}
		}
		if s.ops%ctxEvery == 0 {
			if err := s.ctx.Err(); err != nil {
				return -1, &OpError{Offset: int64(start), Op: opTable[op].name, Err: err}
			}
		}
		s.pos++
		s.start = start
		s.argData = 0
		s.opOut = -1
		if pureOps[op] && !s.noEmit {
			s.opOut = len(s.out)
		}
		stop, err := s.step(op, opTable[op], start)
		if err != nil {
			return -1, &OpError{Offset: int64(start), Op: opTable[op].name, Err: err}
		}
		if s.noEmit {
			s.out = s.out[:0]
		} else if !pureOps[op] {
			s.fence = len(s.out)
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
			return -1, &OpError{Offset: int64(start), Op: opTable[op].name, Err: limitErr("MaxStack", "items on the stack", int64(len(s.stack)), int64(s.lim.MaxStack))}
		}
		if target >= 0 {
			if len(s.out) < target {
				hit = -1
			} else if hit < 0 {
				hit = start
			}
		}
		if stop {
			s.prog.code = s.out
			s.prog.end = s.pos
			if target >= 0 {
				return hit, nil
			}
			return start, nil
		}
	}
}

// pureOps are the opcodes whose rewritten form has no effect in gopickle
// but the item it pushes (or the mark, or nothing), and cannot fail there:
// an item they push, popped with nothing of effect written since, is
// dropped from the rewritten stream with all that followed it instead of
// being popped there (see drop). POP and POP_MARK are among them: what
// they pop was pushed before the fence, or they are dropped. A used PUT
// moves the fence itself.
var pureOps = func() (t [256]bool) {
	for _, op := range []byte{'(', '0', '1', '2', 'N', 'K', 'J', 'M', 'G', 0x88, 0x89, ')', ']', '}',
		'X', 0x8c, 0x8d, 'B', 'C', 0x8e, 0x96, 'T', 'U', 'S', 'V', 0x8a, 'g', 'h', 'j',
		0x94, 'p', 'q', 'r', 0x95, 0x98} {
		t[op] = true
	}
	return t
}()

// drop removes from out the push that began at from, and everything after
// it, when nothing of effect was written since; it reports whether it did.
func (s *scanner) drop(from int) bool {
	if from < 0 || from < s.fence || s.noEmit {
		return false
	}
	s.out = s.out[:from]
	return true
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

func (s *scanner) push(v aval) {
	s.from = append(s.from[:len(s.stack)], s.opOut)
	s.stack = append(s.stack, v)
}

// pushStr pushes the string of the opcode at start, str (which strAt
// reads again from the opcode).
func (s *scanner) pushStr(start int, str string) {
	if start <= math.MaxInt32 {
		s.push(aval(start))
		return
	}
	s.strs = append(s.strs, strings.Clone(str))
	s.push(strFloor - aval(len(s.strs)-1))
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
	s.markFrom = s.markFrom[:len(s.marks)]
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
	if len(s.prog.globals) >= maxGlobals {
		return 0, limitErr("", "distinct globals", int64(len(s.prog.globals)+1), maxGlobals)
	}
	c, err := resolve(module, name, s.rt)
	if err != nil && s.audit != nil { // audited, never run: keep walking
		c, err = &pyClass{module: module, name: name, kind: kindForeign, rt: s.rt}, nil
	}
	if err != nil {
		return 0, err
	}
	idx := len(s.prog.globals)
	s.prog.globals = append(s.prog.globals, c)
	s.index[key] = idx
	made := opaqueVal
	if s.audit != nil {
		made = madeBy(module, name, idx)
	}
	s.made = append(s.made, made)
	return idx, nil
}

// internal returns the index of one of this package's helper callables.
func (s *scanner) internal(name string) int {
	if i, ok := s.intern[name]; ok {
		return i
	}
	c := internalClass(name, s.rt)
	s.prog.globals = append(s.prog.globals, c)
	s.made = append(s.made, opaqueVal)
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
