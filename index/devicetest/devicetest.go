// Package devicetest is the conformance suite of device search: an index
// searched on a device (index.DeviceIndex) must give the CPU path's hits,
// up to float rounding, ties and the CPU's rare misses (see
// device.IndexData). A backend's tests get it from one call:
//
//	devicetest.Parity(t, dev, devicetest.Options{})
//
// The cases straddle the kernels' tiles: entry counts that are not a
// multiple of 32, lists that are empty or smaller than a tile, dimensions
// that are not a multiple of a word's levels or a power of two, every
// bits setting and every metric, batches of 1 to several hundred queries,
// nprobe from 1 to every list. Reference is the search written plainly
// in Go; its own test holds it to the same suite in CI.
package devicetest

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/synth"
	"github.com/vlc-embed/vlc/internal/vec"
	"github.com/vlc-embed/vlc/quant"
)

// Case is one index the suite builds and searches.
type Case struct {
	Name                string
	N, Dim, Lists, Bits int
	Metric              index.Metric
	IPCodes             bool
	Queries             int
	// Code is the entries' code: quant.KindPQ (Bits sets its subspaces,
	// quant.PQSubspaces), quant.KindSQ8 (Bits 8), or the rotated code
	// (zero or quant.KindRotated).
	Code quant.Kind
}

// DefaultCases are the suite's indexes. Each has one list more than
// Lists, whose anchor is far from every point: an empty list.
var DefaultCases = []Case{
	{"l2-d96-b4", 2001, 96, 24, 4, index.L2, false, 300, 0},
	{"l2-d100-b1", 1499, 100, 17, 1, index.L2, false, 97, 0},
	{"l2-d100-b2", 1499, 100, 17, 2, index.L2, false, 97, 0},
	{"l2-d768-b4", 777, 768, 9, 4, index.L2, false, 40, 0},
	{"l2-d40-b8", 900, 40, 33, 8, index.L2, false, 65, 0},
	{"cos-d64-b8", 1000, 64, 9, 8, index.Cosine, false, 64, 0},
	{"ip-d48-b4", 1000, 48, 10, 4, index.IP, false, 100, 0},
	{"ipcodes-d48-b1", 1000, 48, 10, 1, index.IP, true, 100, 0},
	{"ipcodes-d33-b4", 700, 33, 7, 4, index.IP, true, 50, 0},
}

// CodeCases are the suite's indexes of the pq and sq8 codes, which Parity
// runs after DefaultCases: subspaces of equal and unequal widths, one
// dimension wide and a word (4 bytes) not filled, entry counts that
// straddle tiles, every metric.
var CodeCases = []Case{
	{Name: "pq-l2-d128-b4", N: 2001, Dim: 128, Lists: 24, Bits: 4, Metric: index.L2, Queries: 200, Code: quant.KindPQ},
	{Name: "pq-cos-d100-b1", N: 1499, Dim: 100, Lists: 17, Bits: 1, Metric: index.Cosine, Queries: 97, Code: quant.KindPQ},
	{Name: "pq-ipcodes-d48-b2", N: 1000, Dim: 48, Lists: 10, Bits: 2, Metric: index.IP, IPCodes: true, Queries: 100, Code: quant.KindPQ},
	{Name: "pq-ip-d33-b8", N: 700, Dim: 33, Lists: 7, Bits: 8, Metric: index.IP, Queries: 50, Code: quant.KindPQ},
	{Name: "sq8-l2-d96", N: 2001, Dim: 96, Lists: 24, Bits: 8, Metric: index.L2, Queries: 200, Code: quant.KindSQ8},
	{Name: "sq8-cos-d33", N: 999, Dim: 33, Lists: 9, Bits: 8, Metric: index.Cosine, Queries: 64, Code: quant.KindSQ8},
	{Name: "sq8-ip-d40", N: 900, Dim: 40, Lists: 33, Bits: 8, Metric: index.IP, Queries: 65, Code: quant.KindSQ8},
}

// Options tune the suite.
type Options struct {
	Cases []Case // DefaultCases and CodeCases when nil
}

// rows is an in-memory index.Rows.
type rows struct {
	x    []float32
	n, d int
}

func (r rows) Len() int { return r.n }
func (r rows) Dim() int { return r.d }
func (r rows) Row(i int, dst []float32) []float32 {
	if dst == nil {
		dst = make([]float32, r.d)
	}
	copy(dst, r.x[i*r.d:(i+1)*r.d])
	return dst
}

// Built is a case's index, open, with its base vectors and queries.
type Built struct {
	Index   *index.Index
	Base    index.Rows
	Queries index.Rows
}

