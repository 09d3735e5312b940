package dcp

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// FS opens the files of one DCP checkpoint directory by their names
// relative to it (".metadata", "__0_0.distcp"): a local directory
// (DirFS), an object store prefix, a web server.
type FS interface {
	Open(name string) (File, error)
}

// File is an open file of an FS: random access, and its size.
type File interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

// DirFS returns the FS of the local directory dir. It opens regular files
// only: a FIFO or device is refused rather than waited on.
func DirFS(dir string) FS { return dirFS(dir) }

type dirFS string

type osFile struct{ *os.File }

func (f osFile) Size() int64 {
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	return fi.Size()
}

func (d dirFS) Open(name string) (File, error) {
	p := filepath.Join(string(d), name)
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", p)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Reader reads a DCP checkpoint: its parsed Metadata, and the bytes of
// each item (a tensor chunk or a non-tensor value: a torch.save zip, or
// for torch >= 2.8's safetensors serialization a safetensors blob, see
// SafetensorsAt) where its Location says. Files are opened when first
// needed and kept open until Close. A Reader is safe for concurrent use.
type Reader struct {
	md   *Metadata
	fsys FS

	mu    sync.Mutex
	files map[string]*dataFile
}

type dataFile struct {
	f   File
	err error
}

// Open reads and parses the .metadata of the checkpoint in fsys (at most
// WithMaxMetadataSize bytes) and returns its Reader.
func Open(fsys FS, opts ...ReadOption) (*Reader, error) {
	cfg := newReadConfig(opts)
	f, err := fsys.Open(MetadataFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := f.Size()
	if size > cfg.maxMetadata {
		return nil, fmt.Errorf("%w: metadata of %d bytes exceeds the limit of %d", ErrMalformed, size, cfg.maxMetadata)
	}
	raw := make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, size), raw); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrTruncated, MetadataFile, err)
	}
	return NewReader(fsys, raw, opts...)
}

// NewReader parses metadata, the bytes of the .metadata file of the
// checkpoint in fsys, and returns its Reader. No data file is opened yet.
func NewReader(fsys FS, metadata []byte, opts ...ReadOption) (*Reader, error) {
	md, err := ParseMetadata(metadata, opts...)
	if err != nil {
		return nil, err
	}
	return &Reader{md: md, fsys: fsys, files: map[string]*dataFile{}}, nil
}

// Metadata returns the parsed .metadata.
func (r *Reader) Metadata() *Metadata { return r.md }

// File returns the data file name, opening it on first use. name must be
// a plain name inside the checkpoint directory (ErrMalformed); a file that
// cannot be opened is ErrMissing, on every call.
func (r *Reader) File(name string) (File, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if o, done := r.files[name]; done {
		return o.f, o.err
	}
	o := &dataFile{}
	r.files[name] = o
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) || filepath.IsAbs(name) {
		o.err = fmt.Errorf("%w: file name %q must be a plain name inside the checkpoint directory", ErrMalformed, name)
		return nil, o.err
	}
	f, err := r.fsys.Open(name)
	if err != nil {
		cause := errors.Unwrap(err)
		if cause == nil {
			cause = err
		}
		o.err = fmt.Errorf("%w: file %s: %v", ErrMissing, name, cause)
		return nil, o.err
	}
	o.f = f
	return f, nil
}

// Files returns the names of the data files opened so far, sorted.
func (r *Reader) Files() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for n, o := range r.files {
		if o.f != nil {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// Chunks returns the chunks a read of tensor entry e assembles it from
// (CheckTiling's), with the reason it cannot be read, if any: a tiling
// fault, or a chunk whose file cannot be opened (ErrMissing) or whose
// bytes lie outside it (ErrTruncated). It opens the files of those
// chunks. As CheckTiling, it returns the chunks along with a gap.
func (r *Reader) Chunks(e *Entry) ([]Chunk, error) {
	kept, err := CheckTiling(e)
	if err != nil {
		return kept, err
	}
	for _, c := range kept {
		if _, err := r.locate(c.Location, "chunk"); err != nil {
			return kept, err
		}
	}
	return kept, nil
}

// Item returns the bytes of the item at loc: a section of its file,
// checked to lie inside it (ErrTruncated otherwise).
func (r *Reader) Item(loc Location) (*io.SectionReader, error) {
	return r.locate(loc, "item")
}

func (r *Reader) locate(loc Location, what string) (*io.SectionReader, error) {
	f, err := r.File(loc.File)
	if err != nil {
		return nil, err
	}
	size := f.Size()
	if loc.Offset < 0 || loc.Length < 0 || loc.Offset > size || loc.Length > size-loc.Offset {
		return nil, fmt.Errorf("%w: %s bytes %d+%d lie outside %s (%d bytes)", ErrTruncated, what, loc.Offset, loc.Length, loc.File, size)
	}
	return io.NewSectionReader(f, loc.Offset, loc.Length), nil
}

// Close closes the data files opened.
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first error
	for _, o := range r.files {
		if o.f != nil {
			if err := o.f.Close(); err != nil && first == nil {
				first = err
			}
			o.f = nil
			o.err = fmt.Errorf("%w: the reader is closed", ErrMissing)
		}
	}
	return first
}
