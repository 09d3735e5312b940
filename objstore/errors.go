package objstore

import (
	"errors"
	"fmt"
)

// Sentinel errors, matched with errors.Is.
var (
	ErrNotFound          = errors.New("no such object")
	ErrNoBucket          = errors.New("no such bucket")
	ErrAccessDenied      = errors.New("access denied")
	ErrCredentials       = errors.New("the credentials were refused")
	ErrNoCredentials     = errors.New("no credentials")
	ErrUnreachable       = errors.New("endpoint unreachable")
	ErrChanged           = errors.New("the object changed while it was read")
	ErrUnsupportedScheme = errors.New("unsupported URL scheme")
	ErrNoRange           = errors.New("the server does not honour Range requests")
	ErrBadURL            = errors.New("bad URL")
	ErrRedirect          = errors.New("redirect refused")
	ErrLimit             = errors.New("exceeds a limit of the network client")
	// ErrCannotList is a listing asked of a server that cannot list (a
	// web server). It matches errors.ErrUnsupported too.
	ErrCannotList error = cannotList{}
)

type cannotList struct{}

func (cannotList) Error() string {
	return "a web server cannot list a directory: name the file or its index.json"
}

func (cannotList) Is(target error) bool { return target == errors.ErrUnsupported }

// Error is a failed operation on an object, named by its URL (which never
// holds a secret: credentials come from the environment only).
type Error struct {
	Op  string // "open", "read", "list", "stat", "write", "upload", "remove"
	URL string
	Err error
}

func (e *Error) Error() string {
	if e.Op == "" {
		return fmt.Sprintf("%s: %v", e.URL, e.Err)
	}
	return fmt.Sprintf("%s %s: %v", e.Op, e.URL, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }
