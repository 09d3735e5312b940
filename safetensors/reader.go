package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"unicode/utf8"
)

// DefaultMaxHeaderSize is the largest header length Parse accepts by
// default, the reference reader's limit.
const DefaultMaxHeaderSize = 100_000_000

// metadataKey is the reserved header key of the free-form string metadata.
const metadataKey = "__metadata__"

// DefaultMaxTensors is the most tensors Parse accepts in one file by
// default: several times the largest real checkpoints (a 671B-parameter
// mixture of experts holds about 100,000 tensors across all its shards),
// and a bound on the memory a header costs its readers (each tensor costs
// about 1-2 KB once read into a checkpoint's model).
const DefaultMaxTensors = 1 << 18

type config struct {
	maxHeader  int64
	maxTensors int
}

// WithMaxTensors sets the most tensors Parse accepts in one file; more
// fail with ErrTooManyTensors as soon as the limit is passed. n <= 0
// keeps DefaultMaxTensors.
func WithMaxTensors(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxTensors = n
		}
	}
}

// Option configures Parse.
type Option func(*config)

// WithMaxHeaderSize sets the largest header length N Parse accepts, in
// bytes; larger headers fail with ErrHeaderTooLarge before anything beyond
// the 8-byte length is read. n <= 0 keeps DefaultMaxHeaderSize; a value
// above it accepts files the reference reader refuses.
func WithMaxHeaderSize(n int64) Option {
	return func(c *config) {
		if n > 0 {
			c.maxHeader = n
		}
	}
}

// File is the validated header of a safetensors file.
type File struct {
	HeaderSize int64             // N, the length of the JSON header in bytes
	DataOffset int64             // 8 + N: absolute offset of the data buffer
	Tensors    []TensorInfo      // sorted by data offset (file order), then name
	Metadata   map[string]string // __metadata__, nil if absent or null

	index map[string]int // name -> position in Tensors
}

// TensorInfo describes one tensor of a File. Begin and End are relative to
// the data buffer: the tensor's bytes are at absolute offsets
// [DataOffset+Begin, DataOffset+End), little endian, C order.
type TensorInfo struct {
	Name  string
	DType string // format dtype code, e.g. "F32", "BF16"
	Shape []int64
	Begin int64
	End   int64
}

// Size returns the tensor's length in bytes.
func (t TensorInfo) Size() int64 { return t.End - t.Begin }

// Lookup returns the tensor with the given name.
func (f *File) Lookup(name string) (TensorInfo, bool) {
	if f.index == nil {
		for _, t := range f.Tensors {
			if t.Name == name {
				return t, true
			}
		}
		return TensorInfo{}, false
	}
	i, ok := f.index[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// Parse reads and validates the header of a safetensors file of the given
// size. It reads only the 8-byte length and the header, never tensor data,
// and allocates in proportion to the header length, which is bounded by the
// limit and by size before anything is allocated. It applies the reference reader's rules: the header is UTF-8
// JSON, an object whose "__metadata__" entry, if present, maps strings to
// strings and whose other entries each have a known "dtype", a "shape" of
// non-negative integers and two "data_offsets"; the offsets, sorted, tile
// the data buffer from 0 with no holes or overlaps; each tensor's byte
// size equals its element count times its element width; and the data
// buffer ends exactly at size. Unknown fields inside a tensor entry are
// ignored, as the reference does. It is stricter than the reference in two
// corner cases: duplicate keys (tensor names, metadata keys, entry fields)
// are refused rather than resolved to the last one, and integers above
// 2^63-1 are refused even in the shape of an empty tensor.
func Parse(r io.ReaderAt, size int64, opts ...Option) (*File, error) {
	cfg := config{maxHeader: DefaultMaxHeaderSize, maxTensors: DefaultMaxTensors}
	for _, o := range opts {
		o(&cfg)
	}
	if size < 8 {
		return nil, fmt.Errorf("%w: %d bytes is shorter than the 8-byte header length", ErrTruncated, size)
	}
	var lenBuf [8]byte
	if err := readFull(r, lenBuf[:], 0); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > uint64(cfg.maxHeader) {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrHeaderTooLarge, n, cfg.maxHeader)
	}
	if n > uint64(size-8) {
		return nil, fmt.Errorf("%w: header length %d exceeds the %d bytes after it", ErrTruncated, n, size-8)
	}
	hdr := make([]byte, n)
	if err := readFull(r, hdr, 8); err != nil {
		return nil, err
	}
	f, err := parseHeader(hdr, cfg.maxTensors)
	if err != nil {
		return nil, err
	}
	f.HeaderSize = int64(n)
	f.DataOffset = 8 + int64(n)
	if err := f.validate(size - f.DataOffset); err != nil {
		return nil, err
	}
	return f, nil
}

// readFull reads len(p) bytes at off, reporting a short read as ErrTruncated.
func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: read %d of %d bytes at offset %d", ErrTruncated, n, len(p), off)
	}
	return fmt.Errorf("safetensors: read at offset %d: %w", off, err)
}

