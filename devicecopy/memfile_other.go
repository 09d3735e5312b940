//go:build !linux

package devicecopy

import "errors"

var errNoMemFile = errors.New("memory files need Linux")

// openMemFile fails: elsewhere storages from an object store are read
// into Go memory.
func openMemFile(int64) (*memFile, error) { return nil, errNoMemFile }

func (f *memFile) writeAt([]byte, int64) error { return errNoMemFile }
func (f *memFile) readAt([]byte, int64) error  { return errNoMemFile }
func (f *memFile) closeFD()                    {}
func (f *memFile) unmap()                      {}
