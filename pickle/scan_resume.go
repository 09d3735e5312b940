package pickle

import (
	"errors"
	"fmt"
)

// reread reads data again from each of the points crossings where a
// loader may resume after a FRAME an opcode reached past (see Globals),
// and returns the globals those readings find, located in data.
//
// Each reading is bounded twice. It ends where it rejoins the linear
// reading: at an opcode that begins where one of the linear reading's
// does, with nothing of its own on the stack, no mark and no memo entry.
// From there on it would walk the linear reading's opcodes with a part of
// its state, and so find a part of its globals. And all the readings
// together walk at most twice the linear reading's opcodes (plus 64 Ki):
// one that would walk further is cut, and a finding (verdict unknown)
// says where, so that an opcode flood after a crossing costs a small
// multiple of one pass instead of one pass per resume point.
func reread(data []byte, lim Limits, crossings []int) []GlobalUse {
	if len(crossings) == 0 {
		return nil
	}
	// The linear reading once more, recording where its opcodes begin.
	var discard []GlobalUse
	m := newScanner(data, lim)
	m.audit, m.noEmit = &discard, true
	m.starts = make([]uint64, len(data)/64+1)
	m.run(-1) // a failure ends it where Globals' own reading ended
	budget := 2*m.ops + 1<<16
	var out []GlobalUse
	for i, at := range crossings {
		if budget <= 0 {
			out = append(out, GlobalUse{Offset: int64(at), Op: "FRAME", Dynamic: true, Verdict: VerdictUnknown, Incomplete: true,
				Reason: fmt.Sprintf("not read as a loader resuming at bytes %d to %d after the frame: the readings from earlier points walked twice the pickle's opcodes", at, crossings[len(crossings)-1])})
			break
		}
		var sub []GlobalUse
		s := newScanner(data[at:], lim)
		s.audit, s.noEmit = &sub, true
		s.rejoin, s.rejoinAt = m.starts, at
		s.lim.MaxOps = min(lim.MaxOps, budget)
		_, err := s.run(-1)
		budget -= s.ops
		for _, g := range sub {
			g.Offset += int64(at)
			g.Reason = fmt.Sprintf("read as a loader resuming at byte %d after the frame: %s", at, g.Reason)
			out = append(out, g)
		}
		var le *LimitError
		if errors.As(err, &le) && le.Limit == "MaxOps" && s.lim.MaxOps < lim.MaxOps {
			var oe *OpError
			errors.As(err, &oe)
			out = append(out, GlobalUse{Offset: int64(at) + oe.Offset, Op: "FRAME", Dynamic: true, Verdict: VerdictUnknown, Incomplete: true,
				Reason: fmt.Sprintf("read as a loader resuming at byte %d after the frame up to here only: the readings walked twice the pickle's opcodes", at)})
			if i+1 < len(crossings) {
				budget = 0
			}
		}
	}
	return out
}

// hasBit reports whether bit i of b is set (false past its end).
func hasBit(b []uint64, i int) bool {
	return i/64 < len(b) && b[i/64]&(1<<(i%64)) != 0
}
