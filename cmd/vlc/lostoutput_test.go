package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// failingWriter fails every write after the first n bytes.
type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, errors.New("disk full")
	}
	w.n -= len(p)
	return len(p), nil
}

// TestLostOutput: output that could not be written, in full or in part,
// makes the command exit 1 with one line, whichever way it printed.
func TestLostOutput(t *testing.T) {
	for _, n := range []int{0, 10} {
		for _, args := range [][]string{{"version"}, {"help"}, {"info", "-h"}, {"verify", "../../testdata/golden/v1.vlc"}, {"info", "../../testdata/golden/v1.vlc"}} {
			var errb bytes.Buffer
			code := run(context.Background(), args, &failingWriter{n}, &errb)
			checkOneLineError(t, code, errb.String())
			if !strings.Contains(errb.String(), "disk full") {
				t.Errorf("%v: stderr %q does not name the write error", args, errb.String())
			}
		}
	}
}
