package vlcbeam

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/vlc-embed/vlc"
)

// Segment is a shard encoded: rows [Lo, Hi) of the input, numbered from
// 0 in the index at Path.
type Segment struct {
	Index, Count int
	Lo, Hi       int
	Path         string
}

// encodeFn encodes one shard against the frozen model. vlc.Compress
// writes the segment to a temporary file and renames it, and the segment
// has one path per shard, so an attempt that fails leaves nothing a
// commit could take for a segment, and a retry (or a re-run of the
// pipeline) replaces what another attempt wrote with the same bytes.
type encodeFn struct {
	Cfg Config
}

// testHookEncode, when set (by tests only), is called before a shard is
// encoded (written false) and after its segment is written (written
// true); an error it returns fails the element.
var testHookEncode func(sh Shard, written bool) error

func (f *encodeFn) ProcessElement(ctx context.Context, sh Shard, model string) (Segment, error) {
	if testHookEncode != nil {
		if err := testHookEncode(sh, false); err != nil {
			return Segment{}, err
		}
	}
	cfg := f.Cfg
	if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil {
		return Segment{}, err
	}
	path := cfg.segmentPath(sh.Index, sh.Count)
	sum, err := vlc.Compress(ctx, cfg.Input, path, vlc.Options{
		Dim: cfg.Dim, AnchorsFrom: model, Start: sh.Lo, End: sh.Hi, Backend: cfg.Backend,
	})
	if err != nil {
		return Segment{}, fmt.Errorf("vlcbeam: shard %d of %d (rows [%d, %d)): %w", sh.Index, sh.Count, sh.Lo, sh.Hi, err)
	}
	if sum.N != sh.Hi-sh.Lo {
		return Segment{}, fmt.Errorf("vlcbeam: shard %d of %d: %s holds %d rows, want %d", sh.Index, sh.Count, path, sum.N, sh.Hi-sh.Lo)
	}
	log.Infof(ctx, "vlcbeam: encoded shard %d of %d, rows [%d, %d), into %s (%d bytes, %v)",
		sh.Index, sh.Count, sh.Lo, sh.Hi, filepath.Base(path), sum.IndexBytes, sum.Total)
	if testHookEncode != nil {
		if err := testHookEncode(sh, true); err != nil {
			return Segment{}, err
		}
	}
	return Segment{Index: sh.Index, Count: sh.Count, Lo: sh.Lo, Hi: sh.Hi, Path: path}, nil
}
