package vlcbeam

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/vlc-embed/vlc"
)

// Result is what a build wrote.
type Result struct {
	Output   string
	Rows     int
	Bytes    int64    // the index's size
	Segments []string // merged, in shard order; removed by the cleanup
}

// commitFn merges every segment, in shard order, into Cfg.Output.
// vlc.Merge writes atomically, and the commit removes nothing: the
// cleanup does, in a later stage, so that a retried commit finds every
// segment still there and writes the same bytes again.
type commitFn struct {
	Cfg Config
}

func (f *commitFn) ProcessElement(ctx context.Context, _ int, segs func(*Segment) bool) (Result, error) {
	var all []Segment
	var s Segment
	for segs(&s) {
		all = append(all, s)
	}
	paths, rows, err := ordered(all)
	if err != nil {
		return Result{}, err
	}
	sum, err := vlc.Merge(ctx, f.Cfg.Output, paths)
	if err != nil {
		return Result{}, fmt.Errorf("vlcbeam: merging %d segments into %s: %w", len(paths), f.Cfg.Output, err)
	}
	if sum.Rows != rows {
		return Result{}, fmt.Errorf("vlcbeam: %s holds %d rows, the shards %d", f.Cfg.Output, sum.Rows, rows)
	}
	log.Infof(ctx, "vlcbeam: wrote %s: %d rows from %d segments, %d bytes", f.Cfg.Output, rows, len(paths), sum.Bytes)
	return Result{Output: f.Cfg.Output, Rows: rows, Bytes: sum.Bytes, Segments: paths}, nil
}

// ordered checks that segs are every shard of one split exactly once
// (a runner may deliver an element twice; the copies are the same) and
// covering the rows without gap, and returns their paths in shard order.
func ordered(segs []Segment) (paths []string, rows int, err error) {
	if len(segs) == 0 {
		return nil, 0, errors.New("vlcbeam: no segments to merge")
	}
	slices.SortFunc(segs, func(a, b Segment) int { return a.Index - b.Index })
	segs = slices.Compact(segs)
	count := segs[0].Count
	if len(segs) != count {
		return nil, 0, fmt.Errorf("vlcbeam: %d segments of %d", len(segs), count)
	}
	next := 0
	for i, s := range segs {
		if s.Index != i || s.Count != count {
			return nil, 0, fmt.Errorf("vlcbeam: segment %d of %d where %d of %d belongs", s.Index, s.Count, i, count)
		}
		if s.Lo != next || s.Hi <= s.Lo {
			return nil, 0, fmt.Errorf("vlcbeam: segment %d covers rows [%d, %d), want [%d, ...)", i, s.Lo, s.Hi, next)
		}
		next = s.Hi
		paths = append(paths, s.Path)
	}
	return paths, next, nil
}

// cleanupFn removes the merged segments and the work folder once empty.
// Removing a file already gone is no error: a retry finishes the job.
type cleanupFn struct {
	Cfg Config
}

func (f *cleanupFn) ProcessElement(ctx context.Context, r Result) (Result, error) {
	for _, p := range r.Segments {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return r, fmt.Errorf("vlcbeam: removing a merged segment: %w", err)
		}
	}
	// Left where something else is in it (another build's files).
	if err := os.Remove(f.Cfg.WorkDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Infof(ctx, "vlcbeam: work folder kept: %v", err)
	}
	return r, nil
}
