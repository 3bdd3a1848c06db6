// Package errs holds the few categories every vlc error falls in, so that
// a caller tells them apart with errors.Is against one set of names (the
// root package exports them) whichever package failed. A package's own
// sentinels (index.ErrDim, vecfile.ErrSize, ...) are made by New and match
// their category as well as themselves.
package errs

import (
	"errors"
	"io/fs"
)

// The categories.
var (
	// ErrArgument: a value the caller gave that cannot be used (an option, a
	// vector, an id, a range, a dimension), whatever the function.
	ErrArgument = errors.New("invalid argument")
	// ErrNotFound: an id the store does not hold live.
	ErrNotFound = errors.New("not found")
	// ErrDuplicate: an id given twice, or already held.
	ErrDuplicate = errors.New("duplicate")
	// ErrCorrupt: a vlc file that is damaged (checksum, lengths, values).
	ErrCorrupt = errors.New("corrupt")
	// ErrFormat: a file this build cannot read: not a vlc file, a newer
	// version, an input of an unknown or malformed layout.
	ErrFormat = errors.New("unsupported format")
	// ErrLocked: another process held a store's write lock too long.
	ErrLocked = errors.New("locked")
	// ErrNotRegular: a path that is not a regular file (a pipe, a device,
	// a socket, a folder), refused rather than blocked on or replaced.
	ErrNotRegular = errors.New("not a regular file")
	// ErrOutOfMemory: the device (or the host) has no memory for the work.
	ErrOutOfMemory = errors.New("out of memory")
	// ErrChanged: a file another program truncated or rewrote while it was
	// mapped.
	ErrChanged = errors.New("changed while in use")
	// ErrClosed: a use after Close; it is fs.ErrClosed.
	ErrClosed = fs.ErrClosed
	// ErrUnavailable: a backend or capability not built in, or not able to
	// start here.
	ErrUnavailable = errors.New("not available")
)

// New returns a sentinel error whose message is msg and which matches
// category under errors.Is, as well as itself.
func New(category error, msg string) error { return &sentinel{msg, category} }

type sentinel struct {
	msg      string
	category error
}

func (e *sentinel) Error() string { return e.msg }
func (e *sentinel) Unwrap() error { return e.category }
