package statedict

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/internal/human"

	"github.com/ckpt-dev/ckpt/pickle"
)

// Option configures Open and NewReader.
type Option func(*config)

type config struct {
	name          string // file name used in error messages
	limits        pickle.Limits
	maxPickle     int64  // largest pickle read into memory
	maxIndex      int64  // largest index.json read
	maxHeader     int64  // largest safetensors header
	maxTensors    int    // most tensors in a safetensors file (0: safetensors.DefaultMaxTensors)
	tempDir       string // where compressed inputs are spooled
	maxDecompress int64  // largest decompressed size of a gzip/zstd-wrapped file; 0: by the file's size
	fs            FS     // where the files are; nil for the local filesystem

	shard bool // opening a shard of an index: another index is refused

	modelConfig string // WithModelConfig
	raw         bool   // WithRaw

	// See limits.go.
	ctx          context.Context
	maxNames     int64 // names the object tree walk may give; 0: scaled to the pickle
	maxNameBytes int64 // bytes of those names; 0: scaled to the pickle
}

// canceled returns the context's error once WithContext's context is done.
func (c *config) canceled() error {
	if c.ctx == nil {
		return nil
	}
	return c.ctx.Err()
}

func defaultConfig() config {
	return config{
		limits:    pickle.DefaultLimits(),
		maxPickle: 1 << 30,
		maxIndex:  64 << 20,
		maxHeader: 100_000_000,
		ctx:       context.Background(),
	}
}

// WithName sets the file name that errors report for a bare io.ReaderAt.
func WithName(name string) Option { return func(c *config) { c.name = name } }

// WithPickleLimits bounds the unpickler (nesting depth, memo, container
// sizes, operation count) beyond the defaults of pickle.DefaultLimits.
func WithPickleLimits(l pickle.Limits) Option { return func(c *config) { c.limits = l } }

// WithMaxPickleSize bounds the size of a pickle record read into memory
// (default 1 GiB). The pickle is the only part of a checkpoint read eagerly.
func WithMaxPickleSize(n int64) Option { return func(c *config) { c.maxPickle = n } }

// WithMaxHeaderSize bounds the JSON header of a safetensors file (default
// 100,000,000 bytes, the reference reader's limit).
func WithMaxHeaderSize(n int64) Option { return func(c *config) { c.maxHeader = n } }

// WithMaxTensors bounds the tensors of one safetensors file (default
// safetensors.DefaultMaxTensors, 262,144): a header declaring more fails
// with safetensors.ErrTooManyTensors before they are read into memory.
func WithMaxTensors(n int) Option { return func(c *config) { c.maxTensors = n } }

// WithTempDir sets where gzip/zstd-wrapped and deflated inputs are
// decompressed to for random access (default os.TempDir()).
func WithTempDir(dir string) Option { return func(c *config) { c.tempDir = dir } }

// WithMaxDecompressedSize bounds how many bytes a gzip/zstd-wrapped file may
// expand to in the temporary directory, a guard against decompression
// bombs. The default is 64 times the compressed size, at least 64 MiB and
// at most the directory's free space; a checkpoint of mostly zeros may
// need more. Whatever the limit, the first decompressed bytes must begin
// a checkpoint format, or nothing is spooled.
func WithMaxDecompressedSize(n int64) Option { return func(c *config) { c.maxDecompress = n } }

// Open opens a checkpoint file or directory: a torch zip, legacy or tar file,
// a safetensors file, a Hugging Face index.json with its shards, a
// torch.distributed.checkpoint directory (or its .metadata file), a directory
// holding one of those, or a gzip/zstd-wrapped file. The format is sniffed
// from the content, not the extension. Only metadata is read.
func Open(path string, opts ...Option) (*Checkpoint, error) {
	cfg := defaultConfig()
	cfg.name = path
	for _, o := range opts {
		o(&cfg)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		ck, err := openDir(path, &cfg)
		return withQuant(ck, err, path, true, &cfg)
	}
	if filepath.Base(path) == dcp.MetadataFile {
		ck, err := openDCP(cfg.dcpDir(path), &cfg)
		return withQuant(ck, err, path, false, &cfg)
	}
	ck, err := openFile(path, &cfg)
	return withQuant(ck, err, path, false, &cfg)
}

