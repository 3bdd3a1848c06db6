package graph

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/synth"
	"github.com/vlc-embed/vlc/quant"
)

// memRows are float32 rows in memory.
type memRows struct {
	x    []float32
	n, d int
}

func (r memRows) Len() int { return r.n }
func (r memRows) Dim() int { return r.d }
func (r memRows) Row(i int, dst []float32) []float32 {
	return append(dst[:0], r.x[i*r.d:(i+1)*r.d]...)
}

// clustered returns n base rows and nq queries drawn from the same
// clusters (synth.Clusters, seed 3).
func clustered(n, nq, d int) (base, queries memRows) {
	pts := synth.Clusters(n+nq, d, 20, 3)
	x := make([]float32, (n+nq)*d)
	f16.DecodeRow(x, pts.Data)
	return memRows{x[:n*d], n, d}, memRows{x[n*d:], nq, d}
}

// writeIndex writes an index of rows with m anchors and the given code
// and metric, and opens it.
func writeIndex(t testing.TB, rows memRows, m int, kind quant.Kind, bits int, metric index.Metric) *index.Index {
	t.Helper()
	d := rows.d
	anchors := make([]float32, m*d)
	assign := make([]int32, rows.n)
	if rows.n > 0 {
		pts := synth.Clusters(m, d, 20, 3) // the data's clusters, other draws
		f16.DecodeRow(anchors, pts.Data)
		for i := range rows.n {
			best := math.Inf(1)
			for a := range m {
				var s float64
				for j := range d {
					e := float64(rows.x[i*d+j] - anchors[a*d+j])
					s += e * e
				}
				if s < best {
					best, assign[i] = s, int32(a)
				}
			}
		}
	}
	path := filepath.Join(t.TempDir(), "x.vlc")
	meta := index.Meta{Code: uint32(kind), Bits: uint32(bits), Metric: metric, Seed: 5}
	if err := index.Write(path, index.Plan{Rows: rows, Anchors: anchors, Assign: assign, Meta: meta}); err != nil {
		t.Fatal(err)
	}
	ix, err := index.Open(path, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix
}

func recallAt10(t *testing.T, g *Graph, queries memRows, truth [][]int, opt SearchOptions) float64 {
	t.Helper()
	found := 0
	q := make([]float32, queries.d)
	for i := range queries.n {
		hits, err := g.Search(queries.Row(i, q), opt)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != 10 {
			t.Fatalf("query %d: %d hits, want 10", i, len(hits))
		}
		for _, h := range hits {
			if slices.Contains(truth[i], h.ID) {
				found++
			}
		}
	}
	return float64(found) / float64(10*queries.n)
}

// The graph finds the true nearest rows: by the codes alone as well as the
// codes allow, and re-ranked nearly all of them.
func TestRecall(t *testing.T) {
	base, queries := clustered(2000, 100, 32)
	ix := writeIndex(t, base, 16, quant.KindRotated, 4, index.L2)
	truth := index.Exact(base, queries, 10, index.L2)
	for _, tc := range []struct {
		name string
		opt  BuildOptions
	}{
		{"exact candidates", BuildOptions{}},
		{"ivf candidates", BuildOptions{NProbe: 4}},
	} {
		g, err := Build(context.Background(), ix, base, tc.opt)
		if err != nil {
			t.Fatal(err)
		}
		codes := recallAt10(t, g, queries, truth, SearchOptions{K: 10, Ef: 64})
		exact := recallAt10(t, g, queries, truth, SearchOptions{K: 10, Ef: 64, Rerank: base})
		t.Logf("%s: recall@10 %.3f by code, %.3f re-ranked", tc.name, codes, exact)
		if codes < 0.7 || exact < 0.97 {
			t.Errorf("%s: recall@10 %.3f by code (want >= 0.7), %.3f re-ranked (want >= 0.97)", tc.name, codes, exact)
		}
	}
}

// Clusters far apart, more of them than anchors: the walk finds the
// neighbours from the nearest anchor's nearest row, from rows spread over
// its list (StartsPerList), and seeded by the index's own search of that
// list (Seeds). On this small set all three do; on 200,000 x 768 rows of
// 1,024 such clusters the first did not (graph/README.md).
func TestSeparatedClusters(t *testing.T) {
	const n, nq, d, k = 3000, 100, 64, 150
	rng := rand.New(rand.NewPCG(9, 9))
	centres := make([]float32, k*d)
	for i := range centres {
		centres[i] = float32(rng.NormFloat64())
	}
	x := make([]float32, (n+nq)*d)
	for i := range n + nq {
		c := rng.IntN(k)
		for j := range d {
			x[i*d+j] = centres[c*d+j] + 0.2*float32(rng.NormFloat64())
		}
	}
	base, queries := memRows{x[:n*d], n, d}, memRows{x[n*d:], nq, d}
	ix := writeIndex(t, base, 16, quant.KindRotated, 4, index.L2)
	truth := index.Exact(base, queries, 10, index.L2)
	const ef = 32
	single, err := Build(context.Background(), ix, base, BuildOptions{NProbe: 2, StartsPerList: 1})
	if err != nil {
		t.Fatal(err)
	}
	g, err := Build(context.Background(), ix, base, BuildOptions{NProbe: 2})
	if err != nil {
		t.Fatal(err)
	}
	one := recallAt10(t, single, queries, truth, SearchOptions{K: 10, Ef: ef, Starts: 1, Rerank: base})
	spread := recallAt10(t, g, queries, truth, SearchOptions{K: 10, Ef: ef, Starts: 1, Rerank: base})
	found, q := 0, make([]float32, d)
	for i := range nq {
		seeds, err := ix.Search(queries.Row(i, q), index.SearchOptions{K: ef, NProbe: 1})
		if err != nil {
			t.Fatal(err)
		}
		opt := SearchOptions{K: 10, Ef: ef, Starts: 1, Rerank: base}
		for _, h := range seeds {
			opt.Seeds = append(opt.Seeds, uint32(h.ID))
		}
		hits, err := single.Search(q, opt)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hits {
			if slices.Contains(truth[i], h.ID) {
				found++
			}
		}
	}
	seeded := float64(found) / (10 * nq)
	scanned := recallAt10(t, single, queries, truth, SearchOptions{K: 10, Ef: ef, Starts: 1, ScanLists: 1, Rerank: base})
	t.Logf("re-ranked recall@10 at ef %d from the nearest anchor: %.3f from its nearest row, %.3f from 8 rows spread over its list, %.3f seeded by its list's search, %.3f from its list scanned",
		ef, one, spread, seeded, scanned)
	if spread < 0.95 || seeded < 0.95 || scanned < 0.95 {
		t.Errorf("recall@10 %.3f from rows spread over the list, %.3f seeded by the list's search, %.3f from its list scanned; want all >= 0.95", spread, seeded, scanned)
	}
}

// ScanLists starts the walk from every row of the query's nearest lists:
// the same hits as those rows given as Seeds, the lists found by exact
// distance to the anchors; the index of rows by list holds every row
// once, in its record's list, in order.
func TestScanLists(t *testing.T) {
	const d = 64
	base, queries := clustered(2000, 20, d)
	ix := writeIndex(t, base, 12, quant.KindRotated, 4, index.L2)
	for _, opt := range []BuildOptions{{NProbe: 2}, {NProbe: 2, Bits: 6, Compact: true}} {
		g, err := Build(context.Background(), ix, base, opt)
		if err != nil {
			t.Fatal(err)
		}
		lists := g.listRows()
		seen := 0
		for a := range ix.Lists() {
			rows := lists.rows[lists.start[a]:lists.start[a+1]]
			if !slices.IsSorted(rows) {
				t.Fatalf("list %d's rows out of order", a)
			}
			for _, r := range rows {
				if _, _, got := g.nodes.scalars(g.nodes.data[int(r)*g.nodes.stride:]); got != uint32(a) {
					t.Fatalf("row %d indexed under list %d, its record says %d", r, a, got)
				}
			}
			seen += len(rows)
		}
		if seen != base.n || len(lists.rows) != base.n {
			t.Fatalf("%d rows indexed, want %d", seen, base.n)
		}
		anchors := ix.Anchors()
		for i := range queries.n {
			q := queries.x[i*d : (i+1)*d]
			type near struct {
				a    int
				dist float64
			}
			var order []near
			for a := range ix.Lists() {
				var s float64
				for j := range d {
					e := float64(q[j] - anchors[a*d+j])
					s += e * e
				}
				order = append(order, near{a, s})
			}
			slices.SortFunc(order, func(x, y near) int { return cmp.Compare(x.dist, y.dist) })
			var seeds []uint32
			for _, o := range order[:2] {
				seeds = append(seeds, lists.rows[lists.start[o.a]:lists.start[o.a+1]]...)
			}
			for _, ef := range []int{10, 40} {
				got, err := g.Search(q, SearchOptions{K: 10, Ef: ef, Starts: 1, ScanLists: 2})
				if err != nil {
					t.Fatal(err)
				}
				want, err := g.Search(q, SearchOptions{K: 10, Ef: ef, Starts: 1, Seeds: seeds})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("bits %d, query %d, ef %d: scanned %v, seeded with the lists' rows %v", opt.Bits, i, ef, got, want)
				}
			}
		}
	}
}

