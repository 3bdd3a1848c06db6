package vecfile

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vlc-embed/vlc/internal/testenv"
)

// TestSpecialFilesRefused gives every reader and writer each kind of file
// that is not regular, under a deadline: a FIFO must be refused without
// waiting for a writer, /dev/zero without reading it for ever, and a writer
// must leave the special file as it was.
func TestSpecialFilesRefused(t *testing.T) {
	rows := [][]float32{{1, 2}}
	calls := []struct {
		name, ext string
		call      func(path string) error
	}{
		{"Open f16", ".f16", func(p string) error { _, err := Open(p, Options{Dim: 2}); return err }},
		{"Open npy", ".npy", func(p string) error { _, err := Open(p, Options{}); return err }},
		{"Open fvecs", ".fvecs", func(p string) error { _, err := Open(p, Options{}); return err }},
		{"ReadIvecs", ".ivecs", func(p string) error { _, err := ReadIvecs(p); return err }},
		{"WriteF16", ".f16", func(p string) error { return WriteF16(p, rows) }},
		{"WriteFvecs", ".fvecs", func(p string) error { return WriteFvecs(p, rows) }},
		{"WriteIvecs", ".ivecs", func(p string) error { return WriteIvecs(p, [][]int32{{1}}) }},
		{"WriteNpy", ".npy", func(p string) error { return WriteNpy(p, rows, "<f4") }},
	}
	n := 0
	for _, c := range calls {
		for _, s := range testenv.SpecialFiles(t, c.ext) {
			t.Run(c.name+"/"+s.Name, func(t *testing.T) {
				n++
				var err error
				testenv.Within(t, 10*time.Second, func() { err = c.call(s.Path) })
				want := s.Path + " is " + s.What + ", not a regular file"
				if !errors.Is(err, ErrNotRegular) || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), want) {
					t.Fatalf("got %v, want ErrNotRegular and ErrFormat, %q", err, want)
				}
				if got := testenv.Kind(t, s.Path); got != s.What {
					t.Fatalf("%s is now %s", s.Path, got)
				}
			})
		}
	}
	t.Logf("%d cases", n)
}
