package scan

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/statedict"
)

// Finding is one global imported by a pickle.
type Finding struct {
	File    string         `json:"file"`
	Record  string         `json:"record"` // zip entry, "pickle 3" of a legacy stream, tar member; nested records joined by "!"
	Offset  int64          `json:"offset"` // of the opcode, in the file or record (zip entry, tar member)
	Op      string         `json:"op"`     // GLOBAL, INST or STACK_GLOBAL
	Global  string         `json:"global"` // module.name as written; "?" when computed while unpickling
	Verdict pickle.Verdict `json:"verdict"`
	Reason  string         `json:"reason"`
}

// Problem is a file or record that could not be scanned in full. A
// problem makes the verdict at best unknown: what was not read was not
// checked.
type Problem struct {
	File   string `json:"file"`
	Record string `json:"record,omitempty"`
	Error  string `json:"error"`
}

// Report is the result of a scan.
type Report struct {
	Files    int       `json:"files"`   // files scanned
	Skipped  int       `json:"skipped"` // files in directories that no loader would take a pickle from (their first bytes are no pickle opcode sequence with a global)
	Pickles  int       `json:"pickles"` // pickles scanned
	Findings []Finding `json:"findings"`
	Problems []Problem `json:"problems"`
}

// Worst returns the most severe verdict of the report: unsafe, then
// unknown (also for problems), then data, then allowed.
func (r *Report) Worst() pickle.Verdict {
	rank := map[pickle.Verdict]int{pickle.VerdictAllowed: 0, pickle.VerdictData: 1, pickle.VerdictUnknown: 2, pickle.VerdictUnsafe: 3}
	w := pickle.VerdictAllowed
	if len(r.Problems) > 0 {
		w = pickle.VerdictUnknown
	}
	for _, f := range r.Findings {
		if rank[f.Verdict] > rank[w] {
			w = f.Verdict
		}
	}
	return w
}

// Counts returns the number of findings per verdict.
func (r *Report) Counts() map[pickle.Verdict]int {
	m := map[pickle.Verdict]int{}
	for _, f := range r.Findings {
		m[f.Verdict]++
	}
	return m
}

// Option configures a scan.
type Option func(*config)

type config struct {
	maxPickle     int64
	maxDecompress int64
	tempDir       string
	limits        pickle.Limits
}

// WithMaxPickleSize bounds the size of one pickle read into memory
// (default 1 GiB); a larger one is a Problem.
func WithMaxPickleSize(n int64) Option { return func(c *config) { c.maxPickle = n } }

// WithTempDir sets where gzip/zstd-wrapped files are decompressed to.
func WithTempDir(dir string) Option { return func(c *config) { c.tempDir = dir } }

// WithMaxDecompressedSize bounds what a gzip/zstd-wrapped file may expand to (default 1 TiB).
func WithMaxDecompressedSize(n int64) Option { return func(c *config) { c.maxDecompress = n } }

// maxNesting bounds nested archives (a zip in a zip in a gzip ...).
const maxNesting = 8

// legacyPickles is how many pickles torch's legacy loader reads before the
// storage bytes: magic number, protocol, sys_info, the object, storage keys.
const legacyPickles = 5

type scanner struct {
	ctx context.Context
	cfg config
	rep *Report
	// dcp holds each DCP .metadata parsed, by path (nil: unreadable), so
	// that the .distcp files of one directory share one parse.
	dcp map[string]*dcp.Metadata
}

func newScanner(ctx context.Context, opts []Option) *scanner {
	s := &scanner{ctx: ctx, cfg: config{maxPickle: 1 << 30, maxDecompress: 1 << 40}, rep: &Report{Findings: []Finding{}, Problems: []Problem{}}}
	for _, o := range opts {
		o(&s.cfg)
	}
	return s
}

// Paths scans files and directories (recursively, in lexical order).
// Files in directories that are no checkpoint or pickle at all are
// skipped; a path named explicitly that is none is a Problem. A path that
// does not exist, an error walking a directory and the context's error are
// returned as errors.
func Paths(ctx context.Context, paths []string, opts ...Option) (*Report, error) {
	s := newScanner(ctx, opts)
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return s.rep, err // a path named explicitly that does not exist: the caller's mistake
		}
		if !fi.IsDir() {
			if err := s.file(p, true); err != nil {
				return s.rep, err // a FIFO, device or socket named explicitly: unreadable input
			}
			continue
		}
		var files []string
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return s.rep, err
		}
		sort.Strings(files)
		for _, f := range files {
			if err := ctx.Err(); err != nil {
				return s.rep, err
			}
			if err := s.file(f, false); err != nil {
				s.problem(f, "", err)
			}
		}
	}
	return s.rep, ctx.Err()
}

