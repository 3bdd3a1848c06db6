package spill

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// reserve sizes f to n bytes with its blocks allocated (fallocate), or,
// on a file system without it, sized sparse.
func reserve(f *os.File, n int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, n)
	for errors.Is(err, unix.EINTR) { // tmpfs stops a long one for a signal
		err = unix.Fallocate(int(f.Fd()), 0, 0, n)
	}
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return f.Truncate(n)
	}
	return err
}