// keep leaves the pool that sorting every pair and keeping the first ef
// gives, ties in distance by row.
func TestBeamKeep(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, ef := range []int{1, 3, 16, 64} {
		for range 20 {
			n := rng.IntN(300) + 1
			ps := make([]pair, n)
			for i, id := range rng.Perm(n) {
				ps[i] = pair{float32(rng.IntN(40)), uint32(id)} // many ties
			}
			b := &beam{}
			for _, p := range ps {
				b.keep(p, ef)
			}
			want := slices.Clone(ps)
			slices.SortFunc(want, comparePairs)
			want = want[:min(n, ef)]
			got := make([]pair, len(b.pool))
			for i, p := range b.pool {
				got[i] = p.pair
			}
			if !slices.Equal(got, want) {
				t.Fatalf("ef %d, %d pairs: kept %v, want %v", ef, n, got, want)
			}
		}
	}
}

// A row's score is the index's own estimate of its distance, or with
// Decoded the distance to the vector the index decodes.
func TestScoresMatchIndex(t *testing.T) {
	base, queries := clustered(500, 1, 24)
	for _, bits := range []int{1, 2, 4, 8} {
		ix := writeIndex(t, base, 4, quant.KindRotated, bits, index.L2)
		q := queries.x
		hits, err := ix.Search(q, index.SearchOptions{K: base.n, NProbe: 4})
		if err != nil {
			t.Fatal(err)
		}
		est, err := newNodeCodes(ix, false)
		if err != nil {
			t.Fatal(err)
		}
		dec, _ := newNodeCodes(ix, true)
		se, sd := est.newScorer(), dec.newScorer()
		se.setQuery(q)
		sd.setQuery(q)
		x := make([]float32, base.d)
		for _, h := range hits {
			got := max(se.score(uint32(h.ID)), 0) // the index clamps l2 at 0
			if math.Abs(float64(got-h.Distance)) > 1e-3*math.Max(1, float64(h.Distance)) {
				t.Fatalf("%d bits, row %d: score %v, index estimate %v", bits, h.ID, got, h.Distance)
			}
			if _, err := ix.Vector(h.ID, x); err != nil {
				t.Fatal(err)
			}
			var want float64
			for j := range x {
				e := float64(q[j] - x[j])
				want += e * e
			}
			if got := sd.score(uint32(h.ID)); math.Abs(float64(got)-want) > 1e-3*math.Max(1, want) {
				t.Fatalf("%d bits, row %d: decoded score %v, distance to the decoded vector %v", bits, h.ID, got, want)
			}
		}
	}
}

