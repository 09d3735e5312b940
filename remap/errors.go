package remap

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns wraps one of them, so
// callers can test with errors.Is.
var (
	// ErrSyntax reports a rule string or device string that does not have
	// the shape of a device or of SRC=DST pairs.
	ErrSyntax = errors.New("remap: syntax error")
	// ErrDevice reports a well-formed device string naming a device type
	// that is not known (and not registered with WithBackend), an index out
	// of range, or a CPU index other than 0.
	ErrDevice = errors.New("remap: invalid device")
	// ErrTensor reports a tensor the plan cannot account for: a nil entry or
	// a size that is negative or overflows.
	ErrTensor = errors.New("remap: invalid tensor")
)

// acceptedForms is appended to every RuleError message so that a user who
// typed a bad rule sees what would have worked.
const acceptedForms = "accepted: a device (cpu, cuda, cuda:N, mps, meta, xpu:N, hpu:N, mtia:N, " +
	"privateuseone:N, ...; N is 0-127 without sign or leading zeros) sending everything there, " +
	"or SRC=DST pairs separated by commas (cuda:1=cuda:0,cuda:0=cuda:1); a bare type as SRC " +
	"(cuda=cpu) matches every index of that type"

// RuleError describes a rule or device string that could not be parsed.
// It wraps ErrSyntax or ErrDevice.
type RuleError struct {
	Input  string // the whole string being parsed
	Pos    int    // byte offset in Input where the offending part starts
	Reason string // what is wrong, in words
	Err    error  // ErrSyntax or ErrDevice
}

// Error returns the reason, where it was found and the accepted forms.
func (e *RuleError) Error() string {
	return fmt.Sprintf("remap: %q at byte %d: %s (%s)", e.Input, e.Pos, e.Reason, acceptedForms)
}

// Unwrap returns the sentinel (ErrSyntax or ErrDevice).
func (e *RuleError) Unwrap() error { return e.Err }
