package vlc_test

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/quant"
	"github.com/vlc-embed/vlc/vecfile"
)

func rows(n, d int, seed uint64) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 5))
	out := make([][]float32, n)
	for i := range out {
		out[i] = make([]float32, d)
		for j := range out[i] {
			out[i][j] = float32(rng.NormFloat64())
		}
	}
	return out
}

// compressAndOpen compresses rows (written as .fvecs) and opens the index.
func compressAndOpen(t *testing.T, rs [][]float32, opt vlc.Options) (*index.Index, *vecfile.Matrix) {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.fvecs"), filepath.Join(dir, "out.vlc")
	if err := vecfile.WriteFvecs(in, rs); err != nil {
		t.Fatal(err)
	}
	if _, err := vlc.Compress(context.Background(), in, out, opt); err != nil {
		t.Fatal(err)
	}
	ix, err := index.Open(out, index.Options{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	base, err := vecfile.Open(in, vecfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { base.Close() })
	return ix, base
}

// checkHits checks the shape every search result must have: want hits,
// distinct ids in range, finite distances, nearest first.
func checkHits(t *testing.T, hits []index.Hit, want, n int) {
	t.Helper()
	if len(hits) != want {
		t.Fatalf("%d hits, want %d", len(hits), want)
	}
	seen := map[int]bool{}
	for i, h := range hits {
		if h.ID < 0 || h.ID >= n || seen[h.ID] {
			t.Fatalf("hit %d: id %d (n %d, repeated %v)", i, h.ID, n, seen[h.ID])
		}
		seen[h.ID] = true
		if math.IsNaN(float64(h.Distance)) || math.IsInf(float64(h.Distance), 0) {
			t.Fatalf("hit %d: distance %v", i, h.Distance)
		}
		if i > 0 && h.Distance < hits[i-1].Distance {
			t.Fatalf("hits not sorted at %d", i)
		}
	}
}

// Valid but awkward inputs compress, open and search: degenerate
// clusters, tiny and large dimensions, k beyond n, nprobe beyond the
// lists. (Zero vectors under cosine are refused: TestCosineRefusesZeroVector.)
func TestAwkwardInputs(t *testing.T) {
	same := rows(1, 8, 1)[0]
	identical := make([][]float32, 300)
	zeros := make([][]float32, 300)
	for i := range identical {
		identical[i] = slices.Clone(same)
		zeros[i] = make([]float32, 8)
	}
	distinct := rows(5, 16, 2)
	dups := make([][]float32, 1000)
	for i := range dups {
		dups[i] = slices.Clone(distinct[i%5])
	}
	huge := rows(200, 8, 3) // cosine: magnitudes whose squares overflow float32
	for i := range huge {
		for j := range huge[i] {
			huge[i][j] *= 1e20
		}
	}
	for _, c := range []struct {
		name string
		rows [][]float32
		opt  vlc.Options
	}{
		{"300 identical vectors", identical, vlc.Options{}},
		{"300 identical vectors, 1 bit, cosine", identical, vlc.Options{Bits: 1, Metric: "cosine"}},
		{"300 zero vectors, ip", zeros, vlc.Options{Metric: "ip", Anchors: 3}},
		{"1000 copies of 5 vectors", dups, vlc.Options{}},
		{"1000 copies of 5 vectors, 2 bits, ip", dups, vlc.Options{Bits: 2, Metric: "ip"}},
		{"d = 1", rows(500, 1, 4), vlc.Options{}},
		{"d = 1, 1 bit", rows(500, 1, 4), vlc.Options{Bits: 1}},
		{"d = 4096", rows(200, 4096, 5), vlc.Options{Anchors: 4, MaxIter: 5}},
		{"d = 4096, 1 bit, cosine", rows(200, 4096, 5), vlc.Options{Anchors: 4, MaxIter: 5, Bits: 1, Metric: "cosine"}},
		{"n = anchors = 1", rows(1, 8, 6), vlc.Options{Anchors: 1}},
		{"n = anchors = 7", rows(7, 8, 6), vlc.Options{Anchors: 7}},
		{"float32 beyond 1e20, cosine", huge, vlc.Options{Metric: "cosine"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ix, base := compressAndOpen(t, c.rows, c.opt)
			n, m := ix.Len(), int(ix.Meta().M)
			if n != len(c.rows) {
				t.Fatalf("index holds %d vectors, want %d", n, len(c.rows))
			}
			for _, qi := range []int{0, n / 2, n - 1} {
				q := base.Row(qi, nil)
				// nprobe beyond the lists scans them all; k beyond n
				// returns all n vectors.
				all, err := ix.Search(q, index.SearchOptions{K: n + 10, NProbe: m + 100})
				if err != nil {
					t.Fatal(err)
				}
				checkHits(t, all, n, n)
				same, err := ix.Search(q, index.SearchOptions{K: n + 10, NProbe: m})
				if err != nil || !slices.Equal(all, same) {
					t.Fatalf("nprobe %d and %d (the lists) differ: %v", m+100, m, err)
				}
				if got := ix.EffectiveNProbe(m + 100); got != m {
					t.Errorf("EffectiveNProbe(%d) = %d, want %d", m+100, got, m)
				}
				// Re-ranked, the query itself (or an exact copy) is
				// first, at distance 0 (l2, cosine).
				hits, err := ix.Search(q, index.SearchOptions{K: min(3, n), NProbe: m, Rerank: base})
				if err != nil {
					t.Fatal(err)
				}
				checkHits(t, hits, min(3, n), n)
				if c.opt.Metric != "ip" {
					top := base.Row(hits[0].ID, nil)
					if !slices.Equal(top, q) && hits[0].Distance > 1e-6 {
						t.Errorf("query %d: top re-ranked hit %d at distance %v, want a copy of the query", qi, hits[0].ID, hits[0].Distance)
					}
				}
			}
		})
	}
}

// Bad input through the library: each error wraps a documented sentinel
// (errors.Is) and names what is wrong; nothing is written.
func TestLibraryBadInput(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(p("empty.f16"), nil, 0o644))
	must(os.WriteFile(p("seven.f16"), make([]byte, 7), 0o644))
	must(vecfile.WriteF16(p("ok.f16"), rows(40, 4, 1)))
	must(vecfile.WriteNpy(p("ok.npy"), rows(40, 4, 1), "<f4"))
	nan := rows(40, 4, 2)
	nan[5][2] = float32(math.NaN())
	must(vecfile.WriteF16(p("nan.f16"), nan))
	inf := rows(40, 4, 3)
	inf[17][3] = float32(math.Inf(-1))
	must(vecfile.WriteFvecs(p("inf.fvecs"), inf))
	must(os.WriteFile(p("vectors.csv"), []byte("1,2,3,4\n"), 0o644))
	must(os.Mkdir(p("folder.vlc"), 0o755))
	out := p("out.vlc")
	for _, c := range []struct {
		name   string
		in     string
		out    string
		opt    vlc.Options
		want   error
		detail []string
	}{
		{"empty file", p("empty.f16"), out, vlc.Options{Dim: 4}, vecfile.ErrEmpty, []string{"empty.f16", "0 bytes"}},
		{"size not a multiple of the row", p("seven.f16"), out, vlc.Options{Dim: 2}, vecfile.ErrSize, []string{"7 bytes", "3 bytes left over"}},
		{"dim missing", p("ok.f16"), out, vlc.Options{}, vecfile.ErrDim, []string{"needs its dimension"}},
		{"dim wrong", p("ok.npy"), out, vlc.Options{Dim: 5}, vecfile.ErrDim, []string{"file has 4", "says 5"}},
		{"dim negative", p("ok.f16"), out, vlc.Options{Dim: -1}, vecfile.ErrDim, []string{"-1"}},
		{"NaN", p("nan.f16"), out, vlc.Options{Dim: 4}, vecfile.ErrNonFinite, []string{"row 5, column 2", "NaN"}},
		{"-Inf", p("inf.fvecs"), out, vlc.Options{}, vecfile.ErrNonFinite, []string{"row 17, column 3", "-Inf"}},
		{"n smaller than anchors", p("ok.f16"), out, vlc.Options{Dim: 4, Anchors: 41}, anneal.ErrTooFewPoints, []string{"40 vectors", "41 anchors"}},
		{"bits not supported", p("ok.f16"), out, vlc.Options{Dim: 4, Bits: 3}, quant.ErrBits, []string{"3"}},
		{"unknown extension", p("vectors.csv"), out, vlc.Options{Dim: 4}, vecfile.ErrFormat, []string{`".csv"`}},
		{"missing input", p("nope.f16"), out, vlc.Options{Dim: 4}, fs.ErrNotExist, []string{"nope.f16"}},
		{"output in a missing folder", p("ok.f16"), p("no/such/out.vlc"), vlc.Options{Dim: 4}, fs.ErrNotExist, []string{"no/such/out.vlc"}},
		{"unknown metric", p("ok.f16"), out, vlc.Options{Dim: 4, Metric: "manhattan"}, index.ErrMetric, []string{"manhattan"}},
		{"unknown backend", p("ok.f16"), out, vlc.Options{Dim: 4, Backend: "abacus"}, device.ErrNoBackend, []string{"abacus"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sum, err := vlc.Compress(context.Background(), c.in, c.out, c.opt)
			if !errors.Is(err, c.want) || sum != nil {
				t.Fatalf("Compress = %v, %v; want %v", sum, err, c.want)
			}
			for _, d := range c.detail {
				if !strings.Contains(err.Error(), d) {
					t.Errorf("error %q does not contain %q", err, d)
				}
			}
			if _, err := os.Stat(c.out); err == nil {
				t.Errorf("a failing Compress created %s", c.out)
			}
		})
	}
	// The input as output is refused (the index would replace the vectors).
	before, _ := os.ReadFile(p("ok.f16"))
	if _, err := vlc.Compress(context.Background(), p("ok.f16"), p("ok.f16"), vlc.Options{Dim: 4}); err == nil || !strings.Contains(err.Error(), "is the input file") {
		t.Errorf("output is the input: %v", err)
	}
	if after, _ := os.ReadFile(p("ok.f16")); !slices.Equal(after, before) {
		t.Error("the input changed")
	}
	// An output that is a folder is refused before any work.
	if _, err := vlc.Compress(context.Background(), p("ok.f16"), p("folder.vlc"), vlc.Options{Dim: 4}); err == nil || !strings.Contains(err.Error(), "is a folder") {
		t.Errorf("output is a folder: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("left behind %s", e.Name())
		}
	}

	// Searching with a query of the wrong dimension, or not finite.
	ix, _ := compressAndOpen(t, rows(50, 4, 9), vlc.Options{Anchors: 3})
	for _, c := range []struct {
		name string
		q    []float32
		opt  index.SearchOptions
		want error
	}{
		{"query of dimension 3", []float32{1, 2, 3}, index.SearchOptions{K: 1}, index.ErrDim},
		{"query of dimension 5", []float32{1, 2, 3, 4, 5}, index.SearchOptions{K: 1}, index.ErrDim},
		{"query with NaN", []float32{1, float32(math.NaN()), 3, 4}, index.SearchOptions{K: 1}, index.ErrArgument},
		{"query with +Inf", []float32{1, 2, float32(math.Inf(1)), 4}, index.SearchOptions{K: 1}, index.ErrArgument},
		{"query too large (l2)", []float32{1e20, 1e20, 1, 4}, index.SearchOptions{K: 1}, index.ErrArgument},
		{"k 0", []float32{1, 2, 3, 4}, index.SearchOptions{K: 0}, index.ErrArgument},
		{"re-rank file of other dimension", []float32{1, 2, 3, 4}, index.SearchOptions{K: 1, Rerank: mustMatrix(t, p("ok.npy"), 0), RerankFactor: 2}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ix.Search(c.q, c.opt)
			if c.want == nil {
				return // checked below
			}
			if !errors.Is(err, c.want) {
				t.Errorf("Search = %v, want %v", err, c.want)
			}
		})
	}
	// A re-rank file with fewer rows than the index is an argument error.
	short := mustMatrix(t, p("ok.npy"), 0) // 40 rows of 4; the index has 50
	for i := range 20 {
		if _, err := ix.Search([]float32{float32(i), 0, 0, 0}, index.SearchOptions{K: 50, NProbe: 3, Rerank: short}); !errors.Is(err, index.ErrArgument) {
			t.Fatalf("re-rank with 40 rows for 50 vectors: %v, want ErrArgument", err)
		}
	}
}

func mustMatrix(t *testing.T, path string, dim int) *vecfile.Matrix {
	t.Helper()
	m, err := vecfile.Open(path, vecfile.Options{Dim: dim})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}
