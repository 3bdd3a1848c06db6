package graph

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/vec"
	"github.com/vlc-embed/vlc/quant"
)

// The tolerance between a graph whose candidates came from another search
// than the CPU index's (a device's: its estimates may order near ties
// otherwise, so a row's last candidates may differ) and the CPU's graph
// of the same rows and options (graph/README.md, "Build on a GPU"):
//
//   - at least minShared of the CPU graph's edges (row i -> row j) are in
//     the other graph too, and
//   - recall@10 of a search re-ranked from the vectors at ef toleranceEf
//     (where the walk still misses some of the ten: the graph matters)
//     is within maxRecallDiff of the CPU graph's, either way.
const (
	minShared     = 0.95
	maxRecallDiff = 0.01
	toleranceEf   = 16
)

// graphDiff is how far a graph is from a reference graph.
type graphDiff struct {
	shared            float64 // of the reference's edges, the share the graph has too
	refRecall, recall float64 // recall@10 re-ranked at toleranceEf
}

func (d graphDiff) String() string {
	return fmt.Sprintf("%.4f of the edges shared, recall@10 at ef %d %.4f against %.4f", d.shared, toleranceEf, d.recall, d.refRecall)
}

// sharedEdges is the share of ref's edges (row i -> row j) that g has
// too.
func sharedEdges(ref, g *Graph) float64 {
	total, shared := 0, 0
	for i := range ref.Len() {
		other := g.Neighbours(i)
		for _, j := range ref.Neighbours(i) {
			total++
			if slices.Contains(other, j) {
				shared++
			}
		}
	}
	return float64(shared) / float64(total)
}

// compareGraphs measures g against ref and returns an error when g is
// outside the tolerance.
func compareGraphs(t *testing.T, ref, g *Graph, base, queries memRows, truth [][]int) (graphDiff, error) {
	t.Helper()
	opt := SearchOptions{K: 10, Ef: toleranceEf, Rerank: base}
	d := graphDiff{shared: sharedEdges(ref, g), refRecall: recallAt10(t, ref, queries, truth, opt), recall: recallAt10(t, g, queries, truth, opt)}
	var errs []error
	if d.shared < minShared {
		errs = append(errs, fmt.Errorf("%.4f of the edges shared, want at least %.2f", d.shared, minShared))
	}
	if d.recall < d.refRecall-maxRecallDiff || d.recall > d.refRecall+maxRecallDiff {
		errs = append(errs, fmt.Errorf("recall@10 at ef %d %.4f against %.4f: more than %.2f apart", toleranceEf, d.recall, d.refRecall, maxRecallDiff))
	}
	return d, errors.Join(errs...)
}

// sameBytes says where two graphs differ, or "" when they do not.
func sameBytes(a, b *Graph) string {
	switch {
	case a.entry != b.entry:
		return "entry"
	case !slices.Equal(a.reps, b.reps):
		return "starting rows"
	case !bytes.Equal(a.adj.data, b.adj.data):
		return "adjacency"
	case (a.compact == nil) != (b.compact == nil) || a.compact != nil && (!bytes.Equal(a.compact.data, b.compact.data) || !slices.Equal(a.compact.offs, b.compact.offs)):
		return "compact adjacency"
	case !bytes.Equal(a.nodes.data, b.nodes.data):
		return "node records"
	case (a.refine == nil) != (b.refine == nil) || a.refine != nil && !bytes.Equal(a.refine.data, b.refine.data):
		return "split code"
	case a.opt != b.opt:
		return fmt.Sprintf("options %+v and %+v", a.opt, b.opt)
	}
	return ""
}

// With the CPU index (or a Group of it) as the Searcher, the candidates
// come from one batched search (here in batches of 700 rows, the last
// one short) and the graph is the one the search row by row gives, byte
// for byte, whatever the options; the tolerance then finds every edge
// shared and the same recall.
func TestSearcherSameGraph(t *testing.T) {
	n := 3000
	if testing.Short() { // two batches, the last short
		n = 1200
	}
	base, queries := clustered(n, 100, 32)
	ix := writeIndex(t, base, 16, quant.KindRotated, 4, index.L2)
	truth := index.Exact(base, queries, 10, index.L2)
	group, err := index.NewGroup(ix)
	if err != nil {
		t.Fatal(err)
	}
	defer func(b int) { candidateBatch = b }(candidateBatch)
	candidateBatch = 700
	ctx := context.Background()
	for _, opt := range []BuildOptions{
		{NProbe: 4},
		{NProbe: 2, Degree: 12, Passes: 2},
		{NProbe: 4, Passes: -1, Candidates: 100},
		{NProbe: 4, Bits: 7, Compact: true},
	} {
		ref, err := Build(ctx, ix, base, opt)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []struct {
			name string
			s    BatchSearcher
		}{{"index", ix}, {"group", group}} {
			o := opt
			o.Searcher = s.s
			var stages []string
			times := BuildTimes{Report: func(stage string, _ time.Duration) { stages = append(stages, stage) }}
			o.Times = &times
			g, err := Build(ctx, ix, base, o)
			if err != nil {
				t.Fatal(err)
			}
			if where := sameBytes(ref, g); where != "" {
				t.Errorf("%+v, searcher %s: the %s differs from the graph searched row by row", opt, s.name, where)
			}
			d, err := compareGraphs(t, ref, g, base, queries, truth)
			if err != nil || d.shared != 1 || d.recall != d.refRecall {
				t.Errorf("%+v, searcher %s: %v (%v), want every edge shared and the same recall", opt, s.name, d, err)
			}
			if times.Search <= 0 || times.Candidates < times.Wait || times.Total < times.Candidates+times.Prune+times.Refine {
				t.Errorf("%+v, searcher %s: times %+v", opt, s.name, times)
			}
			want := []string{"rows", "candidates", "prune", "starts", "reverse"}
			for range max(opt.withDefaults().Passes, 0) {
				want = append(want, "refine", "reverse")
			}
			if want = append(want, "connect", "pack"); !slices.Equal(stages, want) {
				t.Errorf("%+v, searcher %s: stages reported %v, want %v", opt, s.name, stages, want)
			}
		}
	}
}

