package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/eval"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/vecfile"
)

// storeEval is what vlc eval measures on a store: the store searched as
// it is (every segment, deletions honoured), its ids read as the row
// numbers of the base vectors, as vlc add without -ids numbers them.
type storeEval struct {
	s      *storeSearcher
	q, rr  *vecfile.Matrix // rr is nil without -rerank
	gt     [][]int         // in the numbering of s.rows
	closer func()
}

func (e *storeEval) Close() { e.closer() }

// storeSearcher is a store as eval.Measure searches it. Measure counts in
// rows 0..n-1; here those are the store's live ids in increasing order
// of their numbers: rows[i] is the id of position i.
type storeSearcher struct {
	st   *vlc.Store
	rows []int // live ids as numbers, increasing
	// position is id number -> its index in rows, -1 where none; sparse
	// holds it instead where the largest id is far past the live count.
	position []int32
	sparse   map[int]int32
	info     vlc.Info
	rerank   vlc.Originals
	// ef, seedProbe and scanLists are the store's SearchOptions.Ef,
	// SeedProbe and ScanLists (searchFlags.storeWalk).
	ef, seedProbe, scanLists int
}

func (s *storeSearcher) options(opt index.SearchOptions) vlc.SearchOptions {
	return vlc.SearchOptions{K: opt.K, NProbe: opt.NProbe, RerankFactor: opt.RerankFactor, Rerank: s.rerank, Ef: s.ef, SeedProbe: s.seedProbe, ScanLists: s.scanLists}
}

// pos is the position of the live id whose text is id, false where
// the store held no such live id when eval opened it.
func (s *storeSearcher) pos(id string) (int, bool) {
	n, err := strconv.Atoi(id)
	if err != nil || n < 0 || strconv.Itoa(n) != id {
		return 0, false
	}
	if s.sparse != nil {
		p, ok := s.sparse[n]
		return int(p), ok
	}
	if n >= len(s.position) || s.position[n] < 0 {
		return 0, false
	}
	return int(s.position[n]), true
}

func (s *storeSearcher) hits(found []vlc.Hit) ([]index.Hit, error) {
	out := make([]index.Hit, len(found))
	for i, h := range found {
		p, ok := s.pos(h.ID)
		if !ok {
			return nil, fmt.Errorf("%s: id %q was written during the measurement: eval measures a store no other process writes", s.st.Path(), h.ID)
		}
		out[i] = index.Hit{ID: p, Distance: h.Distance}
	}
	return out, nil
}

func (s *storeSearcher) SearchBatch(ctx context.Context, queries index.Rows, opt index.SearchOptions) ([][]index.Hit, error) {
	found, err := s.st.SearchRows(ctx, queries, s.options(opt))
	if err != nil {
		return nil, err
	}
	// The ids back to positions on all cores: this bookkeeping is eval's,
	// not the store's, and done on one core it took a third of a batch's
	// time on the device.
	out := make([][]index.Hit, len(found))
	errs := make([]error, len(found))
	par.For(len(found), 256, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			out[i], errs[i] = s.hits(found[i])
		}
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *storeSearcher) Search(q []float32, opt index.SearchOptions) ([]index.Hit, error) {
	found, err := s.st.Search(context.Background(), q, s.options(opt))
	if err != nil {
		return nil, err
	}
	return s.hits(found)
}

func (s *storeSearcher) Len() int { return len(s.rows) }

func (s *storeSearcher) EffectiveNProbe(nprobe int) int {
	return min(max(nprobe, 1), max(s.info.Lists, 1))
}

// BytesPerVector is the store's bytes (every segment and the manifest,
// deleted rows not yet compacted away included) per live vector.
func (s *storeSearcher) BytesPerVector() float64 {
	return float64(s.info.Bytes) / float64(max(s.info.Rows, 1))
}

func (s *storeSearcher) SizeRatio() float64 {
	return s.BytesPerVector() / float64(2*s.info.Dim)
}

// errIDsNotRows is openStoreEval's answer for a store whose ids are not
// row numbers.
var errIDsNotRows = errors.New("ids are not row numbers")

