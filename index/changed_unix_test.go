//go:build unix

package index_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/vecfile"
)

// Files that another program changes while vlc maps them: a search gives
// an error naming the file that changed (a vector file: ErrChanged; the
// index: ErrCorrupt), never a crash, and never blames a good index for a
// vector file's fault.
func TestFilesChangedWhileMapped(t *testing.T) {
	shared, _, _ := build(t, index.L2, 45)
	copyFile := func(t *testing.T, from, name string) string {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(to, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return to
	}
	openRows := func(t *testing.T, path string) *vecfile.Matrix {
		m, err := vecfile.Open(path, vecfile.Options{Dim: 96})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	type setup struct {
		ix      *index.Index
		ixPath  string
		queries *vecfile.Matrix
		opt     index.SearchOptions
	}
	cases := []struct {
		name string
		// change alters a file of s and returns its path and the error a
		// search must wrap (nil: any result but a crash, or ErrCorrupt).
		change func(t *testing.T, s *setup) (string, error)
	}{
		{"query file truncated", func(t *testing.T, s *setup) (string, error) {
			p := s.queries.Path()
			truncate(t, p, 0)
			return p, vecfile.ErrChanged
		}},
		{"re-rank file truncated", func(t *testing.T, s *setup) (string, error) {
			p := copyFile(t, deep+"base.f16", "base.f16")
			s.opt.Rerank = openRows(t, p)
			truncate(t, p, 4096)
			return p, vecfile.ErrChanged
		}},
		{"index truncated", func(t *testing.T, s *setup) (string, error) {
			truncate(t, s.ixPath, 4096)
			return s.ixPath, index.ErrCorrupt
		}},
		{"index LIST rewritten in place", func(t *testing.T, s *setup) (string, error) {
			rewriteSection(t, s.ix, s.ixPath, "LIST", 0xff)
			return s.ixPath, nil
		}},
		{"index ROWS rewritten in place", func(t *testing.T, s *setup) (string, error) {
			rewriteSection(t, s.ix, s.ixPath, "ROWS", 0xff)
			return s.ixPath, nil
		}},
	}
	for _, c := range cases {
		for _, batch := range []bool{false, true} {
			t.Run(c.name+map[bool]string{false: ", Search", true: ", SearchBatch"}[batch], func(t *testing.T) {
				ixPath := copyFile(t, shared, "deep.vlc")
				ix, err := index.Open(ixPath, index.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer ix.Close()
				s := &setup{ix: ix, ixPath: ixPath, queries: openRows(t, copyFile(t, deep+"query.fvecs", "query.fvecs")), opt: index.SearchOptions{K: 10, NProbe: 45}}
				q := s.queries.Row(0, nil) // before any change: Search takes a query read
				path, want := c.change(t, s)
				if batch {
					_, err = ix.SearchBatch(context.Background(), s.queries, s.opt)
				} else {
					_, err = ix.Search(q, s.opt)
					if path == s.queries.Path() {
						// The query was read before the change: nothing
						// else reads that file, so the search succeeds.
						if err != nil {
							t.Fatalf("query read before its file was truncated: %v", err)
						}
						return
					}
				}
				switch {
				case want == nil:
					if err != nil && !errors.Is(err, index.ErrCorrupt) {
						t.Errorf("%v, want no error or ErrCorrupt", err)
					}
				case !errors.Is(err, want) || !strings.HasPrefix(err.Error(), path+":"):
					t.Errorf("%v, want an error naming %s and wrapping %v", err, path, want)
				case want != index.ErrCorrupt && errors.Is(err, index.ErrCorrupt):
					t.Errorf("%v: a good index blamed for another file's change", err)
				}
			})
		}
	}
}

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

// rewriteSection overwrites a section of ix's file (at path) in place
// with bytes b.
func rewriteSection(t *testing.T, ix *index.Index, path, kind string, b byte) {
	t.Helper()
	for _, s := range ix.Sections() {
		if s.Kind.String() == kind {
			w, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if _, err := w.WriteAt([]byte(strings.Repeat(string([]byte{b}), int(s.Length))), int64(s.Offset)); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("%s has no section %s", path, kind)
}