// The same input gives the same graph on any number of cores.
func TestDeterministic(t *testing.T) {
	base, _ := clustered(1000, 0, 16)
	ix := writeIndex(t, base, 8, quant.KindRotated, 4, index.L2)
	for _, opt := range []BuildOptions{{Degree: 8}, {Degree: 8, NProbe: 2, Passes: 2}} {
		var first *Graph
		for _, procs := range []int{1, 2, 5} {
			prev := runtime.GOMAXPROCS(procs)
			g, err := Build(context.Background(), ix, base, opt)
			runtime.GOMAXPROCS(prev)
			if err != nil {
				t.Fatal(err)
			}
			if first == nil {
				first = g
				continue
			}
			if g.Entry() != first.Entry() || !bytes.Equal(g.adj.data, first.adj.data) {
				t.Errorf("%+v: the graph built on %d cores differs from the one built on 1", opt, procs)
			}
		}
		for i := range first.Len() {
			nb := first.Neighbours(i)
			if len(nb) == 0 || len(nb) > 8 || slices.Contains(nb, uint32(i)) {
				t.Fatalf("%+v: row %d has neighbours %v", opt, i, nb)
			}
		}
	}
}

func TestErrors(t *testing.T) {
	base, _ := clustered(200, 0, 8)
	ix := writeIndex(t, base, 4, quant.KindRotated, 4, index.L2)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		ix   *index.Index
		rows index.Rows
		opt  BuildOptions
		want error
	}{
		{"pq code", writeIndex(t, base, 4, quant.KindPQ, 4, index.L2), base, BuildOptions{}, ErrUnsupported},
		{"ip metric", writeIndex(t, base, 4, quant.KindRotated, 4, index.IP), base, BuildOptions{}, ErrUnsupported},
		{"rows short", ix, memRows{base.x[:8*100], 100, 8}, BuildOptions{}, ErrArgument},
		{"alpha below 1", ix, base, BuildOptions{Alpha: 0.5}, ErrArgument},
		{"negative degree", ix, base, BuildOptions{Degree: -1}, ErrArgument},
		{"negative starts per list", ix, base, BuildOptions{StartsPerList: -1}, ErrArgument},
		{"no index", nil, base, BuildOptions{}, ErrArgument},
	} {
		if _, err := Build(ctx, tc.ix, tc.rows, tc.opt); !errors.Is(err, tc.want) {
			t.Errorf("%s: Build error %v, want %v", tc.name, err, tc.want)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
		// Supported answers for the index as Build does.
		if tc.ix != nil && errors.Is(tc.want, ErrUnsupported) != errors.Is(Supported(tc.ix), ErrUnsupported) {
			t.Errorf("%s: Supported %v, Build wants %v", tc.name, Supported(tc.ix), tc.want)
		}
	}
	if err := Supported(ix); err != nil {
		t.Errorf("Supported of a rotated l2 index: %v", err)
	}
	g, err := Build(ctx, ix, base, BuildOptions{Degree: 8})
	if err != nil {
		t.Fatal(err)
	}
	// index.Write refuses an index without rows; a graph without rows
	// (the zero Graph) refuses searches.
	if _, err := new(Graph).Search(base.x[:8], SearchOptions{K: 1, Ef: 1}); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty graph: Search error %v, want ErrEmpty", err)
	}
	q := base.x[:8]
	nan := append([]float32{float32(math.NaN())}, q[1:]...)
	for _, tc := range []struct {
		name string
		q    []float32
		opt  SearchOptions
	}{
		{"k 0", q, SearchOptions{K: 0, Ef: 10}},
		{"ef below k", q, SearchOptions{K: 10, Ef: 9}},
		{"short query", q[:7], SearchOptions{K: 1, Ef: 10}},
		{"NaN query", nan, SearchOptions{K: 1, Ef: 10}},
		{"re-rank rows short", q, SearchOptions{K: 1, Ef: 10, Rerank: memRows{base.x[:80], 10, 8}}},
		{"negative starts", q, SearchOptions{K: 1, Ef: 10, Starts: -1}},
		{"seed beyond the rows", q, SearchOptions{K: 1, Ef: 10, Seeds: []uint32{200}}},
	} {
		if _, err := g.Search(tc.q, tc.opt); !errors.Is(err, ErrArgument) {
			t.Errorf("%s: Search error %v, want ErrArgument", tc.name, err)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
}

// Packed neighbour lists read back as built, for row counts at the edges
// of the slot width.
func TestPackedSlots(t *testing.T) {
	for _, n := range []int{1, 2, 3, 255, 256, 257, 1<<16 + 1} {
		const r = 5
		rows := min(n, 300)
		s := slots{ids: make([]uint32, rows*r), r: r}
		for i := range rows {
			for k := range r {
				s.ids[i*r+k] = uint32((i*7 + k*13) % n)
				if k > i%r {
					s.ids[i*r+k] = noEdge
				}
			}
		}
		p := pack(s, n)
		for i := range rows {
			want := s.neighbours(nil, uint32(i))
			if got := p.neighbours(nil, uint32(i)); !slices.Equal(got, want) {
				t.Fatalf("n %d, row %d: packed neighbours %v, want %v", n, i, got, want)
			}
		}
	}
}

// Reads counts the re-ranked rows at 2 bytes a value, and records of the
// codes and neighbour lists the walk touched.
func TestReads(t *testing.T) {
	base, queries := clustered(500, 2, 16)
	ix := writeIndex(t, base, 4, quant.KindRotated, 4, index.L2)
	g, err := Build(context.Background(), ix, base, BuildOptions{Degree: 8})
	if err != nil {
		t.Fatal(err)
	}
	var r Reads
	for i := range queries.n {
		if _, err := g.Search(queries.x[i*16:(i+1)*16], SearchOptions{K: 5, Ef: 20, Rerank: base, RerankCount: 15, Reads: &r}); err != nil {
			t.Fatal(err)
		}
	}
	adj, codes := g.Size()
	record := codes / int64(g.Len())
	list := (8*9 + 7) / 8 // 8 slots of bits.Len(500) = 9 bits
	if r.Searches != 2 || r.Rerank != 2*15*16*2 || r.Codes == 0 || r.Codes%record != 0 || r.Codes > 2*codes ||
		r.Adjacency == 0 || r.Adjacency%int64(list) != 0 || adj != int64((500*8*9+7)/8+8) {
		t.Errorf("reads %+v (records of %d bytes, lists of %d), sizes %d and %d", r, record, list, adj, codes)
	}
}

// Indexes of one, two and three rows: every row is found.
func TestTiny(t *testing.T) {
	base, _ := clustered(3, 0, 8)
	for n := 1; n <= 3; n++ {
		rows := memRows{base.x[:n*8], n, 8}
		ix := writeIndex(t, rows, 1, quant.KindRotated, 4, index.L2)
		g, err := Build(context.Background(), ix, rows, BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		hits, err := g.Search(rows.x[:8], SearchOptions{K: 10, Ef: 10, Rerank: rows})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != n || hits[0].ID != 0 || hits[0].Distance != 0 {
			t.Errorf("%d rows: hits %v, want all %d, row 0 first at distance 0", n, hits, n)
		}
	}
}

// Searches from several goroutines return what the same searches return
// one at a time.
func TestConcurrentSearch(t *testing.T) {
	base, queries := clustered(1000, 40, 16)
	ix := writeIndex(t, base, 8, quant.KindRotated, 4, index.L2)
	g, err := Build(context.Background(), ix, base, BuildOptions{Degree: 16})
	if err != nil {
		t.Fatal(err)
	}
	opt := SearchOptions{K: 5, Ef: 24, Rerank: base}
	want := make([][]index.Hit, queries.n)
	for i := range want {
		if want[i], err = g.Search(queries.x[i*16:(i+1)*16], opt); err != nil {
			t.Fatal(err)
		}
	}
	errc := make(chan error, 4)
	for w := range 4 {
		go func() {
			for k := range 3 * queries.n {
				i := (k + w*7) % queries.n
				got, err := g.Search(queries.x[i*16:(i+1)*16], opt)
				if err == nil && !slices.Equal(got, want[i]) {
					err = fmt.Errorf("query %d: %v, alone %v", i, got, want[i])
				}
				if err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for range 4 {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
}

// The walk's scores of 4-bit records (levels in whole 16-byte steps) come
// from the query rounded to int8 (vec.DotsU4I8); each stays within the
// rounding's bound of the float estimate, 2B delta/2 sum |l_j - 7.5|, for
// the index's own records and a split code's, whose scalars the walk
// reads in a loop of its own.
func TestScoresRounded(t *testing.T) {
	const d = 96 // 48 bytes of levels: a 32-byte step and a 16-byte one
	base, queries := clustered(600, 4, d)
	ix := writeIndex(t, base, 6, quant.KindRotated, 4, index.L2)
	own, err := newNodeCodes(ix, false)
	if err != nil {
		t.Fatal(err)
	}
	split, err := Build(context.Background(), ix, base, BuildOptions{NProbe: 2, Bits: 6})
	if err != nil {
		t.Fatal(err)
	}
	for name, nc := range map[string]*nodeCodes{"own": &own, "split": &split.nodes} {
		sc := nc.newScorer()
		if sc.w == nil {
			t.Fatalf("%s: %d bytes of levels, want the rounded path", name, nc.packed)
		}
		ids := make([]uint32, base.n)
		for i := range ids {
			ids[i] = uint32(len(ids) - 1 - i) // any order
		}
		got := make([]float32, len(ids))
		for qi := range queries.n {
			sc.setQuery(queries.x[qi*d : (qi+1)*d])
			// The weights: Pq to the nearest of delta's steps, the largest
			// at 127.
			var wsum, top int
			for j, v := range sc.pq {
				w := int(sc.wRaw[j])
				if e := math.Abs(float64(w)*float64(sc.delta) - float64(v)); e > 0.5001*float64(sc.delta) {
					t.Fatalf("%s: query %d: Pq_%d %v rounds to %d steps of %v", name, qi, j, v, w, sc.delta)
				}
				wsum, top = wsum+w, max(top, w, -w)
			}
			if top != 127 {
				t.Fatalf("%s: query %d: largest weight %d, want 127", name, qi, top)
			}
			sc.scores(ids, got)
			moved := 0
			for k, i := range ids {
				want := sc.score(i)
				rec := nc.data[int(i)*nc.stride : int(i+1)*nc.stride]
				kk, beta, a := nc.scalars(rec)
				var spread float64 // sum |l_j - 7.5|
				var dot int
				for j := range d {
					l := level(rec, j, 4)
					spread += math.Abs(float64(l) - 7.5)
					dot += int(sc.wRaw[j]) * l
				}
				if int(sc.ints[k]) != dot {
					t.Fatalf("%s: query %d, row %d: integer dot %d, want %d", name, qi, i, sc.ints[k], dot)
				}
				// The estimate from those integers, in float64.
				ql := float64(beta) * float64(sc.delta) * (float64(dot) - 7.5*float64(wsum))
				exact := float64(sc.qq) - 2*float64(sc.dots[a]) + float64(kk) - 2*ql
				slop := 1e-5 * (float64(sc.qq) + math.Abs(float64(kk)) + 2*math.Abs(float64(sc.dots[a])) + 2*math.Abs(ql))
				if diff := math.Abs(float64(got[k]) - exact); diff > slop {
					t.Fatalf("%s: query %d, row %d: rounded score %v, from its integers %v: %g apart, float32's slop %g", name, qi, i, got[k], exact, diff, slop)
				}
				bound := float64(beta)*float64(sc.delta)*spread + 10*slop
				if diff := math.Abs(float64(got[k] - want)); diff > bound {
					t.Fatalf("%s: query %d, row %d: rounded score %v, float %v: %g apart, bound %g", name, qi, i, got[k], want, diff, bound)
				}
				if got[k] != want {
					moved++
				}
			}
			if moved == 0 {
				t.Fatalf("%s: query %d: every rounded score equals the float one; the rounding is not in use", name, qi)
			}
		}
	}
}