// Build writes c's index under dir and opens it (closed by t.Cleanup).
func Build(t testing.TB, dir string, c Case) Built {
	t.Helper()
	pts := synth.Clusters(c.N+c.Queries, c.Dim, 2*c.Lists, uint64(c.N*31+c.Dim))
	all := make([]float32, (c.N+c.Queries)*c.Dim)
	for i := range c.N + c.Queries {
		x := all[i*c.Dim : (i+1)*c.Dim]
		f16.DecodeRow(x, pts.Data[i*c.Dim:(i+1)*c.Dim])
		switch c.Metric {
		case index.Cosine:
			vec.Normalize(x)
		case index.IP:
			s := float32(0.5 + float64(i%7)/4) // norms vary: ip ranks unlike l2
			for j := range x {
				x[j] *= s
			}
		}
	}
	base := rows{all[:c.N*c.Dim], c.N, c.Dim}
	queries := rows{all[c.N*c.Dim:], c.Queries, c.Dim}
	anchors := synth.AnchorsNear(pts, c.Lists, 0.5, uint64(c.Lists))
	if c.Metric == index.Cosine {
		for a := range c.Lists {
			vec.Normalize(anchors[a*c.Dim : (a+1)*c.Dim])
		}
	}
	far := make([]float32, c.Dim)
	for j := range far {
		far[j] = 1e4
	}
	anchors = append(anchors, far...)
	m := c.Lists + 1
	assign := make([]int32, c.N)
	for i := range c.N {
		x := all[i*c.Dim : (i+1)*c.Dim]
		best, bd := 0, math.Inf(1)
		for a := range m {
			var s float64
			for j, v := range anchors[a*c.Dim : (a+1)*c.Dim] {
				s += (float64(x[j]) - float64(v)) * (float64(x[j]) - float64(v))
			}
			if s < bd {
				best, bd = a, s
			}
		}
		assign[i] = int32(best)
	}
	kind := c.Code
	if kind == 0 {
		kind = quant.KindRotated
	}
	meta := index.Meta{Code: uint32(kind), Bits: uint32(c.Bits), Metric: c.Metric, Seed: 7}
	if c.IPCodes {
		meta.Flags = index.FlagIPCodes
	}
	path := filepath.Join(dir, c.Name+".vlc")
	if err := index.Write(path, index.Plan{Rows: base, Anchors: anchors, Assign: assign, Meta: meta}); err != nil {
		t.Fatal(err)
	}
	ix, err := index.Open(path, index.Options{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return Built{ix, base, queries}
}

// Parity builds every case, uploads it to dev and checks device searches
// against the CPU's: nprobe 1, a third of the lists and all of them; k 1,
// 10 and 100; the whole query set as one batch, the first query alone
// (Search), and a re-ranked search.
func Parity(t *testing.T, dev device.Searcher, opt Options) {
	cases := opt.Cases
	if cases == nil {
		cases = append(slices.Clip(DefaultCases), CodeCases...)
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			b := Build(t, dir, c)
			di, err := b.Index.OnDevice(dev)
			if err != nil {
				t.Fatal(err)
			}
			defer di.Close()
			scale := MaxNorm(b.Base)
			for _, nprobe := range []int{1, max(2, c.Lists/3), c.Lists + 1} {
				for _, k := range []int{1, 10, 100} {
					so := index.SearchOptions{K: k, NProbe: nprobe}
					want, err := b.Index.SearchBatch(context.Background(), b.Queries, so)
					if err != nil {
						t.Fatal(err)
					}
					got, err := di.SearchBatch(context.Background(), b.Queries, so)
					if err != nil {
						t.Fatal(err)
					}
					Compare(t, fmt.Sprintf("nprobe %d, k %d", nprobe, k), b.Queries, scale, want, got)
				}
			}
			so := index.SearchOptions{K: 10, NProbe: c.Lists / 2}
			q := b.Queries.Row(0, nil)
			want, err := b.Index.Search(q, so)
			if err != nil {
				t.Fatal(err)
			}
			one, err := di.Search(q, so)
			if err != nil {
				t.Fatal(err)
			}
			Compare(t, "one query", b.Queries, scale, [][]index.Hit{want}, [][]index.Hit{one})
			so.Rerank, so.RerankFactor = b.Base, 4
			want2, err := b.Index.SearchBatch(context.Background(), b.Queries, so)
			if err != nil {
				t.Fatal(err)
			}
			got2, err := di.SearchBatch(context.Background(), b.Queries, so)
			if err != nil {
				t.Fatal(err)
			}
			Compare(t, "re-ranked", b.Queries, scale, want2, got2)
			Filtered(t, b, di, c.Lists)
		})
	}
}

// FilterShares are the shares of rows the filtered cases allow.
var FilterShares = []float64{0.5, 0.05, 0.01}