// Reader scans one file's content.
func Reader(ctx context.Context, r io.ReaderAt, size int64, name string, opts ...Option) (*Report, error) {
	s := newScanner(ctx, opts)
	s.rep.Files++
	if err := s.content(r, size, name, "", 0, true); err != nil {
		s.problem(name, "", err)
	}
	return s.rep, ctx.Err()
}

func (s *scanner) problem(file, record string, err error) {
	s.rep.Problems = append(s.rep.Problems, Problem{File: file, Record: record, Error: err.Error()})
}

// errNotCheckpoint marks content that is neither a container nor a pickle.
var errNotCheckpoint = errors.New("neither a checkpoint container nor a pickle")

// file scans the file at path. It returns an error only for a path that
// is no regular file (a FIFO would block the scan; a device never ends).
func (s *scanner) file(path string, explicit bool) error {
	f, fi, err := statedict.OpenRegular(path)
	if err != nil {
		if errors.Is(err, statedict.ErrNotRegular) {
			return err
		}
		s.rep.Files++
		s.problem(path, "", err)
		return nil
	}
	defer f.Close()
	if strings.HasSuffix(path, ".distcp") {
		s.rep.Files++
		s.distcp(f, fi.Size(), path)
		return nil
	}
	err = s.content(f, fi.Size(), path, "", 0, explicit)
	if errors.Is(err, errNotCheckpoint) && !explicit {
		s.rep.Skipped++
		return nil // a README, a config.json: no pickle in it, and no torch loader can run anything from it
	}
	s.rep.Files++
	if err != nil {
		s.problem(path, "", err)
	}
	return nil
}

func join(record, sub string) string {
	if record == "" {
		return sub
	}
	return record + "!" + sub
}

// content sniffs r and scans every pickle in it.
func (s *scanner) content(r io.ReaderAt, size int64, file, record string, depth int, explicit bool) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	if depth > maxNesting {
		return fmt.Errorf("archives nested deeper than %d", maxNesting)
	}
	head := make([]byte, 512)
	n, _ := r.ReadAt(head, 0)
	head = head[:n]
	routes := statedict.Routes(head, size)
	if len(routes) == 0 {
		return errNotCheckpoint
	}
	// Every route a loader can take the file along: the first is the one
	// torch (or ckpt) takes, and its errors are the file's; the others
	// are polyglot readings, which count where they find a global.
	var first error
	for i, rt := range routes {
		var err error
		switch rt {
		case statedict.RouteZip:
			err = s.zip(r, size, file, record, depth)
		case statedict.RouteTar:
			err = s.tar(r, size, file, record)
		case statedict.RouteCompressed:
			err = s.compressed(r, size, head, file, record, depth)
		case statedict.RouteNumpy:
			err = s.numpy(r, size, file, record)
		case statedict.RouteGGUF:
			err = s.ggufTemplates(r, size, file, record)
		case statedict.RouteSafetensors:
			// No pickle: the file is scanned, and clean unless the pickle
			// route below finds a global in its first bytes.
		case statedict.RoutePickle:
			if i == 0 {
				// Anything else torch.load would hand to its legacy
				// loader, whose first step is unpickling.
				err = s.stream(r, 0, size, file, record, explicit)
			} else {
				s.alsoPickle(r, size, file, record)
			}
		}
		if i == 0 {
			first = err
		}
	}
	if routes[0] != statedict.RouteZip && s.hubZip(r, size, file, record, depth) && errors.Is(first, errNotCheckpoint) {
		return nil // not a pickle, but a zip torch.hub would open
	}
	return first
}

// alsoPickle scans the file as the pickle stream torch's legacy loader
// would read when the file is taken for something else (a safetensors
// header, a tar whose header Python might refuse, a gzip ckpt unwraps but
// torch does not): a global it finds is a finding, a pickle error that
// finds none is what torch would stop at before running anything.
func (s *scanner) alsoPickle(r io.ReaderAt, size int64, file, record string) {
	sub := &scanner{ctx: s.ctx, cfg: s.cfg, rep: &Report{}}
	_ = sub.stream(r, 0, size, file, join(record, "as a pickle"), true)
	if len(sub.rep.Findings) > 0 {
		s.rep.Findings = append(s.rep.Findings, sub.rep.Findings...)
		s.rep.Pickles += sub.rep.Pickles
	}
}

// stream scans pickles back to back from off: one for a bare pickle (DCP
// .metadata), the five of a legacy file.
func (s *scanner) stream(r io.ReaderAt, off, end int64, file, record string, explicit bool) error {
	for i := 0; i < legacyPickles && off < end; i++ {
		rec := record
		if i > 0 || rec == "" {
			rec = join(record, fmt.Sprintf("pickle %d", i+1))
		}
		n, gs, err := s.pickleAt(r, off, end)
		gs = shift(gs, off)
		if err != nil {
			if i == 0 && len(gs) == 0 && !explicit && !errors.Is(err, pickle.ErrLimit) {
				return errNotCheckpoint
			}
			s.add(file, rec, gs)
			return fmt.Errorf("%s: %w", rec, err)
		}
		s.add(file, rec, gs)
		off += n
		if i == 0 && !legacyMagic(r, n) {
			// A single pickle, as torch reads it; code calling
			// pickle.load on the same file again reads the next one.
			s.trailing(r, off, end, file, record)
			return nil
		}
	}
	return nil
}

