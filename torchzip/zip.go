package torchzip

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ckpt-dev/ckpt/internal/ieeecrc"
)

// Alignment is the boundary torch aligns every record's payload to.
const Alignment = 64

const (
	sigLocal      = 0x04034b50
	sigDescriptor = 0x08074b50
	sigCentral    = 0x02014b50
	sigEnd64      = 0x06064b50
	sigLocator64  = 0x07064b50
	sigEnd        = 0x06054b50
	flags         = 0x0808 // data descriptor follows; names are UTF-8
	max32         = 0xffffffff
)

type entry struct {
	name  string
	off   int64 // offset of the local header
	size  int64
	crc   uint32
	zip64 bool
}

// Writer writes a torch zip archive record by record. Records are stored
// uncompressed, each payload 64-byte aligned, in the order written.
type Writer struct {
	w       io.Writer
	prefix  string
	off     int64
	entries []entry
	names   map[string]bool
	buf     []byte
	err     error
}

// Option configures NewWriter.
type Option func(*Writer)

// WithPrefix sets the archive's top folder (default "archive", what
// torch.save writes when saving to a file object).
func WithPrefix(p string) Option { return func(w *Writer) { w.prefix = p } }

// WithBufferSize sets the size of the buffer records are copied through
// (default 1 MiB); larger buffers mean fewer, larger reads.
func WithBufferSize(n int) Option {
	return func(w *Writer) {
		if n >= 4096 {
			w.buf = make([]byte, n)
		}
	}
}

// NewWriter returns a Writer that writes an archive to w. Nothing is
// written until the first record.
func NewWriter(w io.Writer, opts ...Option) *Writer {
	zw := &Writer{w: w, prefix: "archive", names: map[string]bool{}}
	for _, o := range opts {
		o(zw)
	}
	if zw.buf == nil {
		zw.buf = make([]byte, 1<<20)
	}
	return zw
}

// Offset returns the number of bytes written so far.
func (w *Writer) Offset() int64 { return w.off }

func (w *Writer) write(p []byte) error {
	n, err := w.w.Write(p)
	w.off += int64(n)
	return err
}

// fail records the first error that leaves the archive incomplete.
func (w *Writer) fail(err error) error {
	w.err = fmt.Errorf("%w: %w", ErrClosed, err)
	return err
}

// WriteRecord writes the record prefix/name holding exactly size bytes
// copied from r, computing its CRC32 on the way. Fewer or more bytes in r
// are ErrDataLength. After any error the Writer is unusable (ErrClosed).
func (w *Writer) WriteRecord(name string, size int64, r io.Reader) error {
	if w.err != nil {
		return w.err
	}
	full := w.prefix + "/" + name
	if name == "" || size < 0 || w.names[full] || strings.HasPrefix(name, "/") || len(full) > 0xffff-1 {
		return &RecordError{Name: name, Err: fmt.Errorf("%w: empty, duplicate or oversized name, or negative size", ErrInvalid)}
	}
	w.names[full] = true
	e := entry{name: full, off: w.off, size: size}
	e.zip64 = size >= max32 || w.off >= max32
	var extra []byte
	if e.zip64 {
		extra = binary.LittleEndian.AppendUint16(extra, 1)
		extra = binary.LittleEndian.AppendUint16(extra, 16)
		extra = binary.LittleEndian.AppendUint64(extra, uint64(size))
		extra = binary.LittleEndian.AppendUint64(extra, uint64(size))
	}
	start := w.off + 30 + int64(len(full)) + int64(len(extra)) + 4
	pad := int((Alignment - start%Alignment) % Alignment)
	extra = append(extra, 'F', 'B')
	extra = binary.LittleEndian.AppendUint16(extra, uint16(pad))
	for range pad {
		extra = append(extra, 'Z')
	}
	hdr := make([]byte, 0, 30+len(full)+len(extra))
	hdr = binary.LittleEndian.AppendUint32(hdr, sigLocal)
	version := uint16(0)
	if e.zip64 {
		version = 45
	}
	hdr = binary.LittleEndian.AppendUint16(hdr, version)
	hdr = binary.LittleEndian.AppendUint16(hdr, flags)
	hdr = binary.LittleEndian.AppendUint16(hdr, 0) // stored
	hdr = binary.LittleEndian.AppendUint32(hdr, 0) // time, date
	hdr = binary.LittleEndian.AppendUint32(hdr, 0) // crc in the descriptor
	if e.zip64 {
		hdr = binary.LittleEndian.AppendUint32(hdr, max32)
		hdr = binary.LittleEndian.AppendUint32(hdr, max32)
	} else {
		hdr = binary.LittleEndian.AppendUint64(hdr, 0)
	}
	hdr = binary.LittleEndian.AppendUint16(hdr, uint16(len(full)))
	hdr = binary.LittleEndian.AppendUint16(hdr, uint16(len(extra)))
	hdr = append(hdr, full...)
	hdr = append(hdr, extra...)
	if err := w.write(hdr); err != nil {
		return w.fail(err)
	}
	h := ieeecrc.New()
	var n int64
	var err error
	if rf, ok := w.w.(io.ReaderFrom); ok {
		// The output reads the bytes straight into its own buffers, and
		// the CRC is taken from them as they pass.
		n, err = rf.ReadFrom(io.TeeReader(io.LimitReader(r, size), h))
		w.off += n
	} else {
		n, err = io.CopyBuffer(io.MultiWriter(writerFunc(w.write), h), io.LimitReader(r, size), w.buf)
	}
	if err == nil && n < size {
		err = io.EOF
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = &RecordError{Name: name, Err: fmt.Errorf("%w: got %d of %d bytes", ErrDataLength, n, size)}
		}
		return w.fail(err)
	}
	var one [1]byte
	if m, _ := io.ReadFull(r, one[:]); m > 0 {
		return w.fail(&RecordError{Name: name, Err: fmt.Errorf("%w: more than %d bytes", ErrDataLength, size)})
	}
	e.crc = h.Sum32()
	desc := binary.LittleEndian.AppendUint32(nil, sigDescriptor)
	desc = binary.LittleEndian.AppendUint32(desc, e.crc)
	if e.zip64 {
		desc = binary.LittleEndian.AppendUint64(desc, uint64(size))
		desc = binary.LittleEndian.AppendUint64(desc, uint64(size))
	} else {
		desc = binary.LittleEndian.AppendUint32(desc, uint32(size))
		desc = binary.LittleEndian.AppendUint32(desc, uint32(size))
	}
	if err := w.write(desc); err != nil {
		return w.fail(err)
	}
	w.entries = append(w.entries, e)
	return nil
}

