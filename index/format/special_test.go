package format

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vlc-embed/vlc/internal/testenv"
)

// TestSpecialFiles gives Open, CheckWritable and WriteFile each kind of
// file that is not regular, under a deadline: Open must refuse a FIFO
// without waiting for a writer, and the writers must refuse to replace
// one, leaving it what it was and no temporary file beside it.
func TestSpecialFiles(t *testing.T) {
	secs := []Section{{Kind: KindOf("TEST"), Data: []byte("data")}}
	calls := []struct {
		name   string
		output bool
		call   func(path string) error
	}{
		{"Open", false, func(p string) error { _, err := Open(p, OpenOptions{Verify: true}); return err }},
		{"CheckWritable", true, CheckWritable},
		{"WriteFile", true, func(p string) error { return WriteFile(p, secs) }},
		{"WriteFileContext", true, func(p string) error { return WriteFileContext(context.Background(), p, secs) }},
	}
	n := 0
	for _, c := range calls {
		for _, s := range testenv.SpecialFiles(t, ".vlc") {
			t.Run(c.name+"/"+s.Name, func(t *testing.T) {
				n++
				var err error
				testenv.Within(t, 10*time.Second, func() { err = c.call(s.Path) })
				want := s.Path + " is " + s.What + ", not a regular file"
				if c.output {
					want = "output " + want
				}
				if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), want) {
					t.Fatalf("got %v, want ErrNotRegular, %q", err, want)
				}
				if !c.output && !errors.Is(err, ErrNotIndex) {
					t.Errorf("%v does not match ErrNotIndex", err)
				}
				if got := testenv.Kind(t, s.Path); got != s.What {
					t.Fatalf("%s is now %s", s.Path, got)
				}
				if left, _ := filepath.Glob(filepath.Join(filepath.Dir(s.Path), ".*.tmp-*")); len(left) > 0 {
					t.Fatalf("left behind: %v", left)
				}
			})
		}
	}
	t.Logf("%d cases", n)
}

// TestWriteThroughSymlink pins the policy for a symbolic link as output:
// the link is replaced by the new file and its target left as it was.
func TestWriteThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	target, link := filepath.Join(dir, "target.vlc"), filepath.Join(dir, "link.vlc")
	os.WriteFile(target, []byte("old"), 0o644)
	if err := os.Symlink(target, link); err != nil {
		t.Skip(err)
	}
	if err := CheckWritable(link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(link, []Section{{Kind: KindOf("TEST"), Data: []byte("new")}}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "old" {
		t.Errorf("target now %q", b)
	}
	if st, err := os.Lstat(link); err != nil || !st.Mode().IsRegular() {
		t.Errorf("link not replaced by a regular file: %v %v", st.Mode(), err)
	}
}
