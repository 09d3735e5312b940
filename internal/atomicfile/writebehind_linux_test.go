package atomicfile

import (
	"os"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestWriteBehindDropsPages checks with the kernel itself (mincore) that
// an output written behind does not stay in the page cache: of 64 MiB
// written, the windows waited for are no longer resident, so that what
// an output holds of memory does not grow with its size.
func TestWriteBehindDropsPages(t *testing.T) {
	dir := diskDir(t)
	data := make([]byte, 64<<20)
	fill(data, 7)
	f, err := writeBehindFile(t, dir, data)
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, len(data), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(data)+page-1)/page)
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	// Everything but the last behindDepth windows and the one being
	// filled was waited for and dropped.
	dropped := (int64(len(data)) - int64(behindDepth+1)*behindWindow) / int64(page)
	resident := 0
	for _, v := range vec[:dropped] {
		resident += int(v & 1)
	}
	if resident > int(dropped)/10 {
		t.Errorf("%d of the first %d pages still in the page cache after writing behind, want (almost) none", resident, dropped)
	}
}

// diskDir returns a temporary directory on a filesystem with a page
// cache to drop (not tmpfs, whose pages are the file).
func diskDir(t *testing.T) string {
	t.Helper()
	for _, parent := range []string{"", "."} {
		var dir string
		if parent == "" {
			dir = t.TempDir()
		} else {
			d, err := os.MkdirTemp(parent, "writebehind")
			if err != nil {
				continue
			}
			t.Cleanup(func() { os.RemoveAll(d) })
			dir = d
		}
		var st syscall.Statfs_t
		if syscall.Statfs(dir, &st) == nil && st.Type != unix.TMPFS_MAGIC {
			return dir
		}
	}
	t.Skip("no disk-backed directory here (the temporary directory and the package's are on tmpfs): the page cache cannot be dropped")
	return ""
}
