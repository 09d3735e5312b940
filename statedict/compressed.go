package statedict

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"
)

// Defaults of the decompressed-size limit of gzip/zstd-wrapped files.
const (
	// expansionFactor: the limit is this many times the compressed
	// size. Checkpoints of trained weights compress by less than 2x;
	// a file of mostly zeros may need WithMaxDecompressedSize.
	expansionFactor = 64
	// minDecompressLimit: the limit for small files.
	minDecompressLimit = 64 << 20
)

// defaultMaxDecompressed is the decompressed-size limit of a compressed
// file of size bytes when WithMaxDecompressedSize is not given:
// expansionFactor times its size, at least minDecompressLimit, at most
// the free space of the temporary directory.
func defaultMaxDecompressed(size int64, tempDir string) int64 {
	limit := max(minDecompressLimit, min(size, 1<<56)*expansionFactor)
	if tempDir == "" {
		tempDir = os.TempDir()
	}
	if free, ok := freeSpace(tempDir); ok {
		limit = min(limit, max(free, 1<<20))
	}
	return limit
}

// plausibleContainer reports whether the first bytes of decompressed
// content begin a format newReader reads.
func plausibleContainer(head []byte) bool {
	switch {
	case bytes.HasPrefix(head, zipMagic), bytes.HasPrefix(head, zipEmpty), isLegacyMagic(head):
		return true
	case len(head) >= 262 && bytes.Equal(head[257:262], []byte("ustar")):
		return true
	}
	return looksLikeSafetensors(head, 1<<62)
}

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
	// The first bytes out must begin a checkpoint: garbage (or zeros) is
	// refused before anything is spooled to disk.
	first := make([]byte, 512)
	n, err := io.ReadFull(dec, first)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		cause := ErrMalformed
		if errors.Is(err, io.ErrUnexpectedEOF) {
			cause = ErrTruncated
		}
		return nil, &Error{Record: kind, Err: fmt.Errorf("%w: decompressing: %v", cause, err)}
	}
	first = first[:n]
	switch {
	case n == 0:
		return nil, &Error{Record: kind, Err: ErrEmpty}
	case bytes.HasPrefix(first, gzipMagic) || bytes.HasPrefix(first, zstdMagic):
		return nil, &Error{Record: kind, Err: fmt.Errorf("%w: compressed twice", ErrUnsupported)}
	case !plausibleContainer(first):
		return nil, &Error{Record: kind, Err: fmt.Errorf("%w: the decompressed content is not a checkpoint (first bytes % x)", ErrFormat, first[:min(n, 8)])}
	}
	limit := cfg.maxDecompress
	if limit <= 0 {
		limit = defaultMaxDecompressed(size, cfg.tempDir)
	}
	f, err := spoolToTemp(cfg.ctx, io.MultiReader(bytes.NewReader(first), dec), cfg.tempDir, limit)
	if err != nil {
		if errors.Is(err, ErrMalformed) && cfg.maxDecompress <= 0 {
			err = fmt.Errorf("%w (the default limit: %dx the compressed size, at least %d MiB, at most the free space in the temporary directory; statedict.WithMaxDecompressedSize raises it)",
				err, expansionFactor, minDecompressLimit>>20)
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, &Error{Record: kind, Err: err}
		}
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
	ck, err := newReader(f, fi.Size(), cfg)
	if err != nil {
		f.Close()
		return nil, err
	}
	ck.Compression = kind
	ck.closers = append(ck.closers, f)
	return ck, nil
}
