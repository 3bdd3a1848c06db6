//go:build unix

package vlc

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile is an exclusive flock on path + ".lock", held by the one
// writer of an index across processes. The kernel drops it when the
// process dies, so a killed writer leaves no stale lock.
type lockFile struct{ f *os.File }

func lockPath(path string) (*lockFile, error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w (%s.lock)", path, ErrLocked, path)
		}
		return nil, fmt.Errorf("%s: lock: %w", path, err)
	}
	return &lockFile{f}, nil
}

func (l *lockFile) unlock() { l.f.Close() }
