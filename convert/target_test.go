//go:build linux

package convert

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/atomicfile"
	"github.com/ckpt-dev/ckpt/safetensors"
	"github.com/ckpt-dev/ckpt/verify"
)

// special makes a non-regular file of the given kind at path, or skips.
func special(t *testing.T, kind, path string) {
	t.Helper()
	switch kind {
	case "fifo":
		if err := syscall.Mkfifo(path, 0o644); err != nil {
			t.Skip(err)
		}
	case "socket":
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Skip(err)
		}
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		t.Cleanup(func() { l.Close() })
	case "chardev":
		// A stand-in for /dev/null (same major and minor), made in the
		// temporary directory: the real one is never put at risk.
		if os.Geteuid() != 0 {
			t.Skip("making a device node needs root")
		}
		if err := syscall.Mknod(path, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			t.Skip(err)
		}
	case "dir":
		if err := os.Mkdir(path, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOutputNotRegular: convert never replaces a device, FIFO, socket or
// directory at an output path, even with force; it fails naming the path
// and leaves everything as it was.
func TestOutputNotRegular(t *testing.T) {
	for _, kind := range []string{"fifo", "socket", "chardev", "dir"} {
		for _, layout := range []string{"file", "shard", "index"} {
			if kind == "dir" && layout != "shard" {
				// A directory at OUT (or at an index path) asks for a
				// directory output: not a case of this test.
				continue
			}
			t.Run(kind+"/"+layout, func(t *testing.T) {
				dir := t.TempDir()
				out := filepath.Join(dir, "o.safetensors")
				at := out
				var opts []Option
				switch layout {
				case "shard":
					out = filepath.Join(dir, "model.safetensors.index.json")
					at = filepath.Join(dir, "model-00001-of-00003.safetensors")
					opts = append(opts, WithMaxShardSize(100))
				case "index":
					out = filepath.Join(dir, "model.safetensors.index.json")
					at = out
					opts = append(opts, WithMaxShardSize(100))
				}
				special(t, kind, at)
				before, err := os.Lstat(at)
				if err != nil {
					t.Fatal(err)
				}
				_, err = Convert(context.Background(), open(t, fixtures+"training.pt"), out, append(opts, WithForce(true))...)
				if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), at) {
					t.Fatalf("err %v, want ErrNotRegular naming %s", err, at)
				}
				after, err := os.Lstat(at)
				if err != nil || !os.SameFile(before, after) || after.Mode() != before.Mode() {
					t.Errorf("%s changed: %v %v", at, after, err)
				}
				if files := dirFiles(t, dir); len(files) != 1 {
					t.Errorf("left %v", files)
				}
			})
		}
	}
}

