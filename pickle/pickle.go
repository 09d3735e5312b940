package pickle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	gopickle "github.com/nlpodyssey/gopickle/pickle"
)

// Sentinel errors. Every error Unpickle returns matches one of them with
// errors.Is, except errors returned by a caller's persistent-load hook,
// which are passed through (wrapped in an *OpError), and the context's
// error when a WithContext context ends (context.Canceled or
// context.DeadlineExceeded, also in an *OpError).
var (
	// ErrUnsafe reports a global that could run code (os.system,
	// builtins.eval, subprocess.Popen, ...). The concrete error is *UnsafeError.
	ErrUnsafe = errors.New("pickle: unsafe global")
	// ErrMalformed reports a stream that is not a valid pickle, or a torch
	// rebuild call whose arguments do not have the shape torch writes.
	ErrMalformed = errors.New("pickle: malformed pickle")
	// ErrLimit reports that the pickle exceeds one of the Limits. The
	// concrete error is *LimitError, which names the limit and its value.
	ErrLimit = errors.New("pickle: limit exceeded")
	// ErrTruncated marks the ErrMalformed errors of a stream that ends
	// before its pickle does (no STOP, an argument or line cut short):
	// the same bytes with more after them might be a valid pickle.
	ErrTruncated = errors.New("pickle: truncated")
)

// UnsafeError names a global that ckpt refuses to load because calling it
// could run code or touch the system.
type UnsafeError struct {
	Module, Name string
}

// Error names the refused global.
func (e *UnsafeError) Error() string {
	return fmt.Sprintf("pickle: unsafe global %s.%s refused", e.Module, e.Name)
}

// Is reports whether target is ErrUnsafe.
func (e *UnsafeError) Is(target error) bool { return target == ErrUnsafe }

// OpError locates an error in the pickle stream.
type OpError struct {
	Offset int64  // byte offset of the opcode in the pickle
	Op     string // opcode name as pickletools spells it ("REDUCE", "GLOBAL", ...)
	Err    error
}

// Error prefixes the underlying error with the opcode and its offset.
func (e *OpError) Error() string {
	return fmt.Sprintf("at offset %d (%s): %v", e.Offset, e.Op, e.Err)
}

// Unwrap returns the underlying error.
func (e *OpError) Unwrap() error { return e.Err }

type config struct {
	limits         Limits
	ctx            context.Context
	persistentLoad func(pid any) (any, error)
}

// Option configures Unpickle.
type Option func(*config)

// WithPersistentLoad sets the hook called for each persistent id (BINPERSID
// and PERSID opcodes). pid is converted to this package's value types first
// (torch's storage ids arrive as *Tuple). Tensor rebuild functions expect
// the hook to return a *StorageRef for storages. Without this option
// ParseStoragePID is used; a nil fn keeps that default.
func WithPersistentLoad(fn func(pid any) (any, error)) Option {
	return func(c *config) {
		if fn != nil {
			c.persistentLoad = fn
		}
	}
}

// Unpickle reads one pickle from data (the whole pickle record, already in
// memory) and returns its value tree. Bytes after the STOP opcode are
// ignored; use UnpickleN to learn where the pickle ended.
func Unpickle(data []byte, opts ...Option) (any, error) {
	v, _, err := UnpickleN(data, opts...)
	return v, err
}

