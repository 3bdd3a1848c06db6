//go:build unix

package regfile

import (
	"os"
	"syscall"
)

// open refuses a path that is not a regular file before opening it
// (opening a device can act on it, and opening a FIFO completes a waiting
// writer's open), then opens with O_NONBLOCK, so that a FIFO swapped in
// meanwhile returns at once, checks the descriptor, and clears
// O_NONBLOCK (regular files ignore it, but a blocking descriptor is what
// os.File and mmap expect).
func open(path string) (*os.File, error) {
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		return nil, &NotRegularError{Path: path, Mode: st.Mode()}
	}
	var fd int
	var err error
	for {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC|syscall.O_NOCTTY, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		// A socket fails to open (ENXIO): say what it is.
		if st, serr := os.Stat(path); serr == nil && !st.Mode().IsRegular() {
			return nil, &NotRegularError{Path: path, Mode: st.Mode()}
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	if err := check(path, f); err != nil {
		f.Close()
		return nil, err
	}
	if err := syscall.SetNonblock(fd, false); err != nil {
		f.Close()
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return f, nil
}
