package statedict

import (
	"context"
	"io"
)

// Budget of the object-tree walk when no option sets it: names (nodes
// visited) and name bytes grow with the pickle's size. torch spends about
// 100 bytes of pickle per tensor and 3 to 5 per item of an optimizer's
// parameter-id lists, so one name per 16 bytes past the first 65536 names
// is far from real checkpoints, while a list of 16M None (1 byte each),
// which every command lists item by item at about 500 bytes and 4 us per
// name, is refused instead of taking 7.5 GB and 70 s. A name is rarely
// more than 16 times the bytes that add it (a key path over a list of
// small ints). A shared container counts once per name it is reached by.
const (
	defaultNamesBase        = 1 << 16
	defaultBytesPerName     = 16
	defaultNameBytesBase    = 16 << 20
	defaultNameBytesPerByte = 16
)

// WithMaxNames bounds how many names (tensors, objects and containers,
// counted once per path that reaches them) the walk of a pickle's object
// tree may give before it fails with a *pickle.LimitError. A pickle can
// share one container under many names through its memo, so a few hundred
// bytes can name exponentially many paths. The default, for n <= 0, is
// 65536 plus one per 16 bytes of the pickle.
func WithMaxNames(n int64) Option { return func(c *config) { c.maxNames = n } }

// WithMaxNameBytes bounds the total length of the names the walk of a
// pickle's object tree builds. The default, for n <= 0, is 16 MiB plus 16
// bytes per byte of the pickle.
func WithMaxNameBytes(n int64) Option { return func(c *config) { c.maxNameBytes = n } }

// WithContext makes opening stop with ctx's error soon after ctx is done:
// unpickling and the walk of the object tree look at it every few thousand
// steps. OpenContext and NewReaderContext set it from their argument.
func WithContext(ctx context.Context) Option {
	return func(c *config) {
		if ctx != nil {
			c.ctx = ctx
		}
	}
}

// OpenContext is Open that stops with ctx's error when ctx is done first.
func OpenContext(ctx context.Context, path string, opts ...Option) (*Checkpoint, error) {
	return Open(path, append([]Option{WithContext(ctx)}, opts...)...)
}

// NewReaderContext is NewReader that stops with ctx's error when ctx is
// done first.
func NewReaderContext(ctx context.Context, r io.ReaderAt, size int64, opts ...Option) (*Checkpoint, error) {
	return NewReader(r, size, append([]Option{WithContext(ctx)}, opts...)...)
}
