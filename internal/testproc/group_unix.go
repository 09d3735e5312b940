//go:build unix && !linux

package testproc

import (
	"os"
	"syscall"
)

// groupAttr starts the process in a group of its own (no parent-death
// signal outside Linux: a test binary killed hard leaves it running).
func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills the process's group.
func killGroup(p *os.Process) { syscall.Kill(-p.Pid, syscall.SIGKILL) }
