package human

import (
	"io/fs"
	"testing"
)

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{-1: "?", 0: "0 B", 1023: "1023 B", 1024: "1.00 KiB", 1536: "1.50 KiB",
		10 << 20: "10.0 MiB", 3<<30 + 1<<29: "3.50 GiB", 5 << 50: "5.00 PiB", 2000 << 50: "2000.0 PiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestFileKind(t *testing.T) {
	for m, want := range map[fs.FileMode]string{fs.ModeDir: "a directory", fs.ModeNamedPipe: "a FIFO",
		fs.ModeDevice | fs.ModeCharDevice: "a character device", fs.ModeDevice: "a block device",
		fs.ModeSocket: "a socket", fs.ModeSymlink: "a symbolic link", fs.ModeIrregular: "not a regular file"} {
		if got := FileKind(m); got != want {
			t.Errorf("FileKind(%v) = %q, want %q", m, got, want)
		}
	}
}
