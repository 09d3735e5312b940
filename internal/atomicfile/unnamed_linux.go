package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"
)

// openDirect opens f's file a second time, for writing with O_DIRECT, or
// returns nil where the filesystem does not allow it. The file is reached
// through /proc/self/fd, which also works for an unnamed (O_TMPFILE) file.
func openDirect(f *os.File) *os.File {
	d, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), os.O_WRONLY|syscall.O_DIRECT, 0)
	if err != nil && f.Name() != "" && filepath.IsAbs(f.Name()) {
		d, err = os.OpenFile(f.Name(), os.O_WRONLY|syscall.O_DIRECT, 0)
	}
	if err != nil {
		return nil
	}
	return d
}

// oTmpfile is O_TMPFILE (__O_TMPFILE | O_DIRECTORY), the same on every
// Linux architecture Go supports.
const oTmpfile = 0x400000 | syscall.O_DIRECTORY

// atSymlinkFollow and atEmptyPath are linkat's flags.
const (
	atSymlinkFollow = 0x400
	atEmptyPath     = 0x1000
	atFDCWD         = -100
)

// openUnnamed creates an unnamed file in dir (O_TMPFILE): nothing of it
// is visible in dir, and the kernel frees it when the process ends, killed
// or not, unless linkUnnamed gave it a name. Filesystems without O_TMPFILE
// answer EOPNOTSUPP (EISDIR or EINVAL on old kernels).
func openUnnamed(dir string) (*os.File, error) {
	fd, err := syscall.Open(dir, oTmpfile|syscall.O_RDWR|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, "(unnamed temporary file)"))
	if err := f.Chmod(0o644); err != nil { // the umask applied to the mode
		f.Close()
		return nil, err
	}
	return f, nil
}

// linkUnnamed gives the unnamed file f the name path, which must not
// exist (EEXIST otherwise).
func linkUnnamed(f *os.File, path string) error {
	err := linkat(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), atFDCWD, path, atSymlinkFollow)
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EACCES) {
		// No /proc: AT_EMPTY_PATH (which needs CAP_DAC_READ_SEARCH).
		err = linkat("", int(f.Fd()), path, atEmptyPath)
	}
	if err != nil {
		return &os.LinkError{Op: "link", Old: f.Name(), New: path, Err: err}
	}
	return nil
}

// linkat is linkat(2) from (olddirfd, old) to (AT_FDCWD, path).
func linkat(old string, olddirfd int, path string, flags int) error {
	op, err := syscall.BytePtrFromString(old)
	if err != nil {
		return err
	}
	np, err := syscall.BytePtrFromString(path)
	if err != nil {
		return err
	}
	newdirfd := atFDCWD
	_, _, e := syscall.Syscall6(syscall.SYS_LINKAT, uintptr(olddirfd), uintptr(unsafe.Pointer(op)),
		uintptr(newdirfd), uintptr(unsafe.Pointer(np)), uintptr(flags), 0)
	if e != 0 {
		return e
	}
	return nil
}
