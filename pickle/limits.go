package pickle

import (
	"context"
	"fmt"
)

// Limits bound the resources a pickle may make Unpickle use. A zero field
// means the default from DefaultLimits. Every limit is far above what any
// pickle torch.save writes reaches, and low enough that a hostile stream
// costs time linear in its size and memory of a fixed overhead plus a small
// multiple of its size (docs/limits.md lists them with the measured budget).
// Exceeding one fails with a *LimitError, which matches ErrLimit.
type Limits struct {
	// MaxDepth bounds the number of open MARKs and the nesting depth of
	// the returned value tree (and of rebuild calls). Default 1000.
	MaxDepth int
	// MaxMemo bounds memo indices (and so the number of memo entries).
	// Default 1<<24.
	MaxMemo int
	// MaxContainerLen bounds the number of items of any tuple, list, dict
	// or set. Default 1<<26.
	MaxContainerLen int
	// MaxOps bounds the number of opcodes executed. Default 1<<28.
	MaxOps int
	// MaxStack bounds the number of items on the machine's stack at any
	// time (all MARK levels together). Python's pickler keeps it small
	// (lists and dicts are appended in batches of 1000); only a tuple or
	// an object's arguments sit on the stack whole. Default 1<<20.
	MaxStack int
	// MaxIntBytes bounds the size in bytes of one LONG1 or LONG4 integer.
	// torch writes integers of at most 10 bytes (the legacy magic number);
	// Python itself refuses to print integers of more than 4300 digits
	// (about 1.8 KB). Default 4096.
	MaxIntBytes int
	// MaxBytes bounds the total size of the str and bytes values the
	// stream creates, after decoding. Default 1 GiB.
	MaxBytes int64
}

// DefaultLimits returns the limits used for zero fields: generous enough for
// any pickle torch writes (Python's own pickler cannot nest deeper than its
// recursion limit of about 1000), small enough to keep hostile input linear.
func DefaultLimits() Limits {
	return Limits{
		MaxDepth:        1000,
		MaxMemo:         1 << 24,
		MaxContainerLen: 1 << 26,
		MaxOps:          1 << 28,
		MaxStack:        1 << 20,
		MaxIntBytes:     4096,
		MaxBytes:        1 << 30,
	}
}

// withDefaults returns l with every zero (or negative) field set to its default.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	def := func(v *int, dv int) {
		if *v <= 0 {
			*v = dv
		}
	}
	def(&l.MaxDepth, d.MaxDepth)
	def(&l.MaxMemo, d.MaxMemo)
	def(&l.MaxContainerLen, d.MaxContainerLen)
	def(&l.MaxOps, d.MaxOps)
	def(&l.MaxStack, d.MaxStack)
	def(&l.MaxIntBytes, d.MaxIntBytes)
	if l.MaxBytes <= 0 {
		l.MaxBytes = d.MaxBytes
	}
	return l
}

// WithLimits sets resource limits; zero fields keep their defaults.
func WithLimits(l Limits) Option {
	return func(c *config) { c.limits = l.withDefaults() }
}

// WithContext makes Unpickle stop with ctx's error (context.Canceled or
// context.DeadlineExceeded, wrapped in an *OpError) soon after ctx is done:
// the validating pass and the opcode machine check it every few thousand
// opcodes.
func WithContext(ctx context.Context) Option {
	return func(c *config) {
		if ctx != nil {
			c.ctx = ctx
		}
	}
}

// LimitError reports which limit a stream exceeded. It matches ErrLimit
// with errors.Is. Limit names the field of Limits (or, for limits of other
// packages, the option) that raises it.
type LimitError struct {
	Limit string // "MaxStack", "MaxIntBytes", ... or an option such as "statedict.WithMaxNames"; "" for a budget derived from the input's size
	What  string // what was counted: "stack items", "integer bytes", ...
	Value int64  // the count reached (at least Max+1)
	Max   int64  // the limit in force
}

// Error reads "pickle: limit exceeded: 1048577 stack items, more than
// MaxStack 1048576 (raise it with pickle.Limits)".
func (e *LimitError) Error() string {
	if e.Limit == "" {
		return fmt.Sprintf("limit exceeded: %d %s, more than the budget of %d", e.Value, e.What, e.Max)
	}
	raise := "pickle.Limits." + e.Limit
	for i := 0; i < len(e.Limit); i++ {
		if e.Limit[i] == '.' {
			raise = e.Limit
			break
		}
	}
	return fmt.Sprintf("limit exceeded: %d %s, more than the limit of %d (raise it with %s)", e.Value, e.What, e.Max, raise)
}

// Is reports whether target is ErrLimit.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

func limitErr(limit, what string, value, max int64) error {
	return &LimitError{Limit: limit, What: what, Value: value, Max: max}
}

// ctxEvery is how many opcodes (or bytes of the rewritten stream) pass
// between two looks at the context.
const ctxEvery = 1 << 12
