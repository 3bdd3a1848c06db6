package regfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vlc-embed/vlc/internal/regfile"
	"github.com/vlc-embed/vlc/internal/testenv"
)

// TestOpenRefusesSpecialFiles opens every kind of special file this
// machine can make, each under a deadline: a FIFO must be refused at once,
// not wait for a writer, and /dev/zero must not be read for ever.
func TestOpenRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "reg")
	if err := os.WriteFile(reg, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{reg, link(t, reg)} {
		if b, err := regfile.ReadFile(p); err != nil || string(b) != "hello" {
			t.Errorf("regfile.ReadFile(%s) = %q, %v", p, b, err)
		}
	}
	for _, c := range testenv.SpecialFiles(t, "") {
		t.Run(c.Name, func(t *testing.T) {
			var err error
			testenv.Within(t, 10*time.Second, func() { _, err = regfile.ReadFile(c.Path) })
			want := c.Path + " is " + c.What + ", not a regular file"
			if !errors.Is(err, regfile.ErrNotRegular) || err.Error() != want {
				t.Fatalf("got %v, want regfile.ErrNotRegular %q", err, want)
			}
		})
	}
}

func TestCheckOutput(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "reg")
	os.WriteFile(reg, nil, 0o644)
	ok := []string{reg, filepath.Join(dir, "missing"), link(t, reg), link(t, filepath.Join(dir, "nothing"))}
	for _, p := range ok {
		if err := regfile.CheckOutput(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	for _, c := range testenv.SpecialFiles(t, "") {
		err := regfile.CheckOutput(c.Path)
		want := "output " + c.Path + " is " + c.What + ", not a regular file"
		if !errors.Is(err, regfile.ErrNotRegular) || err.Error() != want {
			t.Errorf("got %v, want %q", err, want)
		}
	}
}

func link(t *testing.T, target string) string {
	p := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(target, p); err != nil {
		t.Skip("no symbolic links:", err)
	}
	return p
}
