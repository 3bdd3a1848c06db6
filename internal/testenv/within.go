package testenv

import (
	"testing"
	"time"
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
