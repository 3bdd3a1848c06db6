//go:build unix

package index_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/vlc-embed/vlc/index"
)

// Another program truncating an index in place while it is open (vlc never
// does: it replaces files) makes the mapped pages vanish; reading them
// raises SIGBUS. Search and Verify report that as ErrCorrupt instead of
// ending the process, and the index can still be closed.
func TestTruncatedWhileOpen(t *testing.T) {
	shared, _, queries := build(t, index.L2, 45)
	b, err := os.ReadFile(shared)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "deep.vlc") // a copy: this test damages it
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ix, err := index.Open(path, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	q := queries.Row(0, nil)
	if _, err := ix.Search(q, index.SearchOptions{K: 10, NProbe: 45}); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	hits, err := ix.Search(q, index.SearchOptions{K: 10, NProbe: 45})
	if !errors.Is(err, index.ErrCorrupt) || hits != nil {
		t.Errorf("Search after the file was truncated: %d hits, %v; want ErrCorrupt", len(hits), err)
	}
	t.Log(err)
	if err := ix.Verify(); !errors.Is(err, index.ErrCorrupt) {
		t.Errorf("Verify after the file was truncated: %v, want ErrCorrupt", err)
	}
	if err := ix.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
