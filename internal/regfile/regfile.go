// Package regfile opens inputs and checks outputs so that a path naming
// something other than a regular file (a named pipe, a device, a socket, a
// folder) is refused with an error naming it, instead of blocking forever
// (opening a FIFO waits for a writer) or being replaced by a rename (an
// index renamed over /dev/null replaces the system's /dev/null).
package regfile

import (
	"github.com/vlc-embed/vlc/internal/errs"
	"io"
	"io/fs"
	"os"
)

// ErrNotRegular is matched (errors.Is) by every error of this package that
// refuses a path because it is not a regular file.
var ErrNotRegular = errs.ErrNotRegular

// NotRegularError names the path refused, what it is, and its role
// ("output", or "" for an input).
type NotRegularError struct {
	Role string
	Path string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	s := e.Path + " is " + Describe(e.Mode) + ", not a regular file"
	if e.Role != "" {
		s = e.Role + " " + s
	}
	return s
}

// Is makes errors.Is(err, ErrNotRegular) true.
func (e *NotRegularError) Is(target error) bool { return target == ErrNotRegular }

// Describe says what a file of mode m is, in words, with its article.
func Describe(m fs.FileMode) string {
	switch t := m.Type(); {
	case t&fs.ModeDir != 0:
		return "a folder"
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeDevice != 0: // character devices have both bits
		return "a device"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	case t == 0:
		return "a regular file"
	default:
		return "a special file (" + t.String() + ")"
	}
}

// Open opens path for reading, refusing with a *NotRegularError anything
// that is not a regular file once symbolic links are followed, without
// blocking on a named pipe. The check is made on the opened descriptor,
// so a file swapped in after a check cannot slip through.
func Open(path string) (*os.File, error) { return open(path) }

// ReadFile is os.ReadFile through Open.
func ReadFile(path string) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// CheckOutput fails when path exists and is not a regular file, or is a
// symbolic link to something that is not one: writing an output there
// would replace a device, a pipe or a socket (or block on it). A missing
// path, or a link to nothing, is fine: there is nothing to lose. A link
// to a regular file is fine too; vlc's writers rename over path, which
// replaces the link itself and leaves its target as it was.
func CheckOutput(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return nil // missing, or unreadable: the write itself will say
	}
	if !st.Mode().IsRegular() {
		return &NotRegularError{Role: "output", Path: path, Mode: st.Mode()}
	}
	return nil
}

func check(path string, f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return &NotRegularError{Path: path, Mode: st.Mode()}
	}
	return nil
}
