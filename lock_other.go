//go:build !unix

package vlc

import (
	"fmt"
	"os"
)

// lockFile is path + ".lock" created exclusively: where flock is missing,
// a writer killed while holding it leaves the file, which must then be
// removed by hand (the error says so).
type lockFile struct{ name string }

func lockPath(path string) (*lockFile, error) {
	name := path + ".lock"
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (%s exists; remove it if no writer runs)", path, ErrLocked, name)
	}
	f.Close()
	return &lockFile{name}, nil
}

func (l *lockFile) unlock() { os.Remove(l.name) }