// FS is where OpenFS finds a checkpoint's files when they are not local
// files: an object store or a web server. Names are slash-separated; the
// shards of an index.json are looked up beside it (path.Join of its
// directory and the shard's name).
type FS interface {
	// OpenFile opens the named file for random access.
	OpenFile(name string) (File, error)
	// IsDir reports whether name is a directory (a prefix holding files)
	// rather than a file.
	IsDir(name string) (bool, error)
	// ReadDir returns the names of the files directly in the directory
	// name, relative to it. An FS that cannot list (a web server) returns
	// an error matching errors.ErrUnsupported, and its directories are
	// probed file by file; any other error ends the open. One open may
	// ask for a directory several times, one question per probe: an FS
	// whose listing costs requests answers them from one listing
	// (objstore.Store.List).
	ReadDir(name string) ([]string, error)
}

// File is a file of an FS.
type File interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

// DisplayNamer is implemented by an FS whose names are not what errors
// and Storage.File should show (an object store shows full URLs).
type DisplayNamer interface {
	DisplayName(name string) string
}

// OpenFS opens a checkpoint file or directory of fsys, as Open does for
// local paths: the same formats, sniffed from the content, sharded
// index.json files with their shards beside them, a directory holding one
// checkpoint, a torch.distributed.checkpoint directory (found by its
// listing or, where fsys cannot list, by opening its .metadata) or its
// .metadata file.
func OpenFS(fsys FS, name string, opts ...Option) (*Checkpoint, error) {
	cfg := defaultConfig()
	cfg.fs = fsys
	cfg.name = cfg.display(name)
	for _, o := range opts {
		o(&cfg)
	}
	if path.Base(name) == dcp.MetadataFile {
		ck, err := openDCP(cfg.dcpDir(name), &cfg)
		return withQuant(ck, err, name, false, &cfg)
	}
	dir, err := fsys.IsDir(name)
	if err != nil {
		return nil, err
	}
	if dir {
		ck, err := openDir(name, &cfg)
		return withQuant(ck, err, name, true, &cfg)
	}
	ck, err := openFile(name, &cfg)
	return withQuant(ck, err, name, false, &cfg)
}

// display returns how errors name the file name.
func (c *config) display(name string) string {
	if d, ok := c.fs.(DisplayNamer); ok {
		return d.DisplayName(name)
	}
	return name
}

// open opens the named file, in c.fs or locally (regular files only).
func (c *config) open(name string) (io.ReaderAt, int64, io.Closer, error) {
	if c.fs != nil {
		f, err := c.fs.OpenFile(name)
		if err != nil {
			return nil, 0, nil, err
		}
		return f, f.Size(), f, nil
	}
	f, fi, err := openRegular(name)
	if err != nil {
		return nil, 0, nil, err
	}
	return f, fi.Size(), f, nil
}

// OpenRegular opens path for reading if it is a regular file, as Open
// does: a FIFO is refused without waiting for a writer, and so are
// devices and sockets (ErrNotRegular). Package scan opens files this way.
func OpenRegular(path string) (*os.File, os.FileInfo, error) { return openRegular(path) }

// openRegular opens path for reading if it is a regular file. A FIFO is
// opened without waiting for a writer (O_NONBLOCK, cleared again for a
// regular file) and refused, as are devices and sockets: reading one
// would block forever or never end.
func openRegular(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, &Error{File: path, Err: fmt.Errorf("%w: it is %s", ErrNotRegular, human.FileKind(fi.Mode()))}
	}
	if err := clearNonBlock(f); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// sibling returns the name of file name beside the file at p.
func (c *config) sibling(p, name string) string {
	if c.fs != nil {
		return path.Join(path.Dir(p), name)
	}
	return filepath.Join(filepath.Dir(p), name)
}

// glob returns the files of dir whose base names match pattern.
func (c *config) glob(dir, pattern string) []string {
	if c.fs == nil {
		m, _ := filepath.Glob(filepath.Join(dir, pattern))
		return m
	}
	names, err := c.fs.ReadDir(dir)
	if err != nil {
		return nil
	}
	var m []string
	for _, n := range names {
		if ok, _ := path.Match(pattern, n); ok {
			m = append(m, path.Join(dir, n))
		}
	}
	sort.Strings(m)
	return m
}

func openFile(path string, cfg *config) (*Checkpoint, error) {
	shown := cfg.display(path)
	f, size, closer, err := cfg.open(path)
	if err != nil {
		return nil, err
	}
	c := *cfg
	c.name = shown
	var ck *Checkpoint
	if isIndexJSON(f, size) {
		if c.shard {
			closer.Close()
			return nil, &Error{File: shown, Err: fmt.Errorf("%w: a shard is itself an index", ErrMalformed)}
		}
		ck, err = openSharded(path, f, size, &c)
		closer.Close()
	} else {
		ck, err = newReader(f, size, &c)
		if err != nil {
			closer.Close()
		} else {
			ck.closers = append([]io.Closer{closer}, ck.closers...)
			for _, s := range ck.Storages {
				s.File = shown
			}
		}
	}
	if err != nil {
		return nil, withFile(err, shown)
	}
	return ck, nil
}

