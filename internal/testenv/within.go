package testenv

import (
	"os"
	"testing"
	"time"

	"github.com/vlc-embed/vlc/internal/regfile"
)

// Within runs f and fails the test, without waiting for f, if it has not
// returned after d: a call that blocks forever (opening a FIFO) fails the
// test instead of hanging it. f must not call t.FailNow.
func Within(t testing.TB, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("still blocked after %v", d)
	}
}

// Special is a file that is not regular, made by SpecialFiles.
type Special struct {
	Name string // fifo, link-to-fifo, dev-null, dev-zero, folder, socket
	Path string
	What string // "a named pipe (FIFO)", "a device", ...
}

// Kind says what path now is, in SpecialFiles' words ("a regular file"
// if a writer replaced it).
func Kind(t testing.TB, path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return err.Error()
	}
	return regfile.Describe(st.Mode())
}