// validate sorts the tensors by offset, checks that they tile a data buffer
// of dataSize bytes and that each byte range matches shape and dtype, and
// builds the name index.
func (f *File) validate(dataSize int64) error {
	sort.Slice(f.Tensors, func(i, j int) bool {
		a, b := f.Tensors[i], f.Tensors[j]
		if a.Begin != b.Begin {
			return a.Begin < b.Begin
		}
		if a.End != b.End {
			return a.End < b.End
		}
		return a.Name < b.Name
	})
	var pos int64
	f.index = make(map[string]int, len(f.Tensors))
	for i, t := range f.Tensors {
		if t.Begin != pos || t.End < t.Begin {
			return tensorErr(t.Name, ErrInvalidOffsets, "[%d, %d] where the previous tensor ends at %d", t.Begin, t.End, pos)
		}
		pos = t.End
		dims := make([]uint64, len(t.Shape))
		for j, s := range t.Shape {
			dims[j] = uint64(s)
		}
		want, err := byteSize(dtypes[t.DType], dims)
		if err != nil {
			return &HeaderError{Tensor: t.Name, Err: err}
		}
		if uint64(t.End-t.Begin) != want {
			return tensorErr(t.Name, ErrSizeMismatch, "%s%v needs %d bytes, offsets give %d", t.DType, t.Shape, want, t.End-t.Begin)
		}
		f.index[t.Name] = i
	}
	switch {
	case pos > dataSize:
		return fmt.Errorf("%w: tensors end at data offset %d, the file has %d data bytes", ErrTruncated, pos, dataSize)
	case pos < dataSize:
		return fmt.Errorf("%w: tensors end at data offset %d, the file has %d data bytes", ErrTrailingData, pos, dataSize)
	}
	return nil
}

// headerParser walks the header JSON token by token, so that duplicate
// keys are seen rather than silently merged.
type headerParser struct {
	dec *json.Decoder
}

// parseHeader decodes the header JSON into a File with unsorted tensors.
func parseHeader(b []byte, maxTensors int) (*File, error) {
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("%w: not valid UTF-8", ErrInvalidHeader)
	}
	p := headerParser{dec: json.NewDecoder(bytes.NewReader(b))}
	p.dec.UseNumber()
	if err := p.delim('{', "header"); err != nil {
		return nil, err
	}
	f := &File{}
	seen := make(map[string]bool)
	for p.dec.More() {
		name, err := p.key()
		if err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, tensorErr(name, ErrDuplicate, "")
		}
		seen[name] = true
		if name == metadataKey {
			if f.Metadata, err = p.metadata(); err != nil {
				return nil, err
			}
			continue
		}
		if len(f.Tensors) >= maxTensors {
			return nil, fmt.Errorf("%w: more than %d (WithMaxTensors raises the limit)", ErrTooManyTensors, maxTensors)
		}
		t, err := p.tensor(name)
		if err != nil {
			return nil, err
		}
		f.Tensors = append(f.Tensors, t)
	}
	if err := p.delim('}', "header"); err != nil {
		return nil, err
	}
	if tok, err := p.dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the JSON object (%v, %v)", ErrInvalidHeader, tok, err)
	}
	return f, nil
}

// token returns the next JSON token, wrapping syntax errors.
func (p *headerParser) token() (json.Token, error) {
	tok, err := p.dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%w: %v", ErrInvalidHeader, err)
	}
	return tok, nil
}

// delim consumes the delimiter d, describing what in errors.
func (p *headerParser) delim(d json.Delim, what string) error {
	tok, err := p.token()
	if err != nil {
		return err
	}
	if tok != d {
		return fmt.Errorf("%w: %s: expected %q, got %v", ErrInvalidHeader, what, d, tok)
	}
	return nil
}