// UnpickleN is Unpickle that also returns the number of bytes of data the
// pickle occupied (through its STOP opcode), for streams that hold several
// pickles back to back, like torch's legacy format.
func UnpickleN(data []byte, opts ...Option) (any, int, error) {
	cfg := config{limits: DefaultLimits(), ctx: context.Background(),
		persistentLoad: func(pid any) (any, error) { return ParseStoragePID(pid) }}
	for _, o := range opts {
		o(&cfg)
	}
	prog, err := scan(cfg.ctx, data, cfg.limits)
	if err != nil {
		return nil, 0, err
	}
	m := &machine{cfg: &cfg, prog: prog, conv: newConverter(cfg.limits)}
	m.conv.ctx = cfg.ctx
	r := &countingReader{r: bytes.NewReader(prog.code), ctx: cfg.ctx, next: ctxEvery}
	u := gopickle.NewUnpickler(r)
	u.FindClass = m.findClass
	u.PersistentLoad = m.persistentLoad
	raw, err := u.Load()
	if r.err != nil {
		err = r.err
	}
	if err != nil {
		return nil, 0, m.locate(r.n, err)
	}
	v, err := m.conv.value(raw, 0)
	if err != nil {
		return nil, 0, err
	}
	return v, prog.end, nil
}

// countingReader counts the bytes gopickle consumed, to map an error back to
// the opcode that caused it, and ends the stream when ctx is done (gopickle
// reads every opcode through it, so this is its cancellation point).
type countingReader struct {
	r    *bytes.Reader
	n    int
	ctx  context.Context
	next int   // c.n at which ctx is looked at again
	err  error // ctx's error, once seen
}

func (c *countingReader) check() error {
	if c.err == nil && c.n >= c.next {
		c.next = c.n + ctxEvery
		c.err = c.ctx.Err()
	}
	return c.err
}

func (c *countingReader) Read(p []byte) (int, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// userError marks an error returned by the caller's persistent-load hook, so
// that it is passed through instead of being classified as ErrMalformed.
type userError struct{ err error }

func (e *userError) Error() string { return e.err.Error() }
func (e *userError) Unwrap() error { return e.err }

// locate turns an error from gopickle into an *OpError at the offset of the
// original opcode that was executing. Errors that are not ours or the
// caller's are gopickle's own stream errors and become ErrMalformed.
func (m *machine) locate(consumed int, err error) error {
	var ue *userError
	switch {
	case errors.As(err, &ue):
		err = ue.err
	case errors.Is(err, ErrMalformed), errors.Is(err, ErrLimit), errors.Is(err, ErrUnsafe),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
	default:
		err = fmt.Errorf("%w: %s", ErrMalformed, vmMessage(err.Error()))
	}
	off, op := m.prog.origin(consumed)
	return &OpError{Offset: int64(off), Op: op, Err: err}
}

// vmMessages rephrase gopickle's errors that end in a Go dump of the
// offending value (%#v) or name its Go interfaces.
var vmMessages = []struct{ prefix, say string }{
	{"NEWOBJ requires a PyNewable object", "NEWOBJ on a value that is not a class"},
	{"NEWOBJ_EX requires a PyNewable object", "NEWOBJ_EX on a value that is not a class"},
	{"REDUCE requires a Callable object", "REDUCE calls a value that is not callable"},
	{"cannot instantiate", "OBJ or INST on a value that is not a class"},
	{"BUILD requires a PyDictSettable instance", "BUILD on a value that takes no state"},
	{"STACK_GLOBAL requires str", "STACK_GLOBAL needs two strings"},
	{"APPEND requires", "APPEND(S) on a value that is not a list"},
	{"SETITEM", "SETITEM(S) on a value that is not a dict"},
	{"ADDITEMS requires", "ADDITEMS on a value that is not a set"},
}

// vmMessage returns gopickle's error text without Go syntax.
func vmMessage(msg string) string {
	for _, m := range vmMessages {
		if strings.HasPrefix(msg, m.prefix) {
			return m.say
		}
	}
	return msg
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

// truncated is malformed for a stream cut short: the error is both
// ErrMalformed and ErrTruncated, and reads as a malformed one does.
func truncated(format string, args ...any) error {
	return truncatedError{malformed(format, args...)}
}

type truncatedError struct{ err error }

func (e truncatedError) Error() string        { return e.err.Error() }
func (e truncatedError) Unwrap() error        { return e.err }
func (e truncatedError) Is(target error) bool { return target == ErrTruncated }
