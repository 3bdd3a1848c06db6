package vlc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

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
var ErrModel = errors.New("vlc: inputs do not share a model")

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
// two inputs is ErrDuplicateID), and the rows of inputs without ids are
// numbered on, input after input, so merging the shards of one file in
// order gives each row its number in the file. The code arrays are kept
// in files beside output while they are written (index.Plan's SpillDir).
func Merge(ctx context.Context, output string, inputs []string) (*MergeSummary, error) {
	if len(inputs) == 0 {
		return nil, fmt.Errorf("%w: no indexes to merge", index.ErrArgument)
	}
	out, outErr := os.Stat(output)
	var parts []index.MergePart
	withKeys := false
	rows := 0
	var energy float64
	for _, in := range inputs {
		if st, err := os.Stat(in); err == nil && outErr == nil && os.SameFile(st, out) {
			return nil, fmt.Errorf("%w: output %s is the input %s: write the merge elsewhere", index.ErrArgument, output, in)
		}
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
		if len(snap.segs) > 1 || !snap.gone.IsEmpty() {
			withKeys = true // a store names its rows by id, not position
		}
		lone := snap.man.Segments == nil
		for i, s := range snap.segs {
			part := index.MergePart{Index: s.ix}
			if lone {
				part.FirstID = rows // a lone file's rows are numbered on
			}
			if !snap.deleted[i].IsEmpty() {
				part.Keep = keepLive(snap.deleted[i])
			}
			parts = append(parts, part)
			live := s.ix.Len() - int(snap.deleted[i].GetCardinality())
			energy += s.ix.Meta().Energy * float64(live)
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
	if _, err := index.PrepareWrite(output); err != nil {
		return nil, err
	}
	meta := parts[0].Index.Meta()
	meta.Energy = energy / float64(rows)
	if _, err := index.Merge(ctx, output, parts, meta, index.MergeOptions{WithKeys: withKeys, SpillDir: filepath.Dir(output)}); err != nil {
		return nil, err
	}
	removeUnused(output, nil) // the segments of a store the merge replaced
	st, err := os.Stat(output)
	if err != nil {
		return nil, err
	}
	return &MergeSummary{Inputs: len(inputs), Rows: rows, Bytes: st.Size()}, nil
}