// NewReader reads a checkpoint's metadata from r, which holds size bytes.
// Tensor data is read from r later, on demand: r must stay usable until the
// Checkpoint is closed (closing the Checkpoint does not close r). A sharded
// index.json cannot be read this way (ErrNeedsDirectory); use Open.
func NewReader(r io.ReaderAt, size int64, opts ...Option) (*Checkpoint, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if isIndexJSON(r, size) {
		return nil, withFile(ErrNeedsDirectory, cfg.name)
	}
	ck, err := newReader(r, size, &cfg)
	if err != nil {
		return nil, withFile(err, cfg.name)
	}
	return ck, nil
}

// Magic numbers used for sniffing.
var (
	zipMagic  = []byte("PK\x03\x04")
	zipEmpty  = []byte("PK\x05\x06")
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
	// LONG1 of 10 bytes: the legacy magic number 0x1950a86a20f9469cfc6c as
	// protocols 2 to 5 write it (after PROTO, and for 4 and 5 a FRAME).
	legacyMagicLong1 = []byte{0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, '.'}
	// The same number as protocol 1 (and 0) write it: a text LONG.
	legacyMagicText = []byte("L119547037146038801333356L\n.")
)

// isLegacyMagic reports whether head starts with torch's legacy magic-number
// pickle in any pickle protocol torch.save can write (1 to 5).
func isLegacyMagic(head []byte) bool {
	if bytes.HasPrefix(head, legacyMagicText) {
		return true
	}
	if len(head) < 2 || head[0] != 0x80 || head[1] < 2 || head[1] > 5 {
		return false
	}
	rest := head[2:]
	if head[1] >= 4 && len(rest) >= 9 && rest[0] == 0x95 { // FRAME with its 8-byte length
		rest = rest[9:]
	}
	return bytes.HasPrefix(rest, legacyMagicLong1)
}

func newReader(r io.ReaderAt, size int64, cfg *config) (*Checkpoint, error) {
	if size == 0 {
		return nil, ErrEmpty
	}
	head := make([]byte, 512)
	n, err := r.ReadAt(head, 0)
	if n < len(head) && err != nil && err != io.EOF {
		return nil, err
	}
	head = head[:n]
	switch Routes(head, size)[0] {
	case RouteZip:
		return readZip(r, size, cfg)
	case RouteTar:
		return readTar(r, size, cfg)
	case RouteCompressed:
		return readCompressed(r, size, head, cfg)
	case RouteSafetensors:
		return readSafetensors(r, size, cfg)
	case RouteGGUF:
		return readGGUF(r, size, cfg)
	}
	if isLegacyMagic(head) {
		return readLegacy(r, size, cfg)
	}
	if len(head) >= 2 && head[0] == 0x80 && head[1] <= 5 {
		return nil, fmt.Errorf("%w: a bare pickle without a torch container (not a torch.save file)", ErrFormat)
	}
	return nil, fmt.Errorf("%w: first bytes % x", ErrFormat, head[:min(len(head), 8)])
}

// looksLikeSafetensors: u64 header length that fits the file, then JSON.
func looksLikeSafetensors(head []byte, size int64) bool {
	if len(head) < 9 {
		return false
	}
	n := binary.LittleEndian.Uint64(head)
	if n == 0 || n > uint64(size-8) {
		return false
	}
	for _, b := range head[8:] {
		switch b {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return true
		}
		return false
	}
	return false
}

// isIndexJSON reports whether the content is a JSON object (a sharded
// index). A safetensors file whose header length's first byte happens to
// be '{' (a header of 123 bytes, say) is not one: its byte 8 opens the
// header and its first 8 bytes, as a length, fit the file, which text
// (every byte 0x20 or more) never does.
func isIndexJSON(r io.ReaderAt, size int64) bool {
	head := make([]byte, min(size, 64))
	n, _ := r.ReadAt(head, 0)
	if n > 8 && head[8] == '{' && binary.LittleEndian.Uint64(head[:8]) <= uint64(size-8) {
		return false
	}
	for _, b := range head[:n] {
		switch b {
		case ' ', '\t', '\n', '\r', 0xef, 0xbb, 0xbf:
			continue
		}
		return b == '{'
	}
	return false
}

