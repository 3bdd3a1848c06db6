//go:build unix

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every file a command maps, truncated by another program at some moment
// of the run (before it is opened, while it is read, after): the command
// either succeeds or exits 1 with one line; never a panic, a trace or an
// internal error, and a fault names the file that changed, not another.
func TestFilesTruncatedDuringCommands(t *testing.T) {
	ix := deepIndexPath(t)
	cases := []struct {
		name string
		// args builds the command line from copies: victim is the file
		// to truncate.
		args func(dir string) (args []string, victim string)
	}{
		{"compress input", func(dir string) ([]string, string) {
			in := cp(t, deepBase, dir)
			return []string{"compress", in, "-dim", "96", "-anchors", "20", "-o", filepath.Join(dir, "o.vlc")}, in
		}},
		{"search -query", func(dir string) ([]string, string) {
			q := cp(t, deepQuery, dir)
			return []string{"search", ix, "-query", q, "-nprobe", "45"}, q
		}},
		{"search -rerank", func(dir string) ([]string, string) {
			b := cp(t, deepBase, dir)
			return []string{"search", ix, "-query", deepQuery, "-rerank", b}, b
		}},
		{"eval -base", func(dir string) ([]string, string) {
			b := cp(t, deepBase, dir)
			return []string{"eval", ix, "-query", deepQuery, "-base", b}, b
		}},
		{"search, the index", func(dir string) ([]string, string) {
			i := cp(t, ix, dir)
			return []string{"search", i, "-query", deepQuery, "-nprobe", "45"}, i
		}},
		{"verify, the index", func(dir string) ([]string, string) {
			i := cp(t, ix, dir)
			return []string{"verify", i}, i
		}},
		{"add, the vectors", func(dir string) ([]string, string) {
			i, b := cp(t, ix, dir), cp(t, deepBase, dir)
			return []string{"add", i, b}, b
		}},
	}
	runs, failed := 0, 0
	for _, c := range cases {
		for _, delay := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 80 * time.Millisecond} {
			dir := t.TempDir()
			args, victim := c.args(dir)
			done := make(chan struct{})
			go func() {
				defer close(done)
				time.Sleep(delay)
				os.Truncate(victim, 4096)
			}()
			var stdout, stderr bytes.Buffer
			status := run(context.Background(), args, &stdout, &stderr)
			<-done
			runs++
			msg := stderr.String()
			if strings.Contains(msg, "internal error") || strings.Contains(msg, "goroutine ") {
				t.Errorf("%s, truncated after %v: %q", c.name, delay, msg)
			}
			if status != 0 {
				failed++
				if status != 1 || strings.Count(strings.TrimRight(msg, "\n"), "\n") > 0 && !strings.Contains(msg, "level=") {
					t.Errorf("%s, truncated after %v: status %d, stderr %q; want 1 and one line", c.name, delay, status, msg)
				}
				if strings.Contains(msg, "changed while in use") && !strings.Contains(msg, victim) {
					t.Errorf("%s: a fault blamed on another file than %s: %q", c.name, victim, msg)
				}
			}
		}
	}
	t.Logf("%d runs, %d ended with an error line, the others succeeded", runs, failed)
}

// cp copies file into dir and returns the copy's path.
func cp(t *testing.T, file, dir string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, filepath.Base(file))
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
