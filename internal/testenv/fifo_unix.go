//go:build unix

package testenv

import (
	"path/filepath"
	"syscall"
	"testing"
)

// MakeFIFO makes a named pipe in a temporary folder; ok is false where
// the system cannot.
func MakeFIFO(t testing.TB) (path string, ok bool) {
	path = filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Logf("no FIFO: %v", err)
		return "", false
	}
	return path, true
}
