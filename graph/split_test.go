package graph

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/quant"
)

// The compact adjacency gives every row's neighbours, by row, at sizes
// around its block of 8 rows, for rows of 0, 1 and r neighbours and gaps
// of 0 (neighbours in a row) up to n-1, for r 6 and 40. What it reads
// from a file passes its check.
func TestCompactSlots(t *testing.T) {
	for _, nr := range [][2]int{{1, 6}, {2, 6}, {7, 6}, {8, 6}, {9, 6}, {17, 6}, {255, 6}, {256, 6}, {257, 6}, {1<<16 + 1, 6}, {1000, 40}, {1<<16 + 1, 40}} {
		n, r := nr[0], nr[1]
		rows := min(n, 300)
		s := slots{ids: make([]uint32, rows*r), r: r}
		for i := range rows {
			count := min(i%(r+1), n)
			seen := map[uint32]bool{}
			for k := range r {
				s.ids[i*r+k] = noEdge
				if k >= count {
					continue
				}
				v := uint32((i*7 + k*13) % n)
				switch {
				case i%5 == 0:
					v = uint32((i + k) % n) // gaps of 0
				case i%5 == 1 && k == 1:
					v = uint32(n - 1) // the widest gap
				}
				for seen[v] {
					v = (v + 1) % uint32(n)
				}
				seen[v] = true
				s.ids[i*r+k] = v
			}
		}
		c, err := compact(s, n)
		if err != nil {
			t.Fatal(err)
		}
		if e := c.check(rows); rows == n && e != "" {
			t.Fatalf("n %d: check: %s", n, e)
		}
		for i := range rows {
			want := s.neighbours(nil, uint32(i))
			slices.Sort(want)
			if got := c.neighbours(nil, uint32(i)); !slices.Equal(got, want) {
				t.Fatalf("n %d, r %d, row %d: compact neighbours %v, want %v", n, r, i, got, want)
			}
		}
	}
}

// A split code's scores are the b-bit estimate, computed here from the
// levels quant.Rotated chooses, and the walk's the estimate of their top 4
// bits; the graph finds more of the true rows with each added bit.
func TestSplitCode(t *testing.T) {
	base, queries := clustered(2000, 50, 32)
	ix := writeIndex(t, base, 16, quant.KindRotated, 4, index.L2)
	truth := index.Exact(base, queries, 10, index.L2)
	d := base.d
	plain, err := Build(context.Background(), ix, base, BuildOptions{NProbe: 4})
	if err != nil {
		t.Fatal(err)
	}
	want4 := recallAt10(t, plain, queries, truth, SearchOptions{K: 10, Ef: 64})
	list := make([]int, base.n)
	if err := ix.Codes(func(row, a int, _ []byte) error { list[row] = a; return nil }); err != nil {
		t.Fatal(err)
	}
	rot := quant.NewRotation(d, ix.Meta().CodeSpec().Seed)
	anchors := ix.Anchors()
	prev := want4
	for _, b := range []int{5, 7, 8} {
		g, err := Build(context.Background(), ix, base, BuildOptions{NProbe: 4, Bits: b, Compact: true})
		if err != nil {
			t.Fatal(err)
		}
		code := quant.NewRotated(d, b, ix.Meta().CodeSpec().Seed)
		sc := g.nodes.newScorer()
		q := queries.x[:d]
		sc.setQuery(q)
		pq := g.refine.query(sc, nil)
		levels := make([]uint8, d)
		for i := range base.n {
			a := list[i]
			r, qr := make([]float32, d), make([]float32, d)
			for j := range d {
				r[j] = base.x[i*d+j] - anchors[a*d+j]
				qr[j] = q[j] - anchors[a*d+j]
			}
			rot.Apply(r)
			rot.Apply(qr)
			ur := code.Levels(levels, r)
			var qq, rr, qu, u4r, qu4 float64
			half := float64(int(1)<<b-1) / 2
			for j := range d {
				u, u4 := float64(levels[j])-half, float64(levels[j]>>(b-4))-7.5
				qq += float64(qr[j]) * float64(qr[j])
				rr += float64(r[j]) * float64(r[j])
				qu += float64(qr[j]) * u
				u4r += float64(r[j]) * u4
				qu4 += float64(qr[j]) * u4
			}
			want := qq + rr - 2*rr/ur*qu
			want4 := qq + rr - 2*rr/u4r*qu4
			// K - K4 and the ratio of the B's are float16: 2e-3 of
			// the distance covers their rounding at 5 bits, where
			// K - K4 is largest.
			tol := 2e-3 * math.Max(1, want)
			if got := float64(g.refine.score(sc, pq, uint32(i))); math.Abs(got-want) > tol {
				t.Fatalf("%d bits, row %d: score %v, estimate %v", b, i, got, want)
			}
			if got := float64(sc.score(uint32(i))); math.Abs(got-want4) > tol {
				t.Fatalf("%d bits, row %d: walk's score %v, 4-bit estimate %v", b, i, got, want4)
			}
		}
		got := recallAt10(t, g, queries, truth, SearchOptions{K: 10, Ef: 64})
		t.Logf("%d bits: recall@10 %.3f, the index's 4-bit code %.3f", b, got, want4)
		if got <= prev || b >= 7 && got < 0.95 {
			t.Errorf("%d bits: recall@10 %.3f, want above %.3f (the 4-bit code's, or the narrower split's) and at 7 bits and more 0.95", b, got, prev)
		}
		prev = got
	}
	for _, b := range []int{-1, 4, 9} {
		if _, err := Build(context.Background(), ix, base, BuildOptions{Bits: b}); !errors.Is(err, ErrArgument) {
			t.Errorf("bits %d: %v, want ErrArgument", b, err)
		}
	}
}
