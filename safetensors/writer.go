package safetensors

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"unicode/utf8"
)

// WriterTensor declares one tensor to write: its name, format dtype code
// and shape. Its byte size follows from dtype and shape (see ByteSize).
type WriterTensor struct {
	Name  string
	DType string
	Shape []int64
}

// HeaderBytes returns everything a file for these tensors holds before the
// data buffer: the 8-byte little-endian header length followed by the JSON
// header, padded with spaces to a multiple of 8. It also returns the
// tensors in data order, the order their bytes follow the header (by
// dtype alignment, widest first, then by name, as the reference writer
// orders them). The file's total size is len(header) plus the sum of the
// tensors' ByteSize.
//
// The JSON is written deterministically: "__metadata__" first when
// metadata is non-nil (an empty non-nil map is written as {}), then the
// tensors sorted by name, each as {"dtype","shape","data_offsets"}, keys
// of metadata sorted. Names must be unique, valid UTF-8 and not
// "__metadata__"; dtypes known; dimensions non-negative; and the byte
// size of sub-byte dtypes whole (ErrSizeMismatch).
//
// Options: WithDataAlign.
func HeaderBytes(tensors []WriterTensor, metadata map[string]string, opts ...WriterOption) ([]byte, []WriterTensor, error) {
	hdr, order, _, err := plan(tensors, metadata, opts)
	return hdr, order, err
}

// WriterOption configures HeaderBytes and NewWriter.
type WriterOption func(*writerConfig)

type writerConfig struct{ align int }

// WithDataAlign pads the header with trailing spaces (the format allows
// whitespace after the JSON) so that the data section starts at a
// multiple of n bytes from the file's start, n a positive multiple of 8
// (others are ErrInvalidHeader); the default is 8, as the reference
// writer pads. A page (4096) lets tensor data copied into the file by
// the kernel land on page boundaries.
func WithDataAlign(n int) WriterOption { return func(c *writerConfig) { c.align = n } }

// plan validates the tensors and lays them out, returning the header
// bytes, the data order and each ordered tensor's byte size.
func plan(tensors []WriterTensor, metadata map[string]string, opts []WriterOption) ([]byte, []WriterTensor, []int64, error) {
	cfg := writerConfig{align: 8}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.align <= 0 || cfg.align%8 != 0 {
		return nil, nil, nil, fmt.Errorf("%w: data alignment %d is not a positive multiple of 8", ErrInvalidHeader, cfg.align)
	}
	type planned struct {
		t    WriterTensor
		size int64
		rank int
	}
	ps := make([]planned, len(tensors))
	seen := make(map[string]bool, len(tensors))
	for i, t := range tensors {
		if !utf8.ValidString(t.Name) || t.Name == metadataKey {
			return nil, nil, nil, tensorErr(t.Name, ErrInvalidTensor, "name must be valid UTF-8 and not %q", metadataKey)
		}
		if seen[t.Name] {
			return nil, nil, nil, tensorErr(t.Name, ErrDuplicate, "")
		}
		seen[t.Name] = true
		n, err := ByteSize(t.DType, t.Shape)
		if err != nil {
			return nil, nil, nil, &HeaderError{Tensor: t.Name, Err: err}
		}
		ps[i] = planned{WriterTensor{t.Name, t.DType, append([]int64{}, t.Shape...)}, n, dtypes[t.DType].rank}
	}
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, nil, nil, fmt.Errorf("%w: %s entry %q is not valid UTF-8", ErrInvalidHeader, metadataKey, k)
		}
	}
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].rank != ps[j].rank {
			return ps[i].rank > ps[j].rank
		}
		return ps[i].t.Name < ps[j].t.Name
	})

	type span struct{ begin, end int64 }
	spans := make(map[string]span, len(ps))
	order := make([]WriterTensor, len(ps))
	sizes := make([]int64, len(ps))
	var pos int64
	for i, p := range ps {
		if p.size > 1<<62-pos {
			return nil, nil, nil, tensorErr(p.t.Name, ErrOverflow, "data buffer exceeds 2^62 bytes")
		}
		order[i], sizes[i] = p.t, p.size
		spans[p.t.Name] = span{pos, pos + p.size}
		pos += p.size
	}

	byName := append([]WriterTensor{}, order...)
	sort.Slice(byName, func(i, j int) bool { return byName[i].Name < byName[j].Name })

	buf := make([]byte, 8, 64+64*len(order))
	buf = append(buf, '{')
	if metadata != nil {
		buf = appendString(buf, metadataKey)
		buf = append(buf, ":{"...)
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendString(buf, k)
			buf = append(buf, ':')
			buf = appendString(buf, metadata[k])
		}
		buf = append(buf, '}')
	}
	for i, t := range byName {
		if i > 0 || metadata != nil {
			buf = append(buf, ',')
		}
		buf = appendString(buf, t.Name)
		buf = append(buf, `:{"dtype":`...)
		buf = appendString(buf, t.DType)
		buf = append(buf, `,"shape":[`...)
		for j, s := range t.Shape {
			if j > 0 {
				buf = append(buf, ',')
			}
			buf = strconv.AppendInt(buf, s, 10)
		}
		sp := spans[t.Name]
		buf = append(buf, `],"data_offsets":[`...)
		buf = strconv.AppendInt(buf, sp.begin, 10)
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, sp.end, 10)
		buf = append(buf, "]}"...)
	}
	buf = append(buf, '}')
	for len(buf)%cfg.align != 0 {
		buf = append(buf, ' ')
	}
	n := len(buf) - 8
	if n > DefaultMaxHeaderSize {
		return nil, nil, nil, fmt.Errorf("%w: %d bytes, limit %d", ErrHeaderTooLarge, n, DefaultMaxHeaderSize)
	}
	binary.LittleEndian.PutUint64(buf[:8], uint64(n))
	return buf, order, sizes, nil
}