// maxTrailing bounds the pickles read after a bare pickle.
const maxTrailing = 64

// trailing scans pickles that follow a bare pickle back to back: what a
// second pickle.load of the same file would run. Those that parse count;
// one that does not ends the walk, its globals kept if it has any.
func (s *scanner) trailing(r io.ReaderAt, off, end int64, file, record string) {
	for i := 2; off < end && i < 2+maxTrailing; i++ {
		rec := join(record, fmt.Sprintf("pickle %d", i))
		n, gs, err := s.pickleAt(r, off, end)
		s.add(file, rec, shift(gs, off))
		if err != nil {
			return
		}
		off += n
	}
	if off < end {
		s.problem(file, record, fmt.Errorf("more than %d pickles back to back; the rest is not scanned", maxTrailing))
	}
}

// legacyMagic reports whether the first pickle (n bytes) is torch's legacy magic number.
func legacyMagic(r io.ReaderAt, n int64) bool {
	if n > 64 {
		return false
	}
	b := make([]byte, n)
	if _, err := r.ReadAt(b, 0); err != nil {
		return false
	}
	v, err := pickle.Unpickle(b)
	if err != nil {
		return false
	}
	i, ok := v.(interface{ Text(int) string })
	return ok && i.Text(16) == "1950a86a20f9469cfc6c"
}

// pickleAt reads the pickle at off, growing a window as statedict does, and
// returns its length and globals.
func (s *scanner) pickleAt(r io.ReaderAt, off, end int64) (int64, []pickle.GlobalUse, error) {
	window := min(end-off, 64<<10)
	mem, inMem := r.(memRecord)
	if inMem {
		window = end - off // parsed in place: no window to grow
	}
	for {
		var buf []byte
		if inMem {
			buf = mem.b[off:end]
		} else {
			buf = make([]byte, window)
			n, err := r.ReadAt(buf, off)
			if int64(n) < window {
				return 0, nil, fmt.Errorf("read at %d: %v", off, err)
			}
		}
		gs, used, err := pickle.Globals(buf, s.cfg.limits)
		if err == nil {
			s.rep.Pickles++
			return int64(used), gs, nil
		}
		if !errors.Is(err, pickle.ErrTruncated) || window >= end-off {
			return 0, gs, err
		}
		if window >= s.cfg.maxPickle {
			return 0, gs, fmt.Errorf("pickle larger than %d bytes (WithMaxPickleSize)", s.cfg.maxPickle)
		}
		window = min(end-off, window*4, s.cfg.maxPickle)
	}
}

func (s *scanner) add(file, record string, gs []pickle.GlobalUse) {
	for _, g := range gs {
		if g.Incomplete {
			// Not read in full as a loader may read it: a problem, so
			// the file never passes as read in full (exit 1).
			s.rep.Problems = append(s.rep.Problems, Problem{File: file, Record: record,
				Error: fmt.Sprintf("offset %d: %s", g.Offset, g.Reason)})
			continue
		}
		name := g.Module + "." + g.Name
		if g.Dynamic {
			name = "?"
		}
		s.rep.Findings = append(s.rep.Findings, Finding{File: file, Record: record, Offset: g.Offset, Op: g.Op,
			Global: name, Verdict: g.Verdict, Reason: g.Reason})
	}
}

// compressed decompresses a gzip or zstd file to an unlinked temporary file
// and scans that.
func (s *scanner) compressed(r io.ReaderAt, size int64, head []byte, file, record string, depth int) error {
	src := io.NewSectionReader(r, 0, size)
	var zr io.Reader
	kind := "gzip"
	if head[0] == 0x1f {
		g, err := gzip.NewReader(src)
		if err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		zr = g
	} else {
		kind = "zstd"
		d, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<30))
		if err != nil {
			return fmt.Errorf("zstd: %w", err)
		}
		defer d.Close()
		zr = d
	}
	f, err := os.CreateTemp(s.cfg.tempDir, "ckpt-scan-*")
	if err != nil {
		return err
	}
	os.Remove(f.Name())
	defer f.Close()
	n, err := io.Copy(f, io.LimitReader(zr, s.cfg.maxDecompress+1))
	if err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	if n > s.cfg.maxDecompress {
		return fmt.Errorf("%s: expands to more than %d bytes", kind, s.cfg.maxDecompress)
	}
	return s.content(f, n, file, join(record, kind), depth+1, true)
}
