package store

import (
	"context"
	"fmt"
	"github.com/vlc-embed/vlc/internal/errs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/vlc-embed/vlc/index"
)

// MergeSummary describes a finished Merge.
type MergeSummary struct {
	Inputs int   // index files and stores merged
	Rows   int   // rows written: every input's live rows
	Bytes  int64 // the merged index's size
}

// ErrModel is returned by Merge for inputs that were not encoded under one
// model (the same anchors, code and seed), whose codes cannot be joined.
var ErrModel = errs.New(errs.ErrArgument, "inputs do not share a model")

// Merge writes to output, atomically, one index holding the live rows of
// every input (index files or stores), input after input, each in row
// order. The codes are copied, never encoded again, so the inputs must
// share a model: indexes encoded under one (Options.AnchorsFrom) merge
// into exactly what one encode of all their rows gives; the segments of
// stores grown from one index merge as Compact merges them (for the pq
// and sq8 codes, whose added segments fit their lists apart, only where
// Compact could: index.ErrArgument names the list otherwise). Inputs
// that do not share a model are refused (ErrModel), naming the first
// that differs.
//
// Ids stay what the inputs said: an input with ids keeps them (an id in
// two inputs is ErrDuplicateID), and the rows of an index file without
// ids are numbered on, input after input, and past every id in use before
// them (earlier inputs' ids that are numbers, a store's next id), so
// merging the shards of one file in order gives each row its number in
// the file. The code arrays
// are kept in files beside output while they are written (index.Plan's
// SpillDir).
//
// The same index given twice, an output that is one of the inputs or
// lies in an input store's segment folder, and a store at output (an
// index that took writes) are refused with index.ErrArgument, and an
// index file at output is replaced.
func Merge(ctx context.Context, output string, inputs []string) (_ *MergeSummary, err error) {
	if len(inputs) == 0 {
		return nil, fmt.Errorf("%w: no indexes to merge", index.ErrArgument)
	}
	out, outErr := os.Stat(output)
	outDir, outDirErr := os.Stat(filepath.Dir(output))
	var parts []index.MergePart
	var snaps []*snapshot
	withKeys := false
	rows := 0
	next := uint64(0) // above every numeric id of the inputs so far
	var energy float64
	for k, in := range inputs {
		ix, err := Open(in)
		if err != nil {
			return nil, err
		}
		defer ix.Close()
		snap, err := ix.acquire()
		if err != nil {
			return nil, err
		}
		defer snap.release()
		for j, prev := range snaps {
			if os.SameFile(prev.srcInfo, snap.srcInfo) || shareFile(prev, snap) {
				return nil, fmt.Errorf("%w: inputs %d and %d are the same index or share a file (%s, %s): rows would be merged twice", index.ErrArgument, j+1, k+1, inputs[j], in)
			}
		}
		snaps = append(snaps, snap)
		if outErr == nil && os.SameFile(out, snap.srcInfo) {
			return nil, fmt.Errorf("%w: output %s is the input %s: write the merge elsewhere", index.ErrArgument, output, in)
		}
		for _, s := range snap.segs {
			if outErr == nil && os.SameFile(out, s.info) {
				return nil, fmt.Errorf("%w: output %s is a segment of the input store %s: write the merge elsewhere", index.ErrArgument, output, in)
			}
		}
		if !snap.lone() && outDirErr == nil {
			if d, err := os.Stat(segmentDir(in)); err == nil && os.SameFile(d, outDir) {
				return nil, fmt.Errorf("%w: output %s lies in the segment folder of the input store %s: write the merge elsewhere", index.ErrArgument, output, in)
			}
		}
		renumber := snap.lone() && !snap.segs[0].ix.HasKeys()
		// Without keys the merged file names each row by its position:
		// right only while every input's ids are their positions there.
		positional := renumber && next == uint64(rows) ||
			rows == 0 && len(snap.segs) == 1 && !snap.segs[0].ix.HasKeys() && snap.gone.IsEmpty()
		withKeys = withKeys || !positional
		for i, s := range snap.segs {
			part := index.MergePart{Index: s.ix}
			if renumber {
				part.FirstID = int(next)
			}
			if !snap.deleted[i].IsEmpty() {
				part.Keep = keepLive(snap.deleted[i])
			}
			parts = append(parts, part)
			live := s.ix.Len() - int(snap.deleted[i].GetCardinality())
			energy += s.ix.Meta().Energy * float64(live)
		}
		next += uint64(snap.live)
		if !renumber {
			next = max(next, snap.man.NextID, snap.idsAbove())
		}
		rows += snap.live
	}
	all := make([]*index.Index, len(parts))
	for i, p := range parts {
		all[i] = p.Index
	}
	if _, err := index.NewGroup(all...); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrModel, err)
	}
	if rows == 0 {
		return nil, fmt.Errorf("%w: every input is empty or deleted", index.ErrArgument)
	}
	if live, segs, ok := storeAt(output); ok {
		return nil, fmt.Errorf("%w: output %s is a store (%d live vectors in %d segments): merge writes a new index file; remove the store or write elsewhere", index.ErrArgument, output, live, segs)
	}
	if _, err := index.PrepareWrite(output); err != nil {
		return nil, err
	}
	release, err := Claim(ctx, output, false)
	if err != nil {
		return nil, err
	}
	defer func() { release(err == nil) }()
	meta := parts[0].Index.Meta()
	meta.Energy = energy / float64(rows)
	if _, err := index.Merge(ctx, output, parts, meta, index.MergeOptions{WithKeys: withKeys, SpillDir: filepath.Dir(output)}); err != nil {
		return nil, err
	}
	st, err := os.Stat(output)
	if err != nil {
		return nil, err
	}
	return &MergeSummary{Inputs: len(inputs), Rows: rows, Bytes: st.Size()}, nil
}

// shareFile reports whether two versions hold a file in common (a store
// and one of its segments given as an index).
func shareFile(a, b *snapshot) bool {
	files := func(s *snapshot) []os.FileInfo {
		out := []os.FileInfo{s.srcInfo}
		for _, g := range s.segs {
			out = append(out, g.info)
		}
		return out
	}
	for _, x := range files(a) {
		for _, y := range files(b) {
			if os.SameFile(x, y) {
				return true
			}
		}
	}
	return false
}

// idsAbove returns one more than the largest live id that is a decimal
// number, 0 when there is none: where a merge numbers the rows of a next
// input without ids.
func (snap *snapshot) idsAbove() uint64 {
	var top uint64
	for i, s := range snap.segs {
		del := snap.deleted[i]
		if !s.ix.HasKeys() {
			for r := s.ix.Len() - 1; r >= 0; r-- {
				if !del.Contains(uint32(r)) {
					top = max(top, uint64(r)+1)
					break
				}
			}
			continue
		}
		for r := range s.ix.Len() {
			if del.Contains(uint32(r)) {
				continue
			}
			k, err := s.ix.Key(r)
			if err != nil || len(k) == 0 || len(k) > 19 || k[0] == '0' && len(k) > 1 {
				continue
			}
			if n, err := strconv.ParseUint(string(k), 10, 64); err == nil {
				top = max(top, n+1)
			}
		}
	}
	return top
}
