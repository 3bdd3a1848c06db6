package store

import (
	"sync"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/vlc-embed/vlc/filter"
	"github.com/vlc-embed/vlc/index"
)

// Match is a filter over the JSON payloads (package filter: Parse reads
// the syntax of Chroma and MongoDB, and builders make the same in Go).
//
// It is planned per version of the store. Each segment keeps an index of
// the payload fields the collection's Schema.Indexed names, built once
// per segment file: where the filter reads only those fields, its rows
// come from the index exactly, and the search takes them as an
// allow-list (scoring each of them when they are few, probing more lists
// when they are many). Otherwise the index narrows the candidates as far
// as it can, and when they are at most a twentieth of the rows each is
// checked against the payload up front; beyond that the payload is
// checked during the scan, as Where does.
func Match(e filter.Expr) Filter { return &exprFilter{e: e} }

// ParseFilter reads a filter in the JSON syntax of Chroma and MongoDB
// (package filter): {"cat": "a"}, {"n": {"$gte": 10}}, {"$or": [...]}.
// Its errors wrap errs.ErrArgument and name where the filter is wrong.
func ParseFilter(data []byte) (Filter, error) {
	e, err := filter.Parse(data)
	if err != nil {
		return nil, err
	}
	return Match(e), nil
}

type exprFilter struct {
	e    filter.Expr
	mu   sync.Mutex
	snap *snapshot // the version f was resolved for
	f    index.Filter
}

// checkUpFront is the share of the rows (1/checkUpFront) up to which the
// candidates of a filter the indexes do not answer are checked before
// the search rather than during it.
const checkUpFront = 20

func (x *exprFilter) resolve(snap *snapshot) (index.Filter, error) {
	if err := filter.Check(x.e); err != nil {
		return nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.snap == snap {
		return x.f, nil
	}
	cand := roaring.New()
	exact := true
	for i, s := range snap.segs {
		cols, err := s.columns(snap.indexedFields())
		if err != nil {
			return nil, err
		}
		rows, ok := x.e.Resolve(cols)
		exact = exact && ok
		base := uint32(snap.group.Base(i))
		if base == 0 {
			cand.Or(rows)
			continue
		}
		it := rows.Iterator()
		for it.HasNext() {
			cand.Add(base + it.Next())
		}
	}
	cand.AndNot(snap.gone)
	var f index.Filter
	n := int(cand.GetCardinality())
	est := n
	if !exact {
		est = x.estimate(snap, cand, n)
	}
	switch {
	case exact:
		f = newRowSet(cand, snap.group.Len())
	case est <= snap.group.Len()/checkUpFront:
		keep := roaring.New()
		it := cand.Iterator()
		for it.HasNext() {
			if row := it.Next(); x.matches(snap, int(row)) {
				keep.Add(row)
			}
		}
		f = newRowSet(keep, snap.group.Len())
	default:
		f = candidates{snap, x, cand, est}
	}
	x.snap, x.f = snap, f
	return f, nil
}

// matches checks a group row's payload against the filter.
func (x *exprFilter) matches(snap *snapshot, row int) bool {
	i, r := snap.group.Locate(row)
	p, err := snap.segs[i].ix.Payload(r)
	return err == nil && x.e.Match(p)
}

// sample is the candidates whose payloads estimate a filter's
// selectivity when the indexes do not answer it.
const sample = 512

// estimate returns about how many of the n candidate rows match: all of
// them counted when they are few, else a share of an even sample.
func (x *exprFilter) estimate(snap *snapshot, cand *roaring.Bitmap, n int) int {
	if n <= sample {
		k := 0
		it := cand.Iterator()
		for it.HasNext() {
			if x.matches(snap, int(it.Next())) {
				k++
			}
		}
		return k
	}
	hit := 0
	for j := range sample {
		row, err := cand.Select(uint32(j * n / sample))
		if err == nil && x.matches(snap, int(row)) {
			hit++
		}
	}
	return max(1, hit*n/sample)
}

// candidates allows the rows of a superset whose payload matches, and
// says about how many there are (est), so that the search probes as many
// more lists as a filter that selective needs.
type candidates struct {
	snap *snapshot
	x    *exprFilter
	rows *roaring.Bitmap
	est  int
}

func (c candidates) Allows(row int) bool {
	return c.rows.Contains(uint32(row)) && c.x.matches(c.snap, row)
}

func (c candidates) Count() int { return c.est }

func (c candidates) Each(yield func(row int) bool) {
	it := c.rows.Iterator()
	for it.HasNext() {
		if row := int(it.Next()); c.x.matches(c.snap, row) && !yield(row) {
			return
		}
	}
}

// indexedFields are the payload fields the collection indexes.
func (snap *snapshot) indexedFields() []string {
	if snap.man.Schema == nil {
		return nil
	}
	return snap.man.Schema.Indexed
}

// columns returns the segment's payload index of fields, built once (a
// segment file never changes, and a store's indexed fields neither).
func (s *segment) columns(fields []string) (*filter.Columns, error) {
	s.colsOnce.Do(func() {
		payload := s.ix.Payload
		if !s.ix.HasPayloads() { // no field holds anything: the index says so exactly
			payload = func(int) ([]byte, error) { return nil, nil }
		}
		s.cols, s.colsErr = filter.NewColumns(s.ix.Len(), payload, fields)
	})
	return s.cols, s.colsErr
}
