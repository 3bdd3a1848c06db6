//go:build unix

package vlc_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	vlc "github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/vecfile"
)

// truncateOnTraining is a log handler that truncates a file when compress
// says it starts training, as another program might.
type truncateOnTraining struct {
	slog.Handler
	path string
}

func (h truncateOnTraining) Enabled(context.Context, slog.Level) bool { return true }

func (h truncateOnTraining) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "training" {
		return os.Truncate(h.path, 4096)
	}
	return nil
}

// An input truncated while compress trains on it (in par.For's workers)
// gives an error naming the input and wrapping vecfile.ErrChanged, and no
// index, rather than ending the process with SIGBUS.
func TestCompressInputTruncatedWhileTraining(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "x.f16")
	b, err := os.ReadFile("testdata/deep10k/base.f16")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "x.vlc")
	log := slog.New(truncateOnTraining{slog.Default().Handler(), in})
	_, err = vlc.Compress(context.Background(), in, out, vlc.Options{Dim: 96, Bits: 4, Backend: "cpu", Logger: log})
	if !errors.Is(err, vecfile.ErrChanged) || !strings.HasPrefix(err.Error(), in+":") {
		t.Fatalf("%v, want an error naming %s and wrapping vecfile.ErrChanged", err, in)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an index was written: %v", err)
	}
}
