package statedict

import (
	"errors"
	"strings"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/torchzip"
)

// Errors returned by the readers. Every error from Open and NewReader wraps
// one of these (or an error of package pickle or safetensors) in an *Error
// that names the file, the record and the tensor involved.
var (
	// ErrFormat: the content is not a checkpoint format ckpt knows.
	ErrFormat = errors.New("statedict: unknown checkpoint format")
	// ErrEmpty: the file is empty.
	ErrEmpty = errors.New("statedict: empty file")
	// ErrTruncated: the file ends before its structure says it does.
	ErrTruncated = errors.New("statedict: truncated file")
	// ErrMalformed: the structure is inconsistent (bad counts, offsets, types).
	ErrMalformed = errors.New("statedict: malformed checkpoint")
	// ErrMissingRecord: the pickle refers to a storage record the container lacks.
	ErrMissingRecord = errors.New("statedict: missing storage record")
	// ErrShortStorage: a tensor reaches past the end of its storage.
	ErrShortStorage = errors.New("statedict: storage shorter than tensor")
	// ErrOverflow: a shape, stride or offset overflows 64-bit byte arithmetic.
	ErrOverflow = errors.New("statedict: size overflows int64")
	// ErrUnsupported: a valid construct ckpt does not read (e.g. TorchScript code).
	ErrUnsupported = errors.New("statedict: unsupported")
	// ErrNeedsDirectory: a sharded index was given without the directory that holds its shards.
	ErrNeedsDirectory = errors.New("statedict: sharded index needs its directory (use Open with a path)")
	// ErrNotRegular: a path names a FIFO, device, socket or other
	// non-regular file, which Open refuses rather than wait on.
	ErrNotRegular = errors.New("statedict: not a regular file")
)

// Error is the typed error of every failed read: it says where (file,
// record, tensor) and wraps the cause, so errors.Is(err, ErrShortStorage)
// and errors.Is(err, pickle.ErrUnsafe) work.
type Error struct {
	File   string // path of the file or shard, "" for a bare io.ReaderAt
	Record string // zip record, tar member or section ("data.pkl", "archive/data/3")
	Tensor string // tensor name, when one is involved
	Err    error
}

// Error reads "file: record R: tensor \"T\": cause", leaving out what is unknown.
func (e *Error) Error() string {
	var b strings.Builder
	for _, part := range [...][2]string{{"", e.File}, {"record ", e.Record}, {"tensor ", e.Tensor}} {
		if part[1] == "" {
			continue
		}
		b.WriteString(part[0])
		if part[0] == "tensor " {
			b.WriteString("\"" + part[1] + "\"")
		} else {
			b.WriteString(part[1])
		}
		b.WriteString(": ")
	}
	if e.Err != nil {
		b.WriteString(strings.TrimPrefix(e.Err.Error(), "statedict: "))
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// withFile fills in the file name of err (an *Error or not) when missing.
func withFile(err error, file string) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		if e.File == "" {
			e.File = file
		}
		return err
	}
	return &Error{File: file, Err: err}
}

// formatError is an error of a format package (dcp) that also matches
// this package's sentinel of the same meaning (kind, when not nil), and
// reads as this package's errors read: prefix (the format package's) is
// replaced by "statedict: ", which *Error then leaves out.
type formatError struct {
	err, kind error
	prefix    string
}

func (e *formatError) Error() string {
	return "statedict: " + strings.TrimPrefix(e.err.Error(), e.prefix)
}

func (e *formatError) Unwrap() []error {
	if e.kind == nil {
		return []error{e.err}
	}
	return []error{e.err, e.kind}
}

// formatKinds pairs the sentinels of the format packages with this
// package's of the same meaning (nil: none; the format's own is the one).
var formatKinds = [...]struct {
	from, to error
	prefix   string
}{
	{dcp.ErrMalformed, ErrMalformed, "dcp: "}, {dcp.ErrMissing, ErrMissingRecord, "dcp: "}, {dcp.ErrTruncated, ErrTruncated, "dcp: "},
	{dcp.ErrOverflow, ErrOverflow, "dcp: "}, {dcp.ErrUnsupported, ErrUnsupported, "dcp: "}, {dcp.ErrTiling, nil, "dcp: "},
	{torchzip.ErrNotTorchZip, ErrFormat, "torchzip: "}, {torchzip.ErrTruncated, ErrTruncated, "torchzip: "},
	{torchzip.ErrMalformed, ErrMalformed, "torchzip: "}, {torchzip.ErrUnsupported, ErrUnsupported, "torchzip: "},
}

// fromFormat gives an error of a format package (dcp, torchzip) this
// package's sentinel of the same meaning too, and this package's wording;
// a torchzip.RecordError becomes an *Error naming the record.
func fromFormat(err error) error {
	if err == nil {
		return nil
	}
	var re *torchzip.RecordError
	if errors.As(err, &re) && re == err {
		return &Error{Record: re.Name, Err: fromFormat(re.Err)}
	}
	for _, k := range formatKinds {
		if errors.Is(err, k.from) {
			return &formatError{err: err, kind: k.to, prefix: k.prefix}
		}
	}
	return err
}

// contextError prefixes an error with where it happened, without the
// "statedict: " of the sentinel it wraps.
type contextError struct {
	where string
	err   error
}

func (e *contextError) Error() string {
	return e.where + ": " + strings.TrimPrefix(e.err.Error(), "statedict: ")
}

func (e *contextError) Unwrap() error { return e.err }
