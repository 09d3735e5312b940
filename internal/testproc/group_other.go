//go:build !unix

package testproc

import (
	"os"
	"syscall"
)

// groupAttr: no process groups here; the process itself is killed.
func groupAttr() *syscall.SysProcAttr { return nil }

// killGroup kills the process (its children, if any, are left).
func killGroup(p *os.Process) { p.Kill() }
