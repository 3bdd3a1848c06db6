package graph

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/par"
)

// DefaultEf is the beam width Searcher uses when Ef is 0.
const DefaultEf = 64

// Searcher searches an index through its graph with the index's own
// options, so that a caller (vlc search, vlc eval) swaps one for the
// other: it has index.Index's Search, SearchBatch, Len,
// EffectiveNProbe, BytesPerVector and SizeRatio.
type Searcher struct {
	Index *index.Index
	Graph *Graph // over Index (Open(Index), or Build)
	// Ef is the beam's width (0: DefaultEf; raised to K where below).
	Ef int
	// SeedProbe, when above 0, also starts each walk from the hits of
	// the index's own search of this many lists (Ef of them): what keeps
	// the walk in the query's cluster where clusters lie far apart
	// (graph/README.md, 200,000 x 768), at the cost of that search.
	SeedProbe int
	// ScanLists, when above 0, also starts each walk from every row of
	// the query's this many nearest lists, scored by the graph's own
	// codes (SearchOptions.ScanLists): SeedProbe's effect without the
	// index's codes.
	ScanLists int
}

// Search returns the K nearest rows a walk of width Ef finds (the
// graph's Search). Of opt, K, Rerank and RerankFactor (RerankFactor*K
// rows re-ranked, at most Ef; default 10) apply; NProbe does not (the
// lists scanned are SeedProbe's). A Filter is the graph's filtered
// search (SearchOptions.Filter: walked or scanned by the share it
// allows); the seeds are not filtered, as they only start the walk.
func (s *Searcher) Search(q []float32, opt index.SearchOptions) ([]index.Hit, error) {
	if opt.K < 1 {
		return nil, argErr("k must be at least 1, got %d", opt.K)
	}
	ef := s.Width(opt.K)
	o := SearchOptions{K: opt.K, Ef: ef, Filter: opt.Filter, ScanLists: s.ScanLists}
	if opt.Rerank != nil {
		o.Rerank = opt.Rerank
		o.RerankCount = opt.K * max(opt.RerankFactor, 0)
		if o.RerankCount == 0 {
			o.RerankCount = opt.K * 10
		}
	}
	if s.SeedProbe > 0 {
		seeds, err := s.Index.Search(q, index.SearchOptions{K: ef, NProbe: s.SeedProbe})
		if err != nil {
			return nil, err
		}
		o.Seeds = make([]uint32, len(seeds))
		for k, h := range seeds {
			o.Seeds[k] = uint32(h.ID)
		}
	}
	return s.Graph.Search(q, o)
}

// Width is the beam width of a search for k hits: Ef (DefaultEf for 0),
// at least k.
func (s *Searcher) Width(k int) int {
	ef := s.Ef
	if ef == 0 {
		ef = DefaultEf
	}
	return max(ef, k)
}

// SearchBatch searches every query, on all cores; ctx is checked
// between blocks of queries.
func (s *Searcher) SearchBatch(ctx context.Context, queries index.Rows, opt index.SearchOptions) ([][]index.Hit, error) {
	if queries.Dim() != s.Index.Dim() {
		return nil, fmt.Errorf("%w: queries have dimension %d, the index %d", index.ErrDim, queries.Dim(), s.Index.Dim())
	}
	n := queries.Len()
	hits := make([][]index.Hit, n)
	var (
		mu     sync.Mutex
		failed error
	)
	block := min(64, max(1, (n+runtime.GOMAXPROCS(0)-1)/runtime.GOMAXPROCS(0)))
	par.For(n, block, func(lo, hi int) {
		q := make([]float32, queries.Dim())
		for i := lo; i < hi; i++ {
			err := ctx.Err()
			if err == nil {
				hits[i], err = s.Search(queries.Row(i, q), opt)
			}
			if err != nil {
				mu.Lock()
				if failed == nil {
					failed = fmt.Errorf("query %d: %w", i, err)
				}
				mu.Unlock()
				return
			}
		}
	})
	if failed != nil {
		return nil, failed
	}
	return hits, nil
}

// Len is the index's rows.
func (s *Searcher) Len() int { return s.Index.Len() }

// EffectiveNProbe is the lists a search scans: SeedProbe's, clamped to
// the index's lists; the nprobe asked for is not used.
func (s *Searcher) EffectiveNProbe(int) int {
	if s.SeedProbe <= 0 {
		return 0
	}
	return s.Index.EffectiveNProbe(s.SeedProbe)
}

// BytesPerVector and SizeRatio are the index file's, graph included.
func (s *Searcher) BytesPerVector() float64 { return s.Index.BytesPerVector() }
func (s *Searcher) SizeRatio() float64      { return s.Index.SizeRatio() }
