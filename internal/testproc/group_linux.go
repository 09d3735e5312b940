package testproc

import (
	"os"
	"syscall"
)

// groupAttr starts the process in a group of its own, killed when the
// test binary dies.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup kills the process's group.
func killGroup(p *os.Process) { syscall.Kill(-p.Pid, syscall.SIGKILL) }
