//go:build unix

package eval_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	vlc "github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/eval"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/vecfile"
)

// A base file truncated by another program while Exact reads it gives an
// error naming it (vecfile.ErrChanged), not a crash.
func TestExactBaseTruncated(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "deep2k.vlc")
	if _, err := vlc.Compress(context.Background(), deep+"base.f16", out, vlc.Options{Dim: 96, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	ix, err := index.Open(out, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	b, err := os.ReadFile(deep + "base.f16")
	if err != nil {
		t.Fatal(err)
	}
	basePath := filepath.Join(dir, "base.f16")
	if err := os.WriteFile(basePath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	base, err := vecfile.Open(basePath, vecfile.Options{Dim: 96})
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	q := mustOpen(t, deep+"query.fvecs")
	if err := os.Truncate(basePath, 4096); err != nil {
		t.Fatal(err)
	}
	_, err = eval.Exact(ix, base, q, 10)
	if !errors.Is(err, vecfile.ErrChanged) || !strings.HasPrefix(err.Error(), basePath+":") {
		t.Fatalf("%v, want an error naming %s and wrapping vecfile.ErrChanged", err, basePath)
	}
}