// appendString appends s as a JSON string the way the reference writer
// (serde_json) does: only '"', '\\' and control characters are escaped,
// everything else is written as raw UTF-8.
func appendString(buf []byte, s string) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			buf = append(buf, '\\', c)
		case c == '\b':
			buf = append(buf, '\\', 'b')
		case c == '\f':
			buf = append(buf, '\\', 'f')
		case c == '\n':
			buf = append(buf, '\\', 'n')
		case c == '\r':
			buf = append(buf, '\\', 'r')
		case c == '\t':
			buf = append(buf, '\\', 't')
		case c < 0x20:
			buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			buf = append(buf, c)
		}
	}
	return append(buf, '"')
}

// Writer streams a safetensors file: NewWriter writes the header, then
// WriteTensor copies each tensor's bytes straight to the output, in the
// order Order returns. It never holds tensor data in memory; wrap the
// output in a bufio.Writer for small writes to be batched.
type Writer struct {
	w     io.Writer
	order []WriterTensor
	sizes []int64
	next  int   // index in order of the next tensor to write
	err   error // first error that left the output incomplete
}

// NewWriter validates the tensors (see HeaderBytes, and its options),
// writes the header to w and returns a Writer that must then be fed each
// tensor's bytes in the order Writer.Order returns.
func NewWriter(w io.Writer, tensors []WriterTensor, metadata map[string]string, opts ...WriterOption) (*Writer, error) {
	hdr, order, sizes, err := plan(tensors, metadata, opts)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(hdr); err != nil {
		return nil, fmt.Errorf("safetensors: write header: %w", err)
	}
	return &Writer{w: w, order: order, sizes: sizes}, nil
}

// Order returns the tensors in the order their data must be written.
func (w *Writer) Order() []WriterTensor {
	out := make([]WriterTensor, len(w.order))
	for i, t := range w.order {
		out[i] = WriterTensor{Name: t.Name, DType: t.DType, Shape: append([]int64{}, t.Shape...)}
	}
	return out
}

// WriteTensor copies the named tensor's bytes from r, which must hold
// exactly the tensor's declared size: fewer or more bytes are
// ErrDataLength. name must be the next tensor in Order (ErrOrder, which
// writes nothing and may be retried). A length, read or write error stops
// the Writer: the output cannot be trusted, and every later call, Close
// included, fails with ErrWriterFailed. It returns the number of bytes
// written.
func (w *Writer) WriteTensor(name string, r io.Reader) (int64, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.next >= len(w.order) {
		return 0, fmt.Errorf("%w: %q after the last tensor", ErrOrder, name)
	}
	t, want := w.order[w.next], w.sizes[w.next]
	if name != t.Name {
		return 0, fmt.Errorf("%w: got %q, want %q", ErrOrder, name, t.Name)
	}
	n, err := io.CopyN(w.w, r, want)
	switch {
	case errors.Is(err, io.EOF):
		err = tensorErr(name, ErrDataLength, "reader held %d bytes, want %d", n, want)
	case err != nil:
		err = &HeaderError{Tensor: name, Err: err}
	default:
		var extra [1]byte
		m, rerr := io.ReadFull(r, extra[:])
		switch {
		case m > 0:
			err = tensorErr(name, ErrDataLength, "reader holds more than %d bytes", want)
		case rerr != io.EOF:
			err = &HeaderError{Tensor: name, Err: rerr}
		}
	}
	if err != nil {
		w.err = fmt.Errorf("%w: %w", ErrWriterFailed, err)
		return n, err
	}
	w.next++
	return n, nil
}

// Close reports whether the file is complete: it returns ErrIncomplete if
// some tensor was not written, or the error that stopped the Writer. It
// does not close the underlying io.Writer.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if w.next < len(w.order) {
		return fmt.Errorf("%w: %d of %d tensors written, next is %q", ErrIncomplete, w.next, len(w.order), w.order[w.next].Name)
	}
	return nil
}
