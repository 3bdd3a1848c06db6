package vlc_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/vecfile"
)

// exact64 returns the k nearest rows of base to q under metric, computed
// in float64 (cosine on vectors normalised in float64): the ground truth
// the numeric tests hold vlc's float32 arithmetic to.
func exact64(base [][]float32, q []float32, k int, metric string) []int {
	unit := func(x []float32) []float64 {
		var s float64
		for _, v := range x {
			s += float64(v) * float64(v)
		}
		out := make([]float64, len(x))
		for j, v := range x {
			out[j] = float64(v)
			if metric == "cosine" && s > 0 {
				out[j] /= math.Sqrt(s)
			}
		}
		return out
	}
	qq := unit(q)
	dist := make([]float64, len(base))
	for i, x := range base {
		xx := unit(x)
		for j := range qq {
			if metric == "ip" {
				dist[i] -= qq[j] * xx[j]
			} else {
				dist[i] += (qq[j] - xx[j]) * (qq[j] - xx[j])
			}
		}
	}
	ids := make([]int, len(base))
	for i := range ids {
		ids[i] = i
	}
	slices.SortStableFunc(ids, func(a, b int) int { return cmpF(dist[a], dist[b]) })
	return ids[:k]
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func overlap(got, want []int) int {
	n := 0
	for _, g := range got {
		if slices.Contains(want, g) {
			n++
		}
	}
	return n
}

// scaled returns rows(n, d, seed) times scale, in float64 then rounded.
func scaled(n, d int, seed uint64, scale float64) [][]float32 {
	rs := rows(n, d, seed)
	for _, r := range rs {
		for j, v := range r {
			r[j] = float32(float64(v) * scale)
		}
	}
	return rs
}

// numericRecall compresses rs (written as .fvecs, or .f16 when f16),
// searches every list for the first nq rows and returns recall@10 against
// exact64 and the number of distinct first hits; distances must be finite.
func numericRecall(t *testing.T, rs [][]float32, f16 bool, opt vlc.Options, nq int) (float64, int, error) {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.fvecs"), filepath.Join(dir, "out.vlc")
	var err error
	if f16 {
		in = filepath.Join(dir, "in.f16")
		err = vecfile.WriteF16(in, rs)
		opt.Dim = len(rs[0])
	} else {
		err = vecfile.WriteFvecs(in, rs)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vlc.Compress(context.Background(), in, out, opt); err != nil {
		return 0, 0, err
	}
	ix, err := index.Open(out, index.Options{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	base, err := vecfile.Open(in, vecfile.Options{Dim: opt.Dim})
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	stored := make([][]float32, base.Len()) // as the file holds them (float16 rounds)
	for i := range stored {
		stored[i] = base.Row(i, nil)
	}
	found, firsts := 0, map[int]bool{}
	for i := range nq {
		q := stored[i*7%len(stored)]
		hits, err := ix.Search(q, index.SearchOptions{K: 10, NProbe: int(ix.Meta().M)})
		if err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
		for _, h := range hits {
			if math.IsNaN(float64(h.Distance)) || math.IsInf(float64(h.Distance), 0) {
				t.Fatalf("query %d: hit %d at distance %v", i, h.ID, h.Distance)
			}
		}
		firsts[hits[0].ID] = true
		ids := make([]int, len(hits))
		for j, h := range hits {
			ids[j] = h.ID
		}
		found += overlap(ids, exact64(stored, q, 10, opt.Metric))
	}
	return float64(found) / float64(10*nq), len(firsts), nil
}

// Every metric at every bits across the float32 and float16 range: data
// scaled by 1e-30, 1e-20 (squares below float32's normal range), 6e-8
// (float16 subnormals, in an .f16 file), 1e30 (squares overflow
// float32) and to float16's largest value 65504 (an .f16 file) either
// searches as well as the same data at scale 1 (finite distances, recall
// against a float64 ground truth, different hits for different queries)
// or is refused with a sentinel naming the row: under l2 and ip, rows too
// small for float32 distances (ErrUnderflow) or beyond float16 (ErrRange);
// cosine takes every finite row.
func TestNumericExtremes(t *testing.T) {
	const n, d, nq = 300, 16, 20
	type mag struct {
		name  string
		scale float64
		f16   bool
	}
	mags := []mag{
		{"1e-30", 1e-30, false},
		{"1e-20", 1e-20, false},
		{"float16 subnormal 6e-8", 6e-8 * 8, true}, // multiples of 6e-8, all below float16's normal 6.1e-5
		{"1e30", 1e30, false},
		{"float16 max 65504", 65504.0 / 4.5, true}, // the largest |value| of the 300 x 16 rows is below 4.5
	}
	for _, metric := range []string{"l2", "ip", "cosine"} {
		for _, bits := range []int{1, 2, 4, 8} {
			opt := vlc.Options{Metric: metric, Bits: bits, Anchors: 8}
			baseRecall, _, err := numericRecall(t, rows(n, d, 11), false, opt, nq)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range mags {
				t.Run(fmt.Sprintf("%s/b=%d/%s", metric, bits, m.name), func(t *testing.T) {
					rs := scaled(n, d, 11, m.scale)
					recall, firsts, err := numericRecall(t, rs, m.f16, opt, nq)
					var want error
					switch {
					case metric == "cosine":
					case m.scale < 1e-19:
						want = vlc.ErrUnderflow
					case m.scale > 1e19:
						want = vlc.ErrRange
					}
					if want != nil {
						if !errors.Is(err, want) || !strings.Contains(err.Error(), "row 0") {
							t.Fatalf("Compress: %v, want %v naming row 0", err, want)
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					if recall < baseRecall-0.1 || firsts < nq/2 {
						t.Errorf("recall@10 %.3f (at scale 1: %.3f), %d distinct first hits of %d queries", recall, baseRecall, firsts, nq)
					}
				})
			}
		}
	}
}

// One row too small (or too large) among normal rows is refused by
// number under l2 and ip, through Compress, Build and Add; cosine takes
// it. A tiny or large query against a normal index searches like the
// query at scale 1.
func TestNumericExtremeRowsAndQueries(t *testing.T) {
	ctx := context.Background()
	for _, metric := range []string{"l2", "ip", "cosine"} {
		for _, c := range []struct {
			name  string
			scale float64
			want  error
		}{
			{"row 17 at 1e-30", 1e-30, vlc.ErrUnderflow},
			{"row 17 at 1e-45 (float32 subnormal)", 1e-45, vlc.ErrUnderflow},
			{"row 17 at 1e30", 1e30, vlc.ErrRange},
		} {
			t.Run(metric+"/"+c.name, func(t *testing.T) {
				rs := rows(100, 8, 3)
				for j := range rs[17] {
					rs[17][j] = float32(float64(rs[17][j]) * c.scale)
				}
				want := c.want
				if metric == "cosine" {
					want = nil
				}
				_, _, err := numericRecall(t, rs, false, vlc.Options{Metric: metric, Anchors: 4}, 5)
				if !errors.Is(err, want) || (want != nil && !strings.Contains(err.Error(), "row 17")) {
					t.Errorf("Compress: %v, want %v naming row 17", err, want)
				}
				docs := make([]vlc.Document, len(rs))
				for i, r := range rs {
					docs[i] = vlc.Document{Vector: r}
				}
				dir := t.TempDir()
				ix, err := vlc.Build(ctx, filepath.Join(dir, "b.vlc"), docs, vlc.Options{Metric: metric, Anchors: 4})
				if !errors.Is(err, want) || (want != nil && !strings.Contains(err.Error(), "document 17")) {
					t.Errorf("Build: %v, want %v naming document 17", err, want)
				}
				if err == nil {
					ix.Close()
				}
				ix, err = vlc.Build(ctx, filepath.Join(dir, "a.vlc"), docs[:10], vlc.Options{Metric: metric, Anchors: 2})
				if err != nil {
					t.Fatal(err)
				}
				defer ix.Close()
				_, err = ix.Add(ctx, docs[10:])
				if !errors.Is(err, want) || (want != nil && !strings.Contains(err.Error(), "document 7")) {
					t.Errorf("Add: %v, want %v naming document 7 (row 17)", err, want)
				}
			})
		}
	}

	const n, d, nq = 300, 16, 20
	for _, metric := range []string{"l2", "ip", "cosine"} {
		rs := rows(n, d, 5)
		dir := t.TempDir()
		in, out := filepath.Join(dir, "in.fvecs"), filepath.Join(dir, "out.vlc")
		if err := vecfile.WriteFvecs(in, rs); err != nil {
			t.Fatal(err)
		}
		if _, err := vlc.Compress(ctx, in, out, vlc.Options{Metric: metric, Anchors: 8}); err != nil {
			t.Fatal(err)
		}
		ix, err := index.Open(out, index.Options{Verify: true})
		if err != nil {
			t.Fatal(err)
		}
		recall := func(scale float64) float64 {
			found := 0
			for i := range nq {
				q := make([]float32, d)
				for j, v := range rows(1, d, uint64(100+i))[0] {
					q[j] = float32(float64(v) * scale)
				}
				hits, err := ix.Search(q, index.SearchOptions{K: 10, NProbe: 8})
				if err != nil {
					t.Fatalf("scale %g: %v", scale, err)
				}
				ids := []int{}
				for _, h := range hits {
					if math.IsNaN(float64(h.Distance)) || math.IsInf(float64(h.Distance), 0) {
						t.Fatalf("scale %g: distance %v", scale, h.Distance)
					}
					ids = append(ids, h.ID)
				}
				found += overlap(ids, exact64(rs, q, 10, metric))
			}
			return float64(found) / (10 * nq)
		}
		base := recall(1)
		scales := []float64{1e-20, 6e-8, 65504}
		switch metric {
		case "cosine":
			scales = append(scales, 1e-30, 1e30)
		default:
			// ip: the search scales a query of 1e-30 or 1e-40 up by a
			// power of two (its ranking does not depend on its length).
			scales = append(scales, 1e-30, 1e-40)
		}
		for _, s := range scales {
			if r := recall(s); r < base-0.1 {
				t.Errorf("%s: query scaled by %g: recall@10 %.3f, at scale 1 %.3f", metric, s, r, base)
			}
		}
		ix.Close()
	}
}

// index.Exact, the ground truth of vlc eval, agrees with a float64
// ground truth across the float32 range, in every metric.
func TestExactNumericExtremes(t *testing.T) {
	const n, d, nq = 400, 16, 20
	for _, metric := range []string{"l2", "ip", "cosine"} {
		m, _ := index.ParseMetric(metric)
		for _, s := range []float64{1, 1e-30, 1e-20, 6e-8, 65504, 1e30} {
			dir := t.TempDir()
			rs := scaled(n, d, 8, s)
			qs := scaled(nq, d, 9, s)
			bp, qp := filepath.Join(dir, "b.fvecs"), filepath.Join(dir, "q.fvecs")
			if err := vecfile.WriteFvecs(bp, rs); err != nil {
				t.Fatal(err)
			}
			if err := vecfile.WriteFvecs(qp, qs); err != nil {
				t.Fatal(err)
			}
			got := index.Exact(mustMatrix(t, bp, 0), mustMatrix(t, qp, 0), 10, m)
			found := 0
			for i, q := range qs {
				found += overlap(got[i], exact64(rs, q, 10, metric))
			}
			if r := float64(found) / (10 * nq); r < 0.99 {
				t.Errorf("%s, scale %g: Exact agrees with float64 on %.3f of the top 10", metric, s, r)
			}
		}
	}
}

// Under ip, queries far shorter or longer than the base (1e-44 to 1e-40, and
// 1e25 against data of scale 1) keep their ground truth: each query is
// scaled on its own.
func TestExactIPQueriesOfOtherScale(t *testing.T) {
	const n, d, nq = 400, 16, 20
	dir := t.TempDir()
	rs := scaled(n, d, 8, 1)
	bp := filepath.Join(dir, "b.fvecs")
	if err := vecfile.WriteFvecs(bp, rs); err != nil {
		t.Fatal(err)
	}
	for _, s := range []float64{1e-44, 1e-42, 1e-40, 1e25} {
		qs := scaled(nq, d, 9, s)
		qp := filepath.Join(dir, "q.fvecs")
		if err := vecfile.WriteFvecs(qp, qs); err != nil {
			t.Fatal(err)
		}
		got := index.Exact(mustMatrix(t, bp, 0), mustMatrix(t, qp, 0), 10, index.IP)
		found := 0
		for i, q := range qs {
			found += overlap(got[i], exact64(rs, q, 10, "ip"))
		}
		if r := float64(found) / (10 * nq); r < 0.99 {
			t.Errorf("queries scaled by %g: Exact agrees with float64 on %.3f of the top 10", s, r)
		}
	}
}
