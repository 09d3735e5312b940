package atomicfile

import (
	"errors"
	"fmt"
	"github.com/ckpt-dev/ckpt/internal/human"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrNotRegular: an output path names something other than a regular file
// (a device, a FIFO, a socket, a directory), which is never replaced.
var ErrNotRegular = errors.New("convert: output is not a regular file")

// ResolveTarget returns the path an output named path is renamed to: path
// itself when it is missing or a regular file; the file a symbolic link
// points to (through every link), which must itself be a regular file, so
// that the link is kept and its target replaced, as cp writes through a
// link; an error for anything else, and for a dangling link (as cp).
func ResolveTarget(path string) (string, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return path, nil
	}
	if err != nil {
		return "", fmt.Errorf("convert: output %s: %w", path, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(path)
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%w: %s is a symbolic link to a missing file; not writing through a dangling link", ErrNotRegular, path)
		}
		if err != nil {
			return "", fmt.Errorf("convert: output %s: %w", path, err)
		}
		if fi, err = os.Lstat(target); err != nil {
			return "", fmt.Errorf("convert: output %s: %w", path, err)
		}
		if !fi.Mode().IsRegular() {
			return "", fmt.Errorf("%w: %s links to %s, %s; only a regular file is replaced", ErrNotRegular, path, target, human.FileKind(fi.Mode()))
		}
		return target, nil
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s is %s; only a regular file is replaced", ErrNotRegular, path, human.FileKind(fi.Mode()))
	}
	return path, nil
}

// checkReplaceable fails unless path is missing or a regular file: the
// last look before a rename, so that what appeared at the path since
// ResolveTarget is not replaced.
func checkReplaceable(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("convert: output %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is %s; only a regular file is replaced", ErrNotRegular, path, human.FileKind(fi.Mode()))
	}
	return nil
}

// tempPrefix is the start of the names of final's temporary files.
func tempPrefix(final string) string { return "." + filepath.Base(final) + ".tmp-" }

// RemoveStale removes the temporary files of final (".NAME.tmp-*" beside
// it) that no live process holds: left by a conversion that was killed
// where unnamed temporary files are not available. A live conversion
// holds an flock on its temporary file; the kernel drops it when the
// process dies. Only regular files are looked at, and one is removed only
// if the name still holds the file that was found unlocked.
func RemoveStale(final string) {
	dir, prefix := filepath.Dir(final), tempPrefix(final)
	es, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range es {
		if !strings.HasPrefix(e.Name(), prefix) || !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		f, err := os.OpenFile(p, os.O_RDONLY|nonBlock, 0)
		if err != nil {
			continue
		}
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && orphaned(f) {
			if now, err := os.Lstat(p); err == nil && os.SameFile(fi, now) {
				os.Remove(p)
			}
		}
		f.Close()
	}
}