// nearTies is the CPU index's search with the boundary disturbed as a
// device's rounding might: for every fifth query the last of the K hits
// is replaced by the next one (the K+1th), a change far more frequent
// than the device's (it differs only where two estimates are within
// rounding of one another).
type nearTies struct{ ix *index.Index }

func (s nearTies) SearchBatch(ctx context.Context, queries index.Rows, opt index.SearchOptions) ([][]index.Hit, error) {
	k := opt.K
	opt.K++
	hits, err := s.ix.SearchBatch(ctx, queries, opt)
	if err != nil {
		return nil, err
	}
	for i, h := range hits {
		if i%5 == 0 && len(h) > k {
			h[k-1] = h[k]
		}
		hits[i] = h[:min(k, len(h))]
	}
	return hits, nil
}

// failing is a Searcher whose search fails.
type failing struct{}

var errSearch = errors.New("the search failed")

func (failing) SearchBatch(context.Context, index.Rows, index.SearchOptions) ([][]index.Hit, error) {
	return nil, errSearch
}

// The tolerance (compareGraphs) can fail: candidates disturbed at the
// boundary stay within it, a graph of half the degree or one pruned with
// another alpha does not. A failing search fails the build, naming its
// rows; a Searcher needs nprobe.
func TestTolerance(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 1500
	}
	base, queries := clustered(n, 200, 32)
	ix := writeIndex(t, base, 16, quant.KindRotated, 4, index.L2)
	truth := index.Exact(base, queries, 10, index.L2)
	ctx := context.Background()
	opt := BuildOptions{NProbe: 4}
	ref, err := Build(ctx, ix, base, opt)
	if err != nil {
		t.Fatal(err)
	}
	near := opt
	near.Searcher = nearTies{ix}
	g, err := Build(ctx, ix, base, near)
	if err != nil {
		t.Fatal(err)
	}
	d, err := compareGraphs(t, ref, g, base, queries, truth)
	t.Logf("candidates disturbed at the boundary: %v", d)
	if err != nil {
		t.Errorf("candidates disturbed at the boundary: %v", err)
	}
	if d.shared == 1 {
		t.Errorf("candidates disturbed at the boundary: every edge shared, the disturbance did nothing")
	}
	for _, c := range []struct {
		opt    BuildOptions
		recall bool // the recall is outside the tolerance too
	}{{BuildOptions{NProbe: 4, Degree: 16}, false}, {BuildOptions{NProbe: 4, Alpha: 1.4}, false}, {BuildOptions{NProbe: 4, Degree: 3, Passes: -1}, true}} {
		g, err := Build(ctx, ix, base, c.opt)
		if err != nil {
			t.Fatal(err)
		}
		d, err := compareGraphs(t, ref, g, base, queries, truth)
		t.Logf("degree %d, alpha %v, passes %d against the defaults: %v", c.opt.Degree, c.opt.Alpha, c.opt.Passes, d)
		if err == nil || c.recall && !strings.Contains(err.Error(), "recall") {
			t.Errorf("degree %d, alpha %v, passes %d against the defaults: %v, error %v", c.opt.Degree, c.opt.Alpha, c.opt.Passes, d, err)
		}
	}
	fail := opt
	fail.Searcher = failing{}
	if _, err := Build(ctx, ix, base, fail); !errors.Is(err, errSearch) {
		t.Errorf("a failing search: %v", err)
	}
	if _, err := Build(ctx, ix, base, BuildOptions{Searcher: ix}); !errors.Is(err, ErrArgument) {
		t.Errorf("a Searcher without nprobe: %v, want ErrArgument", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Build(cancelled, ix, base, near); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// nearestAnchors finds the anchor a loop over all of them finds (the
// lowest on ties), by the triangle inequality where the anchors lie far
// apart against the rows' distances to them, by the screen of dot
// products where they do not, with any hint; for rows on an anchor and
// anchors given twice (ties), at dimensions of 8 to 768.
func TestNearestAnchors(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, c := range []struct {
		name          string
		n, m, d       int
		spread, noise float64 // anchors' spread, rows' distance to theirs
	}{
		{"apart", 3000, 64, 32, 10, 0.3},
		{"close", 3000, 64, 32, 1, 3},
		{"close-768", 500, 300, 768, 0.05, 1},
		{"apart-768", 500, 300, 768, 1, 0.01},
		{"d8", 2000, 40, 8, 1, 1},
	} {
		anchors := make([]float32, c.m*c.d)
		for k := range anchors {
			anchors[k] = float32(rng.NormFloat64() * c.spread)
		}
		copy(anchors[(c.m-1)*c.d:], anchors[:c.d]) // the last anchor is the first again
		x := make([]float32, c.n*c.d)
		hints := make([]int, c.n)
		for i := range c.n {
			a := rng.IntN(c.m)
			hints[i] = rng.IntN(c.m)
			if i%3 == 0 {
				hints[i] = a
			}
			for j := range c.d {
				x[i*c.d+j] = anchors[a*c.d+j]
				if i%50 != 0 { // every 50th row on its anchor
					x[i*c.d+j] += float32(rng.NormFloat64() * c.noise)
				}
			}
		}
		b := &builder{buildRows: &buildRows{n: c.n, d: c.d, x: x}}
		b.nearestAnchors(anchors, func(i int) int { return hints[i] })
		for i := range c.n {
			best, bd := 0, float32(math.Inf(1))
			for a := range c.m {
				if dd := vec.L2(anchors[a*c.d:(a+1)*c.d], b.row(uint32(i))); dd < bd {
					best, bd = a, dd
				}
			}
			if int(b.assign[i]) != best {
				t.Fatalf("%s: row %d: anchor %d, a loop over all finds %d", c.name, i, b.assign[i], best)
			}
		}
	}
}

// reachable counts the rows a walk from the entry reaches.
func reachable(g *Graph) int {
	seen := make([]bool, g.Len())
	seen[g.Entry()] = true
	stack, count := []int{g.Entry()}, 1
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, w := range g.Neighbours(v) {
			if !seen[w] {
				seen[w] = true
				count++
				stack = append(stack, int(w))
			}
		}
	}
	return count
}

// Every row is reached from the entry, also where the clusters lie so far
// apart that no row's candidates leave its cluster (connect then links a
// cluster from the nearest row a search from the entry finds), with and
// without the refinement pass.
func TestConnected(t *testing.T) {
	const d, k = 32, 60
	n := 3000
	if testing.Short() {
		n = 1200
	}
	rng := rand.New(rand.NewPCG(7, 7))
	centres := make([]float32, k*d)
	for i := range centres {
		centres[i] = float32(rng.NormFloat64() * 10)
	}
	x := make([]float32, n*d)
	for i := range n {
		c := i % k
		for j := range d {
			x[i*d+j] = centres[c*d+j] + float32(rng.NormFloat64()*0.1)
		}
	}
	base := memRows{x, n, d}
	ix := writeIndex(t, base, 16, quant.KindRotated, 4, index.L2)
	for _, opt := range []BuildOptions{{NProbe: 2}, {NProbe: 2, Passes: -1}, {NProbe: 2, Degree: 4}, {NProbe: 2, Degree: 2}, {NProbe: 2, Degree: 3, Passes: -1}, {NProbe: 2, Degree: 8, Passes: 2}} {
		var times BuildTimes
		opt.Times = &times
		g, err := Build(context.Background(), ix, base, opt)
		if err != nil {
			t.Fatal(err)
		}
		if r := reachable(g); r != n {
			t.Errorf("degree %d, passes %d: %d of %d rows reached from the entry", opt.Degree, opt.Passes, r, n)
		}
		if opt.Degree > 0 && opt.Degree <= 4 && times.ConnectSearches == 0 {
			t.Errorf("degree %d, passes %d: connect made no searches (%d rounds): the test no longer reaches them", opt.Degree, opt.Passes, times.ConnectRounds)
		}
		if opt.Degree != 3 {
			continue
		}
		// Connect's searches run on all cores: the graph is the same on one.
		prev := runtime.GOMAXPROCS(1)
		g1, err := Build(context.Background(), ix, base, opt)
		runtime.GOMAXPROCS(prev)
		if err != nil {
			t.Fatal(err)
		}
		if g1.Entry() != g.Entry() || !bytes.Equal(g1.adj.data, g.adj.data) {
			t.Errorf("degree 3: the graph built on one core differs from the one built on %d", prev)
		}
	}
}
