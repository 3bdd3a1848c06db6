package regfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vlc-embed/vlc/internal/testenv"
)

// TestOpenRefusesSpecialFiles opens every kind of special file this
// machine can make, each under a deadline: a FIFO must be refused at once,
// not wait for a writer.
func TestOpenRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "reg")
	if err := os.WriteFile(reg, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path, want string // want "" means it opens
	}{
		{"regular", reg, ""},
		{"link to regular", link(t, reg), ""},
		{"folder", dir, "is a folder, not a regular file"},
	}
	if fifo, ok := testenv.MakeFIFO(t); ok {
		cases = append(cases,
			struct{ name, path, want string }{"fifo", fifo, "is a named pipe (FIFO), not a regular file"},
			struct{ name, path, want string }{"link to fifo", link(t, fifo), "is a named pipe (FIFO), not a regular file"})
	}
	if _, err := os.Stat("/dev/null"); err == nil {
		cases = append(cases, struct{ name, path, want string }{"device", "/dev/null", "/dev/null is a device, not a regular file"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			testenv.Within(t, 10*time.Second, func() {
				var b []byte
				b, err = ReadFile(c.path)
				if err == nil && string(b) != "hello" {
					t.Errorf("read %q", b)
				}
			})
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
				t.Fatalf("got %v, want ErrNotRegular naming %s: %q", err, c.path, c.want)
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
		if err := CheckOutput(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	bad := map[string]string{dir: "a folder", "/dev/null": "a device"}
	if fifo, ok := testenv.MakeFIFO(t); ok {
		bad[fifo] = "a named pipe (FIFO)"
		bad[link(t, fifo)] = "a named pipe (FIFO)"
	}
	for p, what := range bad {
		err := CheckOutput(p)
		want := "output " + p + " is " + what + ", not a regular file"
		if !errors.Is(err, ErrNotRegular) || err.Error() != want {
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
