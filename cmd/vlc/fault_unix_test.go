//go:build unix

package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/vecfile"
)

// A command that reads a mapped file another program truncates meanwhile,
// on its own goroutine or in par.For's workers, exits 1 with one line
// naming the file, not a SIGBUS trace.
func TestFaultInCommandNamesFile(t *testing.T) {
	for _, workers := range []bool{false, true} {
		dir := t.TempDir()
		path := filepath.Join(dir, "x.f16")
		if err := os.WriteFile(path, make([]byte, 1<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		commands["test-fault"] = command{run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			m, err := vecfile.Open(path, vecfile.Options{Dim: 8})
			if err != nil {
				return err
			}
			defer m.Close()
			if err := os.Truncate(path, 0); err != nil {
				return err
			}
			if workers {
				par.For(m.Len(), 64, func(lo, hi int) {
					for i := lo; i < hi; i++ {
						m.Row(i, nil)
					}
				})
			} else {
				m.Row(m.Len()-1, nil)
			}
			return nil
		}}
		var stdout, stderr bytes.Buffer
		status := run(context.Background(), []string{"test-fault"}, &stdout, &stderr)
		delete(commands, "test-fault")
		msg := stderr.String()
		if status != 1 || strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "vlc test-fault: "+path+": ") || !strings.Contains(msg, "changed while in use") {
			t.Errorf("workers %v: status %d, stderr %q; want 1 and one line naming %s", workers, status, msg, path)
		}
	}
}