// key reads an object key.
func (p *headerParser) key() (string, error) {
	tok, err := p.token()
	if err != nil {
		return "", err
	}
	s, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("%w: expected an object key, got %v", ErrInvalidHeader, tok)
	}
	return s, nil
}

// metadata reads the __metadata__ value: null or an object of strings.
func (p *headerParser) metadata() (map[string]string, error) {
	tok, err := p.token()
	if err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, nil
	}
	if tok != json.Delim('{') {
		return nil, fmt.Errorf("%w: %s is not an object", ErrInvalidHeader, metadataKey)
	}
	m := make(map[string]string)
	for p.dec.More() {
		k, err := p.key()
		if err != nil {
			return nil, err
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("%w: %s key %q", ErrDuplicate, metadataKey, k)
		}
		tok, err := p.token()
		if err != nil {
			return nil, err
		}
		v, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("%w: %s value of %q is not a string", ErrInvalidHeader, metadataKey, k)
		}
		m[k] = v
	}
	return m, p.delim('}', metadataKey)
}

// tensor reads one tensor entry.
func (p *headerParser) tensor(name string) (TensorInfo, error) {
	t := TensorInfo{Name: name}
	if err := p.delim('{', "tensor "+strconv.Quote(name)); err != nil {
		return t, err
	}
	var haveDType, haveShape, haveOffsets bool
	for p.dec.More() {
		field, err := p.key()
		if err != nil {
			return t, err
		}
		var have *bool
		switch field {
		case "dtype":
			have = &haveDType
			err = p.dtype(&t)
		case "shape":
			have = &haveShape
			t.Shape, err = p.uints(name, field, -1)
		case "data_offsets":
			have = &haveOffsets
			var offs []int64
			if offs, err = p.uints(name, field, 2); err == nil {
				t.Begin, t.End = offs[0], offs[1]
			}
		default:
			var skip json.RawMessage
			if err := p.dec.Decode(&skip); err != nil {
				return t, tensorErr(name, ErrInvalidHeader, "field %q: %v", field, err)
			}
			continue
		}
		if err != nil {
			return t, err
		}
		if *have {
			return t, tensorErr(name, ErrDuplicate, "field %q appears twice", field)
		}
		*have = true
	}
	if err := p.delim('}', "tensor "+strconv.Quote(name)); err != nil {
		return t, err
	}
	if !haveDType || !haveShape || !haveOffsets {
		return t, tensorErr(name, ErrInvalidHeader, "entry needs dtype, shape and data_offsets")
	}
	if t.Shape == nil {
		t.Shape = []int64{}
	}
	return t, nil
}

// dtype reads a dtype code into t.
func (p *headerParser) dtype(t *TensorInfo) error {
	tok, err := p.token()
	if err != nil {
		return err
	}
	s, ok := tok.(string)
	if !ok {
		return tensorErr(t.Name, ErrInvalidHeader, "dtype is not a string")
	}
	if _, ok := dtypes[s]; !ok {
		return tensorErr(t.Name, ErrUnknownDType, "%q", s)
	}
	t.DType = s
	return nil
}

// uints reads an array of integers in [0, MaxInt64]; want >= 0 requires
// exactly that many.
func (p *headerParser) uints(name, field string, want int) ([]int64, error) {
	tok, err := p.token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('[') {
		return nil, tensorErr(name, ErrInvalidHeader, "%s is not an array", field)
	}
	var out []int64
	for p.dec.More() {
		tok, err := p.token()
		if err != nil {
			return nil, err
		}
		num, ok := tok.(json.Number)
		if !ok {
			return nil, tensorErr(name, ErrInvalidHeader, "%s holds %v, not an integer", field, tok)
		}
		v, err := strconv.ParseUint(string(num), 10, 64)
		if err != nil {
			return nil, tensorErr(name, ErrInvalidHeader, "%s holds %s, not a non-negative 64-bit integer", field, num)
		}
		if v > math.MaxInt64 {
			return nil, tensorErr(name, ErrOverflow, "%s holds %d", field, v)
		}
		if want >= 0 && len(out) == want {
			return nil, tensorErr(name, ErrInvalidHeader, "%s has more than %d values", field, want)
		}
		out = append(out, int64(v))
	}
	if want >= 0 && len(out) != want {
		return nil, tensorErr(name, ErrInvalidHeader, "%s has %d values, want %d", field, len(out), want)
	}
	return out, p.delim(']', field)
}