// Filtered checks filtered device searches of b's index (on di) against
// the CPU's: for each of FilterShares, a filter known only by Allows and
// an index.RowSet (which the CPU probes wider, or scores row by row when
// small), nprobe 1 and a third of the lists, k 10; and every hit allowed.
func Filtered(t *testing.T, b Built, di *index.DeviceIndex, lists int) {
	t.Helper()
	scale := MaxNorm(b.Base)
	for _, share := range FilterShares {
		for _, set := range []bool{false, true} {
			f := NewFilter(b.Index.Len(), share, set)
			for _, nprobe := range []int{1, max(2, lists/3)} {
				what := fmt.Sprintf("filter %g (set %v), nprobe %d", share, set, nprobe)
				so := index.SearchOptions{K: 10, NProbe: nprobe, Filter: f}
				want, err := b.Index.SearchBatch(context.Background(), b.Queries, so)
				if err != nil {
					t.Fatal(err)
				}
				got, err := di.SearchBatch(context.Background(), b.Queries, so)
				if err != nil {
					t.Fatal(err)
				}
				for i, hs := range got {
					for _, h := range hs {
						if !f.Allows(h.ID) {
							t.Fatalf("%s: query %d: row %d is not allowed", what, i, h.ID)
						}
					}
				}
				Compare(t, what, b.Queries, scale, want, got)
			}
		}
	}
}

// Filter allows a share of the rows 0..n-1, spread by a hash of the row.
type Filter struct {
	allow []bool
	count int
	set   bool
}

// NewFilter allows about share of the rows 0..n-1 (at least one). With
// set it is an index.RowSet.
func NewFilter(n int, share float64, set bool) index.Filter {
	f := &Filter{allow: make([]bool, n), set: set}
	for r := range n {
		h := uint64(r+1) * 0x9e3779b97f4a7c15
		if float64(h>>11)/(1<<53) < share || (f.count == 0 && r == n-1) {
			f.allow[r] = true
			f.count++
		}
	}
	if set {
		return rowSet{f}
	}
	return f
}

// Allows reports whether row is allowed.
func (f *Filter) Allows(row int) bool { return row >= 0 && row < len(f.allow) && f.allow[row] }

// rowSet is a Filter that is an index.RowSet.
type rowSet struct{ *Filter }

func (s rowSet) Count() int { return s.count }
func (s rowSet) Each(yield func(int) bool) {
	for r, ok := range s.allow {
		if ok && !yield(r) {
			return
		}
	}
}

// MaxNorm is the largest |x|^2 of the rows: the scale of Compare's
// tolerance.
func MaxNorm(r index.Rows) float64 {
	var big float64
	x := make([]float32, r.Dim())
	for i := range r.Len() {
		big = max(big, float64(vec.Dot(r.Row(i, x), r.Row(i, x))))
	}
	return big
}

// Compare checks device hits got against the CPU's want, query by query:
// as many hits; at every rank distances within 2e-5 (|q|^2 + scale) of
// each other, scale being the base's largest |x|^2 (float rounding); a
// different id at a rank only where its distance ties, within that
// tolerance, with the CPU's hit of the same id or with the CPU's last
// hit (the boundary). A query whose device hits are better than the CPU's
// beyond the tolerance is a CPU miss (a first estimate's bound failed):
// allowed in at most 1 query in 200, at least 1.
func Compare(t testing.TB, what string, queries index.Rows, scale float64, want, got [][]index.Hit) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d results, want %d", what, len(got), len(want))
	}
	misses, bad := 0, 0
	x := make([]float32, queries.Dim())
	for i := range want {
		w, g := want[i], got[i]
		q := queries.Row(i, x)
		tol := 2e-5 * (float64(vec.Dot(q, q)) + scale)
		if len(g) != len(w) {
			t.Errorf("%s: query %d: %d hits, want %d", what, i, len(g), len(w))
			bad++
			continue
		}
		missed := false
		for r := range w {
			diff := float64(g[r].Distance) - float64(w[r].Distance)
			if diff < -tol {
				missed = true
				break
			}
			if diff > tol || math.IsNaN(diff) {
				if bad++; bad <= 5 {
					t.Errorf("%s: query %d rank %d: distance %g, cpu %g (tolerance %.3g)", what, i, r, g[r].Distance, w[r].Distance, tol)
				}
				break
			}
			if g[r].ID == w[r].ID {
				continue
			}
			j := slices.IndexFunc(w, func(h index.Hit) bool { return h.ID == g[r].ID })
			boundary := math.Abs(float64(g[r].Distance)-float64(w[len(w)-1].Distance)) <= tol
			if !(j >= 0 && math.Abs(float64(w[j].Distance)-float64(g[r].Distance)) <= tol) && !boundary {
				if bad++; bad <= 5 {
					t.Errorf("%s: query %d rank %d: id %d (%g), cpu id %d (%g)", what, i, r, g[r].ID, g[r].Distance, w[r].ID, w[r].Distance)
				}
				break
			}
		}
		if missed {
			misses++
		}
	}
	if misses > max(1, len(want)/200) {
		t.Errorf("%s: %d of %d queries have device hits nearer than the cpu's: more than the cpu's rare misses", what, misses, len(want))
	}
	if misses > 0 {
		t.Logf("%s: %d of %d queries with device hits nearer than the cpu's (cpu misses)", what, misses, len(want))
	}
}
