// Package testproc runs the server binaries that tests start (MinIO,
// fake-gcs-server, Azurite): found on $PATH or in $HOME/go/bin, started in
// a process group of their own that dies with the test binary, logged to
// their directory, and waited for until ready. internal/miniotest and
// internal/cloudemu build on it.
package testproc

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// Binary returns the path of the binary name on $PATH or in $HOME/go/bin
// (where go install puts it), or "" when there is none.
func Binary(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, "go", "bin", name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Random returns n random bytes in hex, for names and credentials.
func Random(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Proc is a running server process and the directory that holds its data
// and its log.
type Proc struct {
	Dir string

	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
}

// Start runs bin with args and env (added to the environment), its output
// to Dir/server.log, and returns once ready reports true. It fails with the
// log's tail if the process exits first, and kills it if it is not ready
// within 60 s.
func Start(dir, bin string, args, env []string, ready func() bool) (*Proc, error) {
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	p := &Proc{Dir: dir, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = groupAttr()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("testproc: start %s: %w", bin, err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for !ready() {
		select {
		case <-p.done:
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			if len(log) > 2000 {
				log = log[len(log)-2000:]
			}
			return nil, fmt.Errorf("testproc: %s exited: %s", filepath.Base(bin), log)
		default:
		}
		if time.Now().After(deadline) {
			p.Kill()
			return nil, fmt.Errorf("testproc: %s not ready after 60 s", filepath.Base(bin))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return p, nil
}

// Kill stops the process at once, leaving its data (a fault in a test).
func (p *Proc) Kill() {
	killGroup(p.cmd.Process)
	<-p.done
}

// Stop stops the process and removes its directory.
func (p *Proc) Stop() {
	p.once.Do(func() {
		p.Kill()
		os.RemoveAll(p.Dir)
	})
}
