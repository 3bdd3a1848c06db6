package main

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/vlc-embed/vlc/vecfile"
)

// groundTruth64 returns the 10 nearest rows of base to each query under
// metric, computed in float64, as .ivecs rows.
func groundTruth64(base, queries [][]float32, metric string) [][]int32 {
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
	var gt [][]int32
	for _, q := range queries {
		qq := unit(q)
		dist := make([]float64, len(base))
		ids := make([]int32, len(base))
		for i, x := range base {
			xx := unit(x)
			ids[i] = int32(i)
			for j := range qq {
				if metric == "ip" {
					dist[i] -= qq[j] * xx[j]
				} else {
					dist[i] += (qq[j] - xx[j]) * (qq[j] - xx[j])
				}
			}
		}
		slices.SortStableFunc(ids, func(a, b int32) int {
			switch {
			case dist[a] < dist[b]:
				return -1
			case dist[a] > dist[b]:
				return 1
			}
			return 0
		})
		gt = append(gt, ids[:10])
	}
	return gt
}

// Numeric extremes through the CLI: for every metric and bits, data
// scaled by 1e-30, 1e-20, 1e30 (.fvecs) and float16 subnormals and
// float16's largest values (.f16) either compress, search with finite
// distances and different hits for different queries, and reach the
// recall@10 of the same data at scale 1 against a float64 ground truth
// (eval -gt), with eval -base agreeing; or fail with one line naming row
// 0 (l2 and ip: too small for float32 distances, or beyond float16).
func TestNumericExtremesCLI(t *testing.T) {
	dir := t.TempDir()
	const n, d, nq = 300, 16, 20
	for _, metric := range []string{"l2", "ip", "cosine"} {
		for _, bits := range []string{"1", "2", "4", "8"} {
			var base float64
			for _, m := range []struct {
				name  string
				scale float64
				f16   bool
			}{
				{"1", 1, false},
				{"1e-30", 1e-30, false},
				{"1e-20", 1e-20, false},
				{"f16-subnormal", 6e-8 * 512, true}, // |x| < 3.1e-5, below float16's normal range
				{"1e30", 1e30, false},
				{"f16-max", 65504, true},
			} {
				t.Run(fmt.Sprintf("%s/b=%s/%s", metric, bits, m.name), func(t *testing.T) {
					rs := randomRows(n, d, 21)
					for _, r := range rs {
						for j, v := range r {
							r[j] = float32(float64(v) * m.scale)
						}
					}
					name := filepath.Join(dir, fmt.Sprintf("%s-%s-%s", metric, bits, m.name))
					in, q, gt, out := name+".fvecs", name+"-q.fvecs", name+"-gt.ivecs", name+".vlc"
					args := []string{"compress", in, "-o", out, "-metric", metric, "-bits", bits, "-anchors", "8", "-quiet"}
					var err error
					if m.f16 {
						in = name + ".f16"
						args[1] = in
						args = append(args, "-dim", strconv.Itoa(d))
						err = vecfile.WriteF16(in, rs)
					} else {
						err = vecfile.WriteFvecs(in, rs)
					}
					if err != nil {
						t.Fatal(err)
					}
					if metric != "cosine" && (m.scale < 1e-19 || m.scale > 1e19) {
						why := "would underflow"
						if m.scale > 1 {
							why = "outside the float16 range"
						}
						checkFails(t, args, []string{in, "row 0", why})
						return
					}
					mustVLC(t, args...)
					mat, err := vecfile.Open(in, vecfile.Options{Dim: d})
					if err != nil {
						t.Fatal(err)
					}
					stored := make([][]float32, n) // as the file holds them
					for i := range stored {
						stored[i] = mat.Row(i, nil)
					}
					mat.Close()
					queries := make([][]float32, nq)
					for i := range queries {
						queries[i] = stored[i*7]
					}
					if err := vecfile.WriteFvecs(q, queries); err != nil {
						t.Fatal(err)
					}
					if err := vecfile.WriteIvecs(gt, groundTruth64(stored, queries, metric)); err != nil {
						t.Fatal(err)
					}
					stdout, _ := mustVLC(t, "search", out, "-query", q, "-k", "10", "-nprobe", "8")
					firsts := map[int]bool{}
					for _, h := range parseHits(t, stdout) {
						if math.IsNaN(h.dist) || math.IsInf(h.dist, 0) {
							t.Fatalf("query %d: hit %d at distance %v", h.q, h.id, h.dist)
						}
						if h.rank == 1 {
							firsts[h.id] = true
						}
					}
					if len(firsts) < nq/2 {
						t.Errorf("%d distinct first hits for %d queries", len(firsts), nq)
					}
					r := evalJSON(t, out, "-query", q, "-gt", gt, "-nprobe", "8", "-json")["recall@10"].(float64)
					rb := evalJSON(t, out, "-query", q, "-base", in, "-nprobe", "8", "-json")["recall@10"].(float64)
					if m.scale == 1 {
						base = r
					}
					if r < base-0.1 || math.Abs(rb-r) > 0.05 {
						t.Errorf("recall@10 %.3f against float64 (at scale 1: %.3f), %.3f against eval -base", r, base, rb)
					}
				})
			}
		}
	}
}