// TestOutputSymlink: a symbolic link at OUT is written through, as cp
// does: the link stays, its target is replaced atomically (with force
// only); a dangling link, or one to a non-regular file, is refused.
func TestOutputSymlink(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "elsewhere")
	os.Mkdir(other, 0o755)
	target := filepath.Join(other, "real.safetensors")
	os.WriteFile(target, []byte("old"), 0o600)
	link := filepath.Join(dir, "o.safetensors")
	if err := os.Symlink("elsewhere/real.safetensors", link); err != nil {
		t.Fatal(err)
	}
	if _, err := Convert(context.Background(), open(t, fixtures+"training.pt"), link); !errors.Is(err, ErrExists) {
		t.Fatalf("without force: %v", err)
	}
	convert(t, fixtures+"training.pt", link, WithForce(true))
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("link replaced: %v", err)
	}
	noDiff(t, fixtures+"training.pt", target, verify.CompareOptions{})
	if files := dirFiles(t, other); len(files) != 1 {
		t.Errorf("target directory holds %v", files)
	}

	dangling := filepath.Join(dir, "d.safetensors")
	os.Symlink("missing.safetensors", dangling)
	if _, err := Convert(context.Background(), open(t, fixtures+"training.pt"), dangling, WithForce(true)); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "dangling") {
		t.Errorf("dangling link: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	special(t, "fifo", fifo)
	toFifo := filepath.Join(dir, "f.safetensors")
	os.Symlink("fifo", toFifo)
	if _, err := Convert(context.Background(), open(t, fixtures+"training.pt"), toFifo, WithForce(true)); !errors.Is(err, ErrNotRegular) {
		t.Errorf("link to a FIFO: %v", err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("FIFO replaced: %v %v", fi, err)
	}
}

// bigInput writes a safetensors file of n float32 zeros-and-ramps.
func bigInput(t *testing.T, path string, n int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := safetensors.NewWriter(f, []safetensors.WriterTensor{{Name: "w", DType: "F32", Shape: []int64{n}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteTensor("w", io.LimitReader(&ramp{}, 4*n)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

type ramp struct{ i byte }

func (r *ramp) Read(p []byte) (int, error) {
	for k := range p {
		p[k] = r.i
		r.i++
	}
	return len(p), nil
}

// killChild is the environment variable that makes the test binary the
// child of TestKillLeavesNothing: "IN OUT named|unnamed".
const killChild = "CKPT_TEST_KILL_CHILD"

// TestKillLeavesNothing: a convert killed with SIGKILL mid-write leaves
// nothing in the output directory where unnamed temporary files are
// available; where they are not, it leaves a named temporary file that
// the next conversion into the directory removes, while one a live
// conversion holds stays.
func TestKillLeavesNothing(t *testing.T) {
	if arg := os.Getenv(killChild); arg != "" {
		f := strings.Fields(arg)
		atomicfile.ForceNamed = f[2] == "named"
		var done int64
		progress := func(n int64) {
			done += n
			if done > 12<<20 {
				fmt.Println("writing")
				select {} // until killed
			}
		}
		_, err := Convert(context.Background(), open(t, f[0]), f[1], WithProgress(progress))
		t.Fatalf("conversion ended: %v", err)
	}
	src := filepath.Join(t.TempDir(), "in.safetensors")
	bigInput(t, src, 8<<20) // 32 MiB
	for _, mode := range []string{"unnamed", "named"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			if mode == "unnamed" {
				if !atomicfile.UnnamedSupported(dir) {
					t.Skipf("no unnamed temporary files in %s", dir)
				}
			}
			out := filepath.Join(dir, "o.safetensors")
			cmd := exec.Command(os.Args[0], "-test.run=^TestKillLeavesNothing$")
			cmd.Env = append(os.Environ(), killChild+"="+src+" "+out+" "+mode)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, _ := bufio.NewReader(stdout).ReadString('\n')
			cmd.Process.Kill()
			cmd.Wait()
			if line != "writing\n" {
				t.Fatalf("child said %q", line)
			}
			left := dirFiles(t, dir)
			if mode == "unnamed" {
				if len(left) != 0 {
					t.Fatalf("kill -9 left %v", left)
				}
				return
			}
			// The fallback leaves a partial named file (checked, so that
			// the test sees the path it means to)...
			if len(left) != 1 || !strings.HasPrefix(left[0], ".o.safetensors.tmp-") {
				t.Fatalf("kill -9 left %v, want one temporary file", left)
			}
			if fi, err := os.Stat(filepath.Join(dir, left[0])); err != nil || fi.Size() < 4<<20 {
				t.Fatalf("temporary file: %v %v", fi, err)
			}
			// ...which the next conversion into the directory removes,
			// sparing one that a live conversion holds.
			defer func(v bool) { atomicfile.ForceNamed = v }(atomicfile.ForceNamed)
			atomicfile.ForceNamed = true
			live, err := createTemp(out, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer live.discard()
			convert(t, fixtures+"training.pt", out)
			got := dirFiles(t, dir)
			if len(got) != 2 || got[0] != filepath.Base(live.file.OS().Name()) || got[1] != "o.safetensors" {
				t.Errorf("after the next conversion: %v, want %s and o.safetensors", got, filepath.Base(live.file.OS().Name()))
			}
		})
	}
}
