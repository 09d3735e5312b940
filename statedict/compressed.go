package statedict

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

// readCompressed reads a gzip- or zstd-wrapped checkpoint. Compressed streams
// have no random access, so the content is decompressed once into an
// unlinked temporary file (bounded by WithMaxDecompressedSize) and read
// from there: memory stays flat whatever the size.
func readCompressed(r io.ReaderAt, size int64, head []byte, cfg *config) (*Checkpoint, error) {
	src := io.NewSectionReader(r, 0, size)
	var dec io.Reader
	kind := "gzip"
	if bytes.HasPrefix(head, gzipMagic) {
		zr, err := gzip.NewReader(src)
		if err != nil {
			return nil, &Error{Record: kind, Err: fmt.Errorf("%w: %v", ErrMalformed, err)}
		}
		defer zr.Close()
		dec = zr
	} else {
		kind = "zstd"
		zr, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<30))
		if err != nil {
			return nil, &Error{Record: kind, Err: fmt.Errorf("%w: %v", ErrMalformed, err)}
		}
		defer zr.Close()
		dec = zr
	}
	f, err := spoolToTemp(dec, cfg.tempDir, cfg.maxDecompress)
	if err != nil {
		if !errors.Is(err, ErrMalformed) {
			cause := ErrMalformed
			if errors.Is(err, io.ErrUnexpectedEOF) {
				cause = ErrTruncated
			}
			err = fmt.Errorf("%w: decompressing: %v", cause, err)
		}
		return nil, &Error{Record: kind, Err: err}
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if fi.Size() == 0 {
		f.Close()
		return nil, &Error{Record: kind, Err: ErrEmpty}
	}
	var inner [4]byte
	if _, err := f.ReadAt(inner[:], 0); err == nil && (bytes.HasPrefix(inner[:], gzipMagic) || bytes.HasPrefix(inner[:], zstdMagic)) {
		f.Close()
		return nil, &Error{Record: kind, Err: fmt.Errorf("%w: compressed twice", ErrUnsupported)}
	}
	ck, err := newReader(f, fi.Size(), cfg)
	if err != nil {
		f.Close()
		return nil, err
	}
	ck.Compression = kind
	ck.closers = append(ck.closers, f)
	return ck, nil
}
