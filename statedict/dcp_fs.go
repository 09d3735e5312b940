package statedict

import (
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
)

// isDCPDir reports whether dir holds a DCP checkpoint: a .metadata file,
// local or in c.fs. An FS that cannot list (a web server) is asked for
// the file itself.
func (c *config) isDCPDir(dir string) bool {
	if c.fs == nil {
		fi, err := os.Stat(filepath.Join(dir, DCPMetadata))
		return err == nil && fi.Mode().IsRegular()
	}
	if names, err := c.fs.ReadDir(dir); err == nil {
		return slices.Contains(names, DCPMetadata)
	}
	f, err := c.fs.OpenFile(c.join(dir, DCPMetadata))
	if err != nil {
		return false
	}
	f.Close()
	return true
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

// dcpOpenFile opens a .distcp file; tests replace it to count bytes read.
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

// openDCPFile opens a .distcp file of c.fs, or a local one through
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

// dcpFile is an open .distcp file.
type dcpFile interface {
	io.ReaderAt
	io.Closer
}
