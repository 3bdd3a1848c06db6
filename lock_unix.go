//go:build unix

package vlc

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/vlc-embed/vlc/internal/regfile"
)

// lockFile is an exclusive flock on path + ".lock", held by the one
// writer of an index across processes. The kernel drops it when the
// process dies, so a killed writer leaves no stale lock.
type lockFile struct{ f *os.File }

func lockPath(path string) (*lockFile, error) {
	// O_NONBLOCK: a named pipe put there is refused, not waited on.
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = &regfile.NotRegularError{Role: "lock file", Path: path + ".lock", Mode: st.Mode()}
		}
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
