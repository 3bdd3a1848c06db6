package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/errs"
)

// GetOption asks Get for more than the id and payload.
type GetOption func(*getOptions)

type getOptions struct{ vector bool }

// WithVector asks Get (and List) for the vector as the code gives it back:
// the anchor plus the decoded residual, unit length under cosine. It is
// not the vector added, which the store does not keep.
func WithVector() GetOption { return func(o *getOptions) { o.vector = true } }

// getRecord returns a group row's record, with its decoded vector when asked.
func (snap *snapshot) getRecord(row int, o getOptions) (Record, error) {
	rec, err := snap.record(row)
	if err != nil || !o.vector {
		return rec, err
	}
	i, r := snap.group.Locate(row)
	ix := snap.segs[i].ix
	rec.Vector, err = ix.Vector(r, make([]float32, ix.Dim()))
	return rec, err
}

// Count returns the number of live vectors the filter allows (all of them
// for a nil filter).
func (ix *Store) Count(f Filter) (int, error) {
	snap, err := ix.acquire()
	if err != nil {
		return 0, err
	}
	defer snap.release()
	if f == nil {
		return snap.live, nil
	}
	n := 0
	err = snap.each(f, func(int) bool { n++; return true })
	return n, err
}

// each calls yield with every live group row f allows, in row order,
// until yield returns false.
func (snap *snapshot) each(f Filter, yield func(row int) bool) error {
	allow, err := f.resolve(snap)
	if err != nil {
		return err
	}
	if set, ok := allow.(index.RowSet); ok {
		set.Each(func(row int) bool {
			if snap.gone.Contains(uint32(row)) || !allow.Allows(row) {
				return true
			}
			return yield(row)
		})
		return nil
	}
	for row := range snap.group.Len() {
		if !snap.gone.Contains(uint32(row)) && allow.Allows(row) && !yield(row) {
			return nil
		}
	}
	return nil
}

// ListOptions pages through a store's live records in id order.
type ListOptions struct {
	// After is the id the page starts after ("" for the first page):
	// Page.Next of the page before.
	After string
	// Limit is the records a page holds at most (0: 100).
	Limit int
	// Filter, when set, lists only the records it allows.
	Filter Filter
	// Vectors asks for each record's decoded vector (WithVector).
	Vectors bool
}

// DefaultListLimit is the records a page holds when ListOptions.Limit is 0.
const DefaultListLimit = 100

// Page is one page of List.
type Page struct {
	Records []Record
	// Next is the After of the next page; "" when this page is the last.
	Next string
}

// List returns the live records in byte order of their ids, a page at a
// time, from the current version. Writes between pages are seen by later
// pages as far as they fall after the page's id: paging by id never
// repeats or skips an id that stayed live throughout.
func (ix *Store) List(ctx context.Context, opt ListOptions) (Page, error) {
	if opt.Limit < 0 {
		return Page{}, fmt.Errorf("%w: list limit %d: must be at least 1 (0: %d)", errs.ErrArgument, opt.Limit, DefaultListLimit)
	}
	limit := cmp.Or(opt.Limit, DefaultListLimit)
	snap, err := ix.acquire()
	if err != nil {
		return Page{}, err
	}
	defer snap.release()
	sorted, err := snap.sortedIDs()
	if err != nil {
		return Page{}, err
	}
	var allow interface{ Allows(int) bool }
	if opt.Filter != nil {
		if allow, err = opt.Filter.resolve(snap); err != nil {
			return Page{}, err
		}
	}
	start, _ := slices.BinarySearchFunc(sorted, opt.After, func(e idRow, after string) int { return cmp.Compare(e.id, after) })
	if start < len(sorted) && opt.After != "" && sorted[start].id == opt.After {
		start++
	}
	var page Page
	o := getOptions{vector: opt.Vectors}
	for k := start; k < len(sorted); k++ {
		if err := ctx.Err(); err != nil {
			return Page{}, err
		}
		e := sorted[k]
		if allow != nil && !allow.Allows(e.row) {
			continue
		}
		if len(page.Records) == limit {
			page.Next = page.Records[limit-1].ID
			break
		}
		rec, err := snap.getRecord(e.row, o)
		if err != nil {
			return Page{}, err
		}
		page.Records = append(page.Records, rec)
	}
	return page, nil
}

type idRow struct {
	id  string
	row int
}

// sortedIDs returns the snapshot's live ids in byte order with their
// group rows, computed once per snapshot.
func (snap *snapshot) sortedIDs() ([]idRow, error) {
	snap.idsOnce.Do(func() {
		out := make([]idRow, 0, snap.live)
		for row := range snap.group.Len() {
			if snap.gone.Contains(uint32(row)) {
				continue
			}
			i, r := snap.group.Locate(row)
			k, err := snap.segs[i].ix.Key(r)
			if err != nil {
				snap.idsErr = err
				return
			}
			out = append(out, idRow{string(k), row})
		}
		slices.SortFunc(out, func(a, b idRow) int { return cmp.Compare(a.id, b.id) })
		snap.ids = out
	})
	return snap.ids, snap.idsErr
}

// sortedCache holds what a snapshot computes once on demand.
type sortedCache struct {
	idsOnce sync.Once
	ids     []idRow
	idsErr  error
}