// openDir opens the checkpoint a directory holds: a torch.distributed.checkpoint
// (DCP) directory when it has a .metadata file, else an index.json if there
// is one, else torch >= 2.8's safetensors DCP files (found by their
// DCP_SHARDING_INFO metadata), else its single checkpoint file.
func openDir(dir string, cfg *config) (*Checkpoint, error) {
	if err := cfg.checkList(dir); err != nil {
		return nil, err
	}
	if cfg.isDCPDir(dir) {
		return openDCP(dir, cfg)
	}
	shown := cfg.display(dir)
	// Several safetensors files with DCP sharding metadata and no index:
	// torch >= 2.8's per-rank safetensors DCP (dcp.go).
	if len(cfg.glob(dir, "*.index.json")) == 0 {
		if files := hfDCPFiles(dir, cfg); files != nil {
			return openHFDCP(dir, files, cfg)
		}
	}
	for _, pat := range []string{"*.safetensors.index.json", "*.bin.index.json", "*.index.json"} {
		m := cfg.glob(dir, pat)
		if len(m) == 1 {
			return openFile(m[0], cfg)
		}
		if len(m) > 1 {
			return nil, &Error{File: shown, Err: fmt.Errorf("%w: several indexes (%s); name one", ErrFormat, baseNames(m))}
		}
	}
	var found []string
	for _, pat := range []string{"*.safetensors", "*.bin", "*.pt", "*.pth", "*.ckpt", "*.pt.gz", "*.pth.gz", "*.zst"} {
		found = append(found, cfg.glob(dir, pat)...)
	}
	switch len(found) {
	case 0:
		return nil, &Error{File: shown, Err: fmt.Errorf("%w: the directory holds no checkpoint (*.safetensors, *.bin, *.pt, *.pth, *.ckpt, *.index.json)", ErrFormat)}
	case 1:
		return openFile(found[0], cfg)
	}
	return nil, &Error{File: shown, Err: fmt.Errorf("%w: several checkpoints and no index.json (%s); name one", ErrFormat, baseNames(found))}
}

func baseNames(paths []string) string {
	var b bytes.Buffer
	for i, p := range paths {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(path.Base(filepath.ToSlash(p)))
	}
	return b.String()
}

// checkList lists dir when it is in c.fs, so that a listing that fails
// (past a bound of the object store, or the server unreachable) ends the
// open with its error: the probes of openDir would each take it for an
// empty directory and ask again. An FS that cannot list
// (errors.ErrUnsupported) is probed file by file.
func (c *config) checkList(dir string) error {
	if c.fs == nil {
		return nil
	}
	if _, err := c.fs.ReadDir(dir); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	return nil
}

// join returns the name of file name in directory dir: slash-separated
// in c.fs, a local path otherwise.
func (c *config) join(dir, name string) string {
	if c.fs != nil {
		return path.Join(dir, name)
	}
	return filepath.Join(dir, name)
}

// dcpDir returns the directory of a DCP .metadata file named p.
func (c *config) dcpDir(p string) string {
	if c.fs == nil {
		return filepath.Dir(p)
	}
	if d := path.Dir(p); d != "." {
		return d
	}
	return ""
}

// dcpFS is the dcp.FS of the checkpoint directory dir: local, or in cfg.fs.
type dcpFS struct {
	dir string
	cfg *config
}

type sizedFile struct {
	dcpFile
	size int64
}

func (f sizedFile) Size() int64 { return f.size }

func (d dcpFS) Open(name string) (dcp.File, error) {
	f, size, err := d.cfg.openDCPFile(d.cfg.join(d.dir, name))
	if err != nil {
		return nil, err
	}
	return sizedFile{f, size}, nil
}

// dcpOpenFile opens a local DCP data file; tests replace it to count
// bytes read.
var dcpOpenFile = func(path string) (dcpFile, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// openDCPFile opens a DCP data file of c.fs, or a local one through
// dcpOpenFile.
func (c *config) openDCPFile(name string) (dcpFile, int64, error) {
	if c.fs == nil {
		return dcpOpenFile(name)
	}
	f, err := c.fs.OpenFile(name)
	if err != nil {
		return nil, 0, err
	}
	return f, f.Size(), nil
}

// dcpFile is an open DCP data file.
type dcpFile interface {
	io.ReaderAt
	io.Closer
}
