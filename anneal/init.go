package anneal

import (
	"math/rand/v2"
	"slices"

	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/internal/vec"
)

// initPlusPlus picks m starting anchors by k-means++ (D^2 sampling) on a
// seeded sample of s points. Duplicate points can leave fewer than m
// distinct candidates; the remaining anchors are then drawn uniformly. The
// random numbers of every round are drawn first, so that a device can run
// all the rounds (PlusPlusDrawer, the points on a GPU); otherwise they run
// on the host. Both give the same bits, so the same anchors.
func initPlusPlus(pts Points, m, s int, rng *rand.Rand, ds Dataset) ([]float32, error) {
	d := pts.Dim
	idx := sample(pts.N, s, rng)
	first := rng.IntN(s)
	u, fallback := make([]float64, m-1), make([]int, m-1)
	for k := range m - 1 {
		fallback[k] = rng.IntN(s) // when all remaining points coincide with an anchor
		u[k] = rng.Float64()
	}
	var picks []int
	var err error
	if dr, ok := ds.(PlusPlusDrawer); ok {
		picks, err = dr.DrawPlusPlus(idx, first, u, fallback)
	} else {
		dist := make([]float32, s)
		picks, err = PlusPlusRounds(first, u, fallback, dist, HostDistances(pts, idx, dist))
	}
	if err != nil {
		return nil, err
	}
	anchors := make([]float32, m*d)
	for k, p := range append([]int{first}, picks...) {
		f16.DecodeRow(anchors[k*d:(k+1)*d], pts.Data[idx[p]*d:(idx[p]+1)*d])
	}
	return anchors, nil
}

// PlusPlusRounds runs k-means++'s rounds 1 to len(u) on the host and
// returns their picks (positions in the sample): distances(c, keep) brings
// dist to the sample's squared distances from centre c (the smaller of
// those and dist's when keep); a round draws with r = u[k-1] times the
// total of the block sums (drawD2), or takes fallback[k-1] when the total
// is 0. Exported as the reference a PlusPlusDrawer must match.
func PlusPlusRounds(first int, u []float64, fallback []int, dist []float32, distances func(c int, keep bool) error) ([]int, error) {
	if err := distances(first, false); err != nil {
		return nil, err
	}
	blocks := make([]float64, (len(dist)+DrawBlock-1)/DrawBlock)
	picks := make([]int, len(u))
	for k := range u {
		total := BlockSums(dist, blocks)
		pick := fallback[k]
		if total > 0 {
			pick = drawD2(dist, blocks, float64(u[k]*total)) // float64(): rounded, never fused
		}
		picks[k] = pick
		if k+1 < len(u) {
			if err := distances(pick, true); err != nil {
				return nil, err
			}
		}
	}
	return picks, nil
}

// HostDistances returns k-means++'s distance update on the host's cores,
// as training runs it where the dataset is not a PlusPlusDrawer: dist[i] =
// vec.L2(x_i, x_c) over the sample idx (or the smaller of that and dist[i]
// when keep), c a position in idx, the rows decoded from float16 once.
// Exported, with PlusPlusRounds and BlockSums, as the reference a
// PlusPlusDrawer must match bit for bit.
func HostDistances(pts Points, idx []int, dist []float32) func(c int, keep bool) error {
	d := pts.Dim
	var x []float32
	return func(c int, keep bool) error {
		if x == nil {
			x = make([]float32, len(idx)*d)
			for i, p := range idx {
				f16.DecodeRow(x[i*d:(i+1)*d], pts.Data[p*d:(p+1)*d])
			}
		}
		cx := x[c*d : (c+1)*d]
		par.For(len(idx), 1024, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				if v := vec.L2(x[i*d:(i+1)*d], cx); !keep || v < dist[i] {
					dist[i] = v
				}
			}
		})
		return nil
	}
}

// sample returns s distinct indices below n in ascending order, drawn with
// Floyd's algorithm (memory O(s), not O(n)).
func sample(n, s int, rng *rand.Rand) []int {
	if s >= n {
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		return all
	}
	seen := make(map[int]struct{}, s)
	out := make([]int, 0, s)
	for j := n - s; j < n; j++ {
		t := rng.IntN(j + 1)
		if _, ok := seen[t]; ok {
			t = j
		}
		seen[t] = struct{}{}
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// DrawBlock is how many distances the D^2 draw skips at once: the draw
// walks block sums, then the distances of one block.
const DrawBlock = 64

// BlockSums sets blocks[b] to the float64 sum of dist's block b of
// DrawBlock values (four interleaved partial sums, as vec.Dot), on all
// cores, and returns their sum in order: the k-means++ total, in a fixed
// order, so that it depends on dist alone. Exported, with PlusPlusRounds,
// as the reference a PlusPlusDrawer must match bit for bit.
func BlockSums(dist []float32, blocks []float64) float64 {
	par.For(len(blocks), 64, func(lo, hi int) {
		for b := lo; b < hi; b++ {
			v := dist[b*DrawBlock : min(len(dist), (b+1)*DrawBlock)]
			var s0, s1, s2, s3 float64
			i := 0
			for ; i+4 <= len(v); i += 4 {
				s0 += float64(v[i])
				s1 += float64(v[i+1])
				s2 += float64(v[i+2])
				s3 += float64(v[i+3])
			}
			s := (s0 + s1) + (s2 + s3)
			for ; i < len(v); i++ {
				s += float64(v[i])
			}
			blocks[b] = s
		}
	})
	var total float64
	for _, s := range blocks {
		total += s
	}
	return total
}

// drawD2 returns the point that the draw r in [0, total) falls on: r is
// taken down block by block while it stays >= 0, then point by point in the
// block where it would not, the first point that takes it below 0 is
// drawn. Rounding can leave r >= 0 after the last point; the last point
// with a positive distance is drawn then.
func drawD2(dist []float32, blocks []float64, r float64) int {
	last := -1 // a block with a positive sum, the last so far
	for b, bs := range blocks {
		if bs > 0 {
			last = b
		}
		if r-bs >= 0 {
			r -= bs
			continue
		}
		for i := b * DrawBlock; i < min(len(dist), (b+1)*DrawBlock); i++ {
			if v := float64(dist[i]); v > 0 {
				if r -= v; r < 0 {
					return i
				}
			}
		}
	}
	for i := min(len(dist), (last+1)*DrawBlock) - 1; i >= 0; i-- {
		if dist[i] > 0 {
			return i
		}
	}
	return len(dist) - 1 // unreachable with a positive total
}