// openStoreEval opens path for eval when it is a store that vlc eval
// measures through the store (more than one segment, deletions, or ids
// of its own); for an index file, or a store of one segment without
// deletions or ids (the file's rows are the ids), it returns nil and eval
// reads the index file as before. A store whose ids are not the row
// numbers of the ground truth is refused, naming an id, unless it is one
// segment without deletions, which eval reads by row as an index file.
func openStoreEval(path string, sf *searchFlags, gtPath, basePath string) (_ *storeEval, err error) {
	if ix, err := index.Open(path, index.Options{}); err == nil || !errors.Is(err, index.ErrNotIndex) {
		if err == nil {
			ix.Close()
		}
		return nil, nil // an index file, or an error the file path reports
	}
	// With -backend, the store's segments are searched on the device
	// (vlc.OpenOptions.Device), as a Go program or vlc serve would.
	sd, err := vlc.OpenSearchDevice(sf.backend, sf.devices, sf.spreadHow)
	if err != nil {
		return nil, err
	}
	st, err := vlc.OpenWith(path, vlc.OpenOptions{Manual: true, Device: sd.Searcher})
	if err != nil {
		sd.Close()
		return nil, nil
	}
	e := &storeEval{s: &storeSearcher{st: st}}
	e.closer = func() {
		if e.rr != nil {
			e.rr.Close()
		}
		if e.q != nil {
			e.q.Close()
		}
		st.Close()
		sd.Close()
	}
	defer func() {
		if err != nil || e.s == nil {
			e.Close()
		}
	}()
	if e.s.info, err = st.Info(); err != nil {
		return nil, err
	}
	in := e.s.info
	oneFile := len(in.Segments) == 1 && in.Deleted == 0
	if oneFile && !in.Segments[0].IDs {
		e.s = nil
		return nil, nil
	}
	if sf.query == "" {
		return nil, fmt.Errorf("-query is required")
	}
	if sf.k < 1 {
		return nil, fmt.Errorf("-k must be at least 1, got %d", sf.k)
	}
	if err := e.s.readIDs(context.Background()); errors.Is(err, errIDsNotRows) && oneFile {
		e.s = nil
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	if len(e.s.rows) == 0 {
		return nil, fmt.Errorf("%s holds no live vectors: nothing to measure", path)
	}
	if e.q, err = openLike(sf.query, st.Dim()); err == nil {
		err = e.q.CheckFinite()
	}
	if err != nil {
		return nil, fmt.Errorf("queries: %w", err)
	}
	top := e.s.rows[len(e.s.rows)-1]
	if sf.rerank != "" {
		if e.rr, err = openLike(sf.rerank, st.Dim()); err == nil && e.rr.Len() <= top {
			err = fmt.Errorf("%s has %d vectors: the store holds id %d, which is not one of its rows", sf.rerank, e.rr.Len(), top)
		}
		if err != nil {
			return nil, fmt.Errorf("re-rank: %w", err)
		}
		e.s.rerank = vlc.RowOriginals(e.rr)
	}
	if gtPath != "" {
		e.gt, err = e.s.liveTruth(gtPath, e.q.Len())
	} else {
		e.gt, err = e.s.exactTruth(basePath, e.q, top)
	}
	if err != nil {
		return nil, err
	}
	return e, nil
}

// readIDs lists the store's live ids, each of which must be a row number
// (decimal, no sign or leading zero), into rows and position.
func (s *storeSearcher) readIDs(ctx context.Context) error {
	opt := vlc.ListOptions{Limit: 10000}
	for {
		page, err := s.st.List(ctx, opt)
		if err != nil {
			return err
		}
		for _, rec := range page.Records {
			n, err := strconv.Atoi(rec.ID)
			if err != nil || n < 0 || strconv.Itoa(n) != rec.ID {
				return fmt.Errorf("%s: id %s is not a row number: eval reads the ground truth's rows as the store's ids, as vlc add without -ids gives them: %w", s.st.Path(), textID(rec.ID), errIDsNotRows)
			}
			s.rows = append(s.rows, n)
		}
		if opt.After = page.Next; opt.After == "" {
			break
		}
	}
	slices.Sort(s.rows)
	if len(s.rows) == 0 {
		return nil
	}
	if top := s.rows[len(s.rows)-1]; top > 8*len(s.rows)+1<<20 {
		s.sparse = make(map[int]int32, len(s.rows))
		for i, n := range s.rows {
			s.sparse[n] = int32(i)
		}
		return nil
	}
	s.position = make([]int32, s.rows[len(s.rows)-1]+1)
	for i := range s.position {
		s.position[i] = -1
	}
	for i, n := range s.rows {
		s.position[n] = int32(i)
	}
	return nil
}

// liveTruth reads the ground truth of the file at path (base row numbers,
// nearest first) and keeps, in each row, the ids the store holds live:
// with the rows it deleted or never held left out, the rest are still its
// nearest, in order. Each row must keep min(10, live) of them.
func (s *storeSearcher) liveTruth(path string, queries int) ([][]int, error) {
	gt, err := eval.ReadGroundTruth(path, queries, min(10, len(s.rows)))
	if err != nil {
		return nil, err
	}
	need := min(10, len(s.rows))
	for i, r := range gt {
		kept := r[:0]
		for _, id := range r {
			if p, ok := s.pos(strconv.Itoa(id)); ok {
				kept = append(kept, p)
			}
		}
		if len(kept) < need {
			return nil, fmt.Errorf("%s: %w: row %d names %d ids the store holds live, recall@10 needs %d (the others were deleted or never added): give -base to compute the ground truth of the live vectors", path, eval.ErrGroundTruth, i, len(kept), need)
		}
		gt[i] = kept
	}
	return gt, nil
}

// exactTruth computes the 10 true neighbours of each query among the
// rows of the base file that the store holds live, by the store's metric.
func (s *storeSearcher) exactTruth(path string, q *vecfile.Matrix, top int) ([][]int, error) {
	base, err := vecfile.Open(path, vecfile.Options{Dim: s.info.Dim})
	if err != nil {
		return nil, err
	}
	defer base.Close()
	if base.Len() <= top {
		return nil, fmt.Errorf("%s: %w: %d base vectors, the store holds id %d, which is not one of its rows", path, eval.ErrBase, base.Len(), top)
	}
	return index.Exact(liveRows{base, s.rows}, q, 10, s.info.Meta.Metric), nil
}

// liveRows is the rows of base that a store holds live, in increasing
// order: position i is base row rows[i].
type liveRows struct {
	base index.Rows
	rows []int
}

func (r liveRows) Len() int                           { return len(r.rows) }
func (r liveRows) Dim() int                           { return r.base.Dim() }
func (r liveRows) Row(i int, dst []float32) []float32 { return r.base.Row(r.rows[i], dst) }