type writerFunc func([]byte) error

func (f writerFunc) Write(p []byte) (int, error) {
	if err := f(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close writes the "version" record ("3\n") and the central directory,
// ending with a ZIP64 end record and locator and a classic end record as
// torch does. It does not close the underlying io.Writer.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if err := w.WriteRecord("version", 2, strings.NewReader("3\n")); err != nil {
		return err
	}
	cdOff := w.off
	for _, e := range w.entries {
		if err := w.write(centralHeader(e)); err != nil {
			return w.fail(err)
		}
	}
	cdSize := w.off - cdOff
	count := uint64(len(w.entries))
	end64 := w.off
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, sigEnd64)
	b = binary.LittleEndian.AppendUint64(b, 44)
	b = binary.LittleEndian.AppendUint16(b, 0x031e)
	b = binary.LittleEndian.AppendUint16(b, 45)
	b = binary.LittleEndian.AppendUint64(b, 0) // disk numbers
	b = binary.LittleEndian.AppendUint64(b, count)
	b = binary.LittleEndian.AppendUint64(b, count)
	b = binary.LittleEndian.AppendUint64(b, uint64(cdSize))
	b = binary.LittleEndian.AppendUint64(b, uint64(cdOff))
	b = binary.LittleEndian.AppendUint32(b, sigLocator64)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, uint64(end64))
	b = binary.LittleEndian.AppendUint32(b, 1)
	b = binary.LittleEndian.AppendUint32(b, sigEnd)
	b = binary.LittleEndian.AppendUint32(b, 0)
	if count >= 0xffff || cdSize >= max32 || cdOff >= max32 {
		b = binary.LittleEndian.AppendUint16(b, 0xffff)
		b = binary.LittleEndian.AppendUint16(b, 0xffff)
		b = binary.LittleEndian.AppendUint32(b, max32)
		b = binary.LittleEndian.AppendUint32(b, max32)
	} else {
		b = binary.LittleEndian.AppendUint16(b, uint16(count))
		b = binary.LittleEndian.AppendUint16(b, uint16(count))
		b = binary.LittleEndian.AppendUint32(b, uint32(cdSize))
		b = binary.LittleEndian.AppendUint32(b, uint32(cdOff))
	}
	b = binary.LittleEndian.AppendUint16(b, 0)
	if err := w.write(b); err != nil {
		return w.fail(err)
	}
	w.err = ErrClosed
	return nil
}

func centralHeader(e entry) []byte {
	var extra []byte
	size32, off32 := uint32(e.size), uint32(e.off)
	version := uint16(0)
	if e.zip64 || e.off >= max32 {
		version = 45
		size32, off32 = max32, max32
		extra = binary.LittleEndian.AppendUint16(extra, 1)
		extra = binary.LittleEndian.AppendUint16(extra, 24)
		extra = binary.LittleEndian.AppendUint64(extra, uint64(e.size))
		extra = binary.LittleEndian.AppendUint64(extra, uint64(e.size))
		extra = binary.LittleEndian.AppendUint64(extra, uint64(e.off))
	}
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, sigCentral)
	b = binary.LittleEndian.AppendUint16(b, 0) // made by
	b = binary.LittleEndian.AppendUint16(b, version)
	b = binary.LittleEndian.AppendUint16(b, flags)
	b = binary.LittleEndian.AppendUint16(b, 0) // stored
	b = binary.LittleEndian.AppendUint32(b, 0) // time, date
	b = binary.LittleEndian.AppendUint32(b, e.crc)
	b = binary.LittleEndian.AppendUint32(b, size32)
	b = binary.LittleEndian.AppendUint32(b, size32)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(e.name)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(extra)))
	b = binary.LittleEndian.AppendUint16(b, 0) // comment
	b = binary.LittleEndian.AppendUint16(b, 0) // disk
	b = binary.LittleEndian.AppendUint16(b, 0) // internal attributes
	b = binary.LittleEndian.AppendUint32(b, 0) // external attributes
	b = binary.LittleEndian.AppendUint32(b, off32)
	b = append(b, e.name...)
	return append(b, extra...)
}
