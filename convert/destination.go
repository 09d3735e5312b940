package convert

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Destination is somewhere other than the local file system that Convert
// writes to (WithDestination), such as a bucket of an object store. Its
// names are slash-separated paths relative to it; Convert's out is one
// of them: a file name, or a "directory" ending in "/" (or "", the
// destination's root) for directory and sharded outputs.
//
// Outputs are created as the conversion goes and committed at its end,
// shards first and the index last, as local temporary files are renamed
// into place; on any failure every output not committed is aborted, and
// those already committed by the call are removed.
type Destination interface {
	// Exists reports whether name exists (checked for every output,
	// unless WithForce(true), before anything is written).
	Exists(ctx context.Context, name string) (bool, error)
	// Create starts writing name. head is how many bytes at the start
	// Convert may rewrite with WriteAt once the rest is written (a
	// safetensors header carrying the digests); 0 when none.
	Create(ctx context.Context, name string, head int64) (Output, error)
	// Remove deletes name: an output this call committed, taken back
	// because a later one failed.
	Remove(ctx context.Context, name string) error
	// Name returns how messages and the Summary name name (a URL).
	Name(name string) string
}

// SizeDestination is a Destination that can also tell the size of what
// is at a name: WithPart needs it, for part 0 to see the other parts'
// outputs complete (present, with the planned size) before it writes the
// index. A separate interface, so that other Destinations keep
// compiling; they are refused with WithPart.
type SizeDestination interface {
	Destination
	// Size returns the size of name and whether it exists; a missing
	// name is not an error.
	Size(ctx context.Context, name string) (int64, bool, error)
}

// Output is one output being written to a Destination. Write appends;
// WriteAt rewrites bytes within the head given to Create; Finish is
// called once everything is written, to send what the output holds and
// release its buffers (a sharded conversion keeps every shard open until
// the end); nothing may appear at the name before Commit. Abort takes
// everything back; it is called after a failed Commit too, and must do
// nothing after a successful one.
type Output interface {
	io.Writer
	io.WriterAt
	Finish() error
	Commit(ctx context.Context) error
	Abort() error
}

// WithDestination makes Convert write to d instead of the local file
// system: out is then a name in d. Everything else is as for a local
// output, but for a zstd-compressed safetensors output, whose plain
// bytes are first written to a temporary file in the local temporary
// directory ($TMPDIR) because the digests are patched into the header
// after the data, before compression.
func WithDestination(d Destination) Option { return func(c *options) { c.dest = d } }

// remoteWriter is an Output as the writer of a tempFile; its buffering is
// the Output's own, so Flush has nothing to do.
type remoteWriter struct{ o Output }

func (r remoteWriter) Write(p []byte) (int, error) { return r.o.Write(p) }

func (r remoteWriter) Flush() error { return nil }

// ReadFrom uses the Output's own ReadFrom where it has one (no copy
// buffer).
func (r remoteWriter) ReadFrom(src io.Reader) (int64, error) {
	if rf, ok := r.o.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	return io.Copy(struct{ io.Writer }{r.o}, src)
}

// checkLocal refuses a URL as a local output name (ErrDestination): with
// no Destination, out is a path of the local file system, and
// "s3://bucket/x/" would otherwise become a directory named "s3:".
func (c *config) checkLocal(out string) error {
	if c.dest != nil {
		return nil
	}
	if i := strings.Index(out, "://"); i > 0 && !strings.ContainsAny(out[:i], `/\`) {
		return fmt.Errorf("%w: %q", ErrDestination, out)
	}
	return nil
}
