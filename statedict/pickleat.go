package statedict

import (
	"errors"
	"fmt"
	"io"

	"github.com/ckpt-dev/ckpt/pickle"
)

// pickleAt unpickles the pickle that starts at off in r, which must end by
// end. It reads a small window first and grows it only while the pickle
// runs past it, so a pickle costs about its own size in memory. It returns
// the value and the pickle's length in bytes. Growing by 4x bounds the
// re-parsing to a third of the final size.
func pickleAt(r io.ReaderAt, off, end int64, what string, cfg *config, opts ...pickle.Option) (any, int64, error) {
	if off >= end {
		return nil, 0, &Error{Record: what, Err: fmt.Errorf("%w: expected a pickle at offset %d, found the end of the data", ErrTruncated, off)}
	}
	opts = append(opts, pickle.WithLimits(cfg.limits), pickle.WithContext(cfg.ctx))
	window := min(end-off, 4<<10)
	for {
		buf := make([]byte, window)
		if n, err := r.ReadAt(buf, off); int64(n) < window {
			return nil, 0, &Error{Record: what, Err: fmt.Errorf("%w: %v", ErrTruncated, err)}
		}
		v, n, err := pickle.UnpickleN(buf, opts...)
		if err == nil {
			return v, int64(n), nil
		}
		// A pickle cut by the window looks malformed; only the whole
		// data (or the size limit) makes the error final.
		if !errors.Is(err, pickle.ErrTruncated) || window >= end-off || window >= cfg.maxPickle {
			return nil, 0, pickleError(what, err)
		}
		window = min(end-off, window*4, cfg.maxPickle)
	}
}
