package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// Exit codes, documented in `ckpt --help` and the README.
const (
	exitOK      = 0
	exitError   = 1 // unreadable, unsafe or failing input (verify's differences, diff past its limits)
	exitUsage   = 2 // bad flags or arguments
	exitUnknown = 3 // ckpt scan: read in full, unknown globals, nothing unsafe
)

// exitCodeError makes the command exit with code after printing err (a
// report's verdict, already shown in full on stdout).
type exitCodeError struct {
	code int
	err  error
}

func (e exitCodeError) Error() string { return e.err.Error() }
func (e exitCodeError) Unwrap() error { return e.err }

// usageError marks an error as the user's invocation being wrong. help is
// the command whose --help explains the right usage ("ckpt load"); empty
// means the top level.
type usageError struct {
	err  error
	help string
}

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usage error with a formatted message.
func usagef(format string, a ...any) error { return usageError{err: fmt.Errorf(format, a...)} }

// reportError maps err to an exit code and prints it as one line on w. This
// is the only place errors become exit codes.
func reportError(w io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	// File-derived text in a message (names, values) is printed escaped, and
	// the message stays one line.
	msg := clean(strings.TrimSpace(err.Error()))
	var ue usageError
	if errors.As(err, &ue) || isCobraUsage(msg) {
		help := ue.help
		if help == "" {
			help = "ckpt"
		}
		fmt.Fprintf(w, "ckpt: %s (see '%s --help')\n", msg, help)
		return exitUsage
	}
	fmt.Fprintf(w, "ckpt: %s\n", msg)
	var ce exitCodeError
	if errors.As(err, &ce) {
		return ce.code
	}
	return exitError
}

// isCobraUsage recognises the argument errors cobra returns as plain errors.
func isCobraUsage(msg string) bool {
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "requires at most", "received ", "unknown flag", "unknown shorthand flag"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
