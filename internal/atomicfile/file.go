package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
)

// ErrExists: Commit without force found a file at the final path that
// appeared since the caller's checks.
var ErrExists = errors.New("output exists")

// File is an output being written: an unnamed temporary file in its
// destination directory (O_TMPFILE, Linux), given its final name only when
// complete, so that nothing is left behind even by kill -9; where the
// filesystem lacks unnamed files, a named ".NAME.tmp-*" file beside its
// final path, removed unless committed, and held under an flock so that a
// later conversion can remove it if this process dies (RemoveStale).
type File struct {
	f     *os.File
	w     *Writer
	final string
	named bool // f has a name in the directory (the fallback)
}

// SyncFile is (*os.File).Sync; a variable for tests.
var SyncFile = (*os.File).Sync

// ForceNamed turns unnamed temporary files off (for tests of the
// fallback).
var ForceNamed = false

// UnnamedSupported reports whether dir's filesystem has unnamed
// temporary files (for tests of both paths).
func UnnamedSupported(dir string) bool {
	f, err := openUnnamed(dir)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// Create starts the local output final. With a budget (NewBudget, shared
// by a conversion's outputs) it is not synced, and as much of it goes
// through the page cache as the budget allows; without one (nil) it is
// written behind (writebehind.go), and synced by Finish.
func Create(final string, budget *atomic.Int64) (*File, error) {
	dir := filepath.Dir(final)
	if !ForceNamed {
		if f, err := openUnnamed(dir); err == nil {
			// Locked for the moment between its hidden name and the
			// rename (Commit).
			lockTemp(f)
			return &File{f: f, w: newWriter(f, budget), final: final}, nil
		}
	}
	for try := 0; ; try++ {
		f, err := os.CreateTemp(dir, tempPrefix(final)+"*")
		if err != nil {
			return nil, fmt.Errorf("convert: create temporary output: %w", err)
		}
		if err := f.Chmod(0o644); err != nil { // CreateTemp makes 0600
			f.Close()
			os.Remove(f.Name())
			return nil, fmt.Errorf("convert: create temporary output: %w", err)
		}
		lockTemp(f)
		// A concurrent RemoveStale may have taken the file for an
		// orphan between its creation and the lock.
		fi, err1 := f.Stat()
		now, err2 := os.Lstat(f.Name())
		if err1 == nil && err2 == nil && os.SameFile(fi, now) || try == 3 {
			return &File{f: f, w: newWriter(f, budget), final: final, named: true}, nil
		}
		f.Close()
	}
}

// Writer returns the file's sequential writer.
func (t *File) Writer() *Writer { return t.w }

// OS returns the open file, to read back what was written once the
// Writer is flushed.
func (t *File) OS() *os.File { return t.f }

// WriteAt rewrites bytes already written (a header), once the Writer is
// flushed.
func (t *File) WriteAt(p []byte, off int64) (int, error) { return t.f.WriteAt(p, off) }

// Discard closes and removes the temporary file; it does nothing after
// Commit or an earlier Discard.
func (t *File) Discard() {
	if t.f != nil {
		t.w.stop()
		t.w.release()
		t.f.Close()
		if t.named {
			os.Remove(t.f.Name())
		}
		t.f = nil
	}
}

// Finish writes out the file and syncs it (unless it has a page-cache
// budget: see Create); Commit gives it its final name.
func (t *File) Finish() error {
	if err := t.w.finish(); err != nil {
		return fmt.Errorf("convert: write %s: %w", t.final, err)
	}
	if t.w.budget != nil {
		return nil
	}
	if err := SyncFile(t.f); err != nil {
		return fmt.Errorf("convert: write %s: %w", t.final, err)
	}
	return nil
}

// Commit puts the finished file in place of its final path, which must
// be missing or a regular file (ErrNotRegular), and closes it. Without
// force a file that appeared at the final path since the caller's checks
// is not replaced (ErrExists, where unnamed files are used).
func (t *File) Commit(force bool) error {
	if err := checkReplaceable(t.final); err != nil {
		return err
	}
	if t.named {
		// Renamed while still open (and so locked against RemoveStale),
		// where the system allows renaming an open file.
		var cerr error
		if runtime.GOOS == "windows" {
			cerr = t.f.Close()
		}
		err := os.Rename(t.f.Name(), t.final)
		if err != nil {
			os.Remove(t.f.Name())
		}
		if runtime.GOOS != "windows" {
			cerr = t.f.Close()
		}
		t.f = nil
		if err != nil {
			return fmt.Errorf("convert: rename into place: %w", err)
		}
		if cerr != nil {
			return fmt.Errorf("convert: write %s: %w", t.final, cerr)
		}
		return nil
	}
	if !force {
		err := linkUnnamed(t.f, t.final)
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%w: %s", ErrExists, t.final)
		}
		if err != nil {
			return fmt.Errorf("convert: put output in place: %w", err)
		}
	} else {
		// link(2) does not replace: link to a hidden name, then rename
		// over the final one.
		hidden := filepath.Join(filepath.Dir(t.final), tempPrefix(t.final)+randomSuffix())
		if err := linkUnnamed(t.f, hidden); err != nil {
			return fmt.Errorf("convert: put output in place: %w", err)
		}
		if err := os.Rename(hidden, t.final); err != nil {
			os.Remove(hidden)
			return fmt.Errorf("convert: rename into place: %w", err)
		}
	}
	err := t.f.Close()
	t.f = nil
	if err != nil {
		return fmt.Errorf("convert: write %s: %w", t.final, err)
	}
	return nil
}

// randomSuffix returns a short random name part.
func randomSuffix() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
