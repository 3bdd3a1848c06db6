package vlc_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/internal/testenv"
	"github.com/vlc-embed/vlc/vecfile"
)

// TestSpecialFiles gives every entry point of the library that reads or
// writes a path each kind of file that is not regular, under a deadline:
// an input that is a FIFO is refused without waiting for a writer, an
// output is refused before any training and left what it was, and the
// store's manifest is not renamed over a pipe or device put in its place.
func TestSpecialFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.fvecs")
	rs := rows(300, 8, 1)
	if err := vecfile.WriteFvecs(in, rs); err != nil {
		t.Fatal(err)
	}
	docs := make([]vlc.Document, len(rs))
	for i, r := range rs {
		docs[i] = vlc.Document{Vector: r}
	}
	opt := vlc.Options{Seed: 1, Anchors: 4}
	// The store cases replace the store's path by the special file, so it
	// is the path, not the special file's own name, that must stay what
	// it was.
	store := func(write func(ix *vlc.Store) error) func(string) (string, error) {
		return func(special string) (string, error) {
			p := filepath.Join(t.TempDir(), "s.vlc")
			ix, err := vlc.Build(ctx, p, docs[:250], opt)
			if err != nil {
				return p, err
			}
			t.Cleanup(func() { ix.Close() })
			if _, err := ix.Add(ctx, docs[250:260]); err != nil { // now a manifest
				return p, err
			}
			if err := os.Rename(special, p); err != nil {
				return p, err
			}
			return p, write(ix)
		}
	}
	in1 := func(f func(p string) error) func(string) (string, error) {
		return func(p string) (string, error) { return p, f(p) }
	}
	calls := []struct {
		name, ext string
		output    bool
		call      func(path string) (string, error)
	}{
		{"Compress input f16", ".f16", false, in1(func(p string) error {
			_, err := vlc.Compress(ctx, p, filepath.Join(t.TempDir(), "o.vlc"), vlc.Options{Dim: 8})
			return err
		})},
		{"Compress input npy", ".npy", false, in1(func(p string) error {
			_, err := vlc.Compress(ctx, p, filepath.Join(t.TempDir(), "o.vlc"), opt)
			return err
		})},
		{"Compress input fvecs", ".fvecs", false, in1(func(p string) error {
			_, err := vlc.Compress(ctx, p, filepath.Join(t.TempDir(), "o.vlc"), opt)
			return err
		})},
		{"Open", ".vlc", false, in1(func(p string) error { _, err := vlc.Open(p); return err })},
		{"Compress output", ".vlc", true, in1(func(p string) error { _, err := vlc.Compress(ctx, in, p, opt); return err })},
		{"Build output", ".vlc", true, in1(func(p string) error { _, err := vlc.Build(ctx, p, docs, opt); return err })},
		{"store Delete", ".vlc", false, store(func(ix *vlc.Store) error { return ix.Delete(ctx, []string{"0"}) })},
		{"store Add", ".vlc", false, store(func(ix *vlc.Store) error { _, err := ix.Add(ctx, docs[260:261]); return err })},
		{"store Compact", ".vlc", false, store(func(ix *vlc.Store) error { return ix.Compact(ctx) })},
	}
	n := 0
	for _, c := range calls {
		for i, s := range testenv.SpecialFiles(t, c.ext) {
			t.Run(c.name+"/"+s.Name, func(t *testing.T) {
				s := testenv.SpecialFiles(t, c.ext)[i] // the store cases move it
				if strings.HasPrefix(c.name, "store") && s.Name == "folder" {
					t.Skip("a folder cannot be renamed over a file")
				}
				n++
				var err error
				path := s.Path
				testenv.Within(t, 20*time.Second, func() { path, err = c.call(s.Path) })
				want := path + " is " + s.What + ", not a regular file"
				if c.output {
					want = "output " + want
				}
				if !errors.Is(err, vlc.ErrNotRegular) || !strings.Contains(err.Error(), want) {
					t.Fatalf("got %v, want ErrNotRegular, %q", err, want)
				}
				if got := testenv.Kind(t, path); got != s.What {
					t.Fatalf("%s is now %s", path, got)
				}
			})
		}
	}
	t.Logf("%d cases", n)
}
