package kmeans

import (
	"math/rand/v2"

	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/internal/vec"
)

// Draws returns the random numbers of k-means++ on n points with k
// centres, drawn from rng in this order: the first centre, then for each
// of rounds 1 to k-1 the centre it falls back on (when every point
// coincides with a centre) and its draw u in [0, 1). Drawing them all
// first lets a device run every round where the points are.
func Draws(n, k int, rng *rand.Rand) (first int, u []float64, fallback []int) {
	first = rng.IntN(n)
	u, fallback = make([]float64, k-1), make([]int, k-1)
	for r := range k - 1 {
		fallback[r] = rng.IntN(n)
		u[r] = rng.Float64()
	}
	return first, u, fallback
}

// PlusPlusRounds runs k-means++'s rounds 1 to len(u) and returns their
// picks (positions among the points): distances(c, keep) brings dist to
// the points' squared distances from centre c (the smaller of those and
// dist's when keep); a round draws with r = u[k-1] times the total of the
// block sums (BlockSums), or takes fallback[k-1] when the total is 0.
// Distances (float32 rows) and HostDistances (float16 rows) are the host's
// distances; with them this is the reference a device that draws itself
// must match.
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

// Distances returns PlusPlusRounds' distance update over the rows of x
// (w values each), on the host's cores: dist[i] = vec.L2(x_i, x_c), or the
// smaller of that and dist[i] when keep.
func Distances(x []float32, w int, dist []float32) func(c int, keep bool) error {
	return distances(x, w, dist, par.For)
}

// distances is Distances with its loop over the rows: par.For, or one
// core's (serial) where the caller runs many at once.
func distances(x []float32, w int, dist []float32, loop func(n, block int, body func(lo, hi int))) func(c int, keep bool) error {
	n := len(x) / w
	return func(c int, keep bool) error {
		cx := x[c*w : (c+1)*w]
		loop(n, 1024, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				if v := vec.L2(x[i*w:(i+1)*w], cx); !keep || v < dist[i] {
					dist[i] = v
				}
			}
		})
		return nil
	}
}

// serial is par.For's loop on the calling goroutine.
func serial(n, _ int, body func(lo, hi int)) { body(0, n) }

// HostDistances is Distances over the rows idx of data (float16 bit
// patterns, dim values a row), decoded once; c is a position in idx.
func HostDistances(data []uint16, dim int, idx []int, dist []float32) func(c int, keep bool) error {
	x := make([]float32, len(idx)*dim)
	for i, p := range idx {
		f16.DecodeRow(x[i*dim:(i+1)*dim], data[p*dim:(p+1)*dim])
	}
	return Distances(x, dim, dist)
}

// DrawBlock is how many distances the D^2 draw skips at once: the draw
// walks block sums, then the distances of one block.
const DrawBlock = 64

// BlockSums sets blocks[b] to the float64 sum of dist's block b of
// DrawBlock values (four interleaved partial sums, as vec.Dot), on all
// cores, and returns their sum in order: the k-means++ total, in a fixed
// order, so that it depends on dist alone.
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
