//go:build !unix

package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// lockFile is the store's lock file (lockName) created exclusively:
// where flock is missing, a writer killed while holding it leaves the
// file, which must then be removed by hand (the error says so).
type lockFile struct{ name string }

func lockStore(ctx context.Context, path string) (*lockFile, error) {
	name := lockName(path)
	err := waitLock(ctx, func() (bool, error) {
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		f.Close()
		return true, nil
	})
	if errors.Is(err, ErrLocked) {
		return nil, fmt.Errorf("%s: %w (%s exists; remove it if no writer runs)", path, err, name)
	}
	if err != nil {
		return nil, err
	}
	return &lockFile{name}, nil
}

func (l *lockFile) unlock() { os.Remove(l.name) }

// remove unlocks: the lock file goes with the lock here.
func (l *lockFile) remove() { l.unlock() }
