//go:build unix

package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/vlc-embed/vlc/internal/regfile"
)

// lockFile is an exclusive flock on the store's lock file (lockName),
// held by the one writer of an index across processes for the length of
// one write. The kernel drops it when the process dies, so a killed
// writer leaves no stale lock.
type lockFile struct{ f *os.File }

// lockStore takes the lock of the store at path, waiting while another
// process holds it, up to lockWait or until ctx is done: then an error
// wrapping ErrLocked. The lock is taken on the file the name holds once
// it is held: a lock file removed under its lock (Claim's release)
// and made again by another process is locked anew, so two writers never
// hold locks on two files of one name.
func lockStore(ctx context.Context, path string) (*lockFile, error) {
	name := lockName(path)
	var held *os.File
	err := waitLock(ctx, func() (bool, error) {
		// O_NONBLOCK: a named pipe put there is refused, not waited on.
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_NONBLOCK, 0o644)
		if err != nil {
			return false, err
		}
		st, err := f.Stat()
		if err == nil && !st.Mode().IsRegular() {
			err = &regfile.NotRegularError{Role: "lock file", Path: name, Mode: st.Mode()}
		}
		if err == nil {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		}
		if err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return false, nil
			}
			return false, err
		}
		if now, err := os.Stat(name); err != nil || !os.SameFile(now, st) {
			f.Close() // removed or replaced while we waited: lock the new one
			return false, nil
		}
		held = f
		return true, nil
	})
	if err != nil {
		if errors.Is(err, ErrLocked) {
			return nil, fmt.Errorf("%s (%s): %w", path, name, err)
		}
		return nil, fmt.Errorf("%s: lock: %w", path, err)
	}
	return &lockFile{held}, nil
}

func (l *lockFile) unlock() { l.f.Close() }

// remove removes the lock file, then unlocks it: for a path that needs no
// lock file any more (an index file, not a store).
func (l *lockFile) remove() {
	os.Remove(l.f.Name())
	l.f.Close()
}
