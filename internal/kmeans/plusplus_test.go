package kmeans

import (
	"math/big"
	"math/rand/v2"
	"testing"
)

// drawD2 draws the point whose interval of the cumulative D^2 sums holds r
// (checked in exact arithmetic, away from the edges that rounding may
// move), never a point at distance 0, and the last positive point when r
// is at or beyond the total.
func TestDrawD2(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 5, 63, 64, 65, 200, 1000} {
		dist := make([]float32, n)
		for i := range dist {
			if rng.IntN(3) > 0 {
				dist[i] = float32(rng.ExpFloat64())
			}
		}
		dist[rng.IntN(n)] = 1.5 // at least one positive
		blocks := make([]float64, (n+DrawBlock-1)/DrawBlock)
		total := BlockSums(dist, blocks)
		exact := make([]*big.Float, n+1) // exact[i]: the sum of dist[:i]
		exact[0] = new(big.Float)
		for i, v := range dist {
			exact[i+1] = new(big.Float).Add(exact[i], big.NewFloat(float64(v)))
		}
		lastPos := 0
		for i, v := range dist {
			if v > 0 {
				lastPos = i
			}
		}
		for range 2000 {
			r := rng.Float64() * total
			i := drawD2(dist, blocks, r)
			if dist[i] <= 0 {
				t.Fatalf("n=%d, r=%v: drew point %d at distance 0", n, r, i)
			}
			lo, _ := exact[i].Float64()
			hi, _ := exact[i+1].Float64()
			if r < lo-1e-9*total || r >= hi+1e-9*total {
				t.Fatalf("n=%d: r=%v drew %d, whose interval is [%v, %v)", n, r, i, lo, hi)
			}
		}
		if i := drawD2(dist, blocks, total); i != lastPos {
			t.Errorf("n=%d: r = total drew %d, want the last positive point %d", n, i, lastPos)
		}
	}
}
