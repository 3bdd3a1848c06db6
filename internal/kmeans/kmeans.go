// Package kmeans is the host's k-means, written once: k-means++ seeding
// (the D^2 draw of anneal's initial anchors, and the reference a device
// that seeds where its points are must match bit for bit) and Lloyd's
// iterations with Hamerly's bounds (quant's product-code codebooks).
// Results depend on the inputs and the random numbers alone, not on the
// core count.
package kmeans

import (
	"math"
	"math/rand/v2"

	"github.com/vlc-embed/vlc/internal/vec"
)

// Train fills cent (k rows of w) with centroids of the n rows of x (w
// values each): k-means++ seeded from rng (Draws, PlusPlusRounds), then up
// to iters Lloyd iterations (Lloyd). With n = 0 the centroids are zero;
// with fewer distinct rows than centroids some centroids repeat. Its
// distances run on the calling goroutine: callers train many sets at once
// (quant's subspaces).
func Train(cent, x []float32, n, w, iters int, rng *rand.Rand) {
	k := len(cent) / w
	clear(cent)
	if n == 0 {
		return
	}
	first, u, fallback := Draws(n, k, rng)
	dist := make([]float32, n)
	picks, _ := PlusPlusRounds(first, u, fallback, dist, distances(x[:n*w], w, dist, serial))
	for c, p := range append([]int{first}, picks...) {
		copy(cent[c*w:(c+1)*w], x[p*w:(p+1)*w])
	}
	Lloyd(cent, x, n, w, iters)
}

// Lloyd runs up to iters Lloyd iterations from the centroids in cent (k
// rows of w) over the n rows of x, stopping once an iteration moves at
// most a thousandth of the rows to another centroid. An empty cluster
// takes half of the largest. Hamerly's bounds (an upper bound on a row's
// distance to its own centroid, a lower bound on its distance to any
// other) skip the rows that cannot have changed cluster; sums run in row
// order in float64.
func Lloyd(cent, x []float32, n, w, iters int) {
	k := len(cent) / w
	assign := make([]int32, n)
	upper := make([]float64, n)
	lower := make([]float64, n)
	norms := make([]float32, k)
	half := make([]float64, k) // half the distance to the nearest other centroid
	old := make([]float32, k*w)
	sums := make([]float64, k*w)
	counts := make([]int, k)
	for it := range iters {
		for c := range k {
			var s float32
			for _, v := range cent[c*w : (c+1)*w] {
				s += v * v
			}
			norms[c] = s
		}
		for c := range k {
			m := float32(math.Inf(1))
			for o := range k {
				if o != c {
					m = min(m, vec.L2(cent[c*w:(c+1)*w], cent[o*w:(o+1)*w]))
				}
			}
			half[c] = math.Sqrt(float64(m)) / 2
		}
		changed := 0
		for i := range n {
			xi := x[i*w : (i+1)*w]
			if it > 0 {
				a := assign[i]
				m := math.Max(half[a], lower[i])
				if upper[i] <= m {
					continue
				}
				upper[i] = math.Sqrt(sqDist64(xi, cent[int(a)*w:(int(a)+1)*w]))
				if upper[i] <= m {
					continue
				}
			}
			b, d1, d2 := nearest2(xi, cent, norms, w)
			xx := dot64(xi, xi)
			if it == 0 || int32(b) != assign[i] {
				changed++
			}
			assign[i] = int32(b)
			upper[i] = math.Sqrt(math.Max(xx+float64(d1), 0))
			lower[i] = math.Sqrt(math.Max(xx+float64(d2), 0))
		}
		if changed <= n/1000 && it > 0 {
			break // converged, to a thousandth of the points
		}
		copy(old, cent)
		clear(sums)
		clear(counts)
		for i, a := range assign {
			counts[a]++
			for j, v := range x[i*w : (i+1)*w] {
				sums[int(a)*w+j] += float64(v)
			}
		}
		for c := range k {
			if counts[c] > 0 {
				for j := range w {
					cent[c*w+j] = float32(sums[c*w+j] / float64(counts[c]))
				}
			}
		}
		for c := range k {
			if counts[c] != 0 {
				continue
			}
			big := 0
			for j := range k {
				if counts[j] > counts[big] {
					big = j
				}
			}
			if counts[big] < 2 {
				break
			}
			// Two copies of the largest centroid, nudged apart; the next
			// assignment splits its cluster between them.
			const eps = 1.0 / 1024
			for j := range w {
				v, e := cent[big*w+j], float32(eps)
				if j%2 == 1 {
					e = -e
				}
				cent[c*w+j], cent[big*w+j] = v*(1+e), v*(1-e)
			}
			counts[c] = counts[big] / 2
			counts[big] -= counts[c]
		}
		// Move the bounds by how far the centroids moved.
		max1, max2, arg := 0.0, 0.0, -1
		drift := half // reused: half is recomputed next iteration
		for c := range k {
			drift[c] = math.Sqrt(sqDist64(old[c*w:(c+1)*w], cent[c*w:(c+1)*w]))
			if drift[c] > max1 {
				max1, max2, arg = drift[c], max1, c
			} else if drift[c] > max2 {
				max2 = drift[c]
			}
		}
		for i, a := range assign {
			upper[i] += drift[a]
			if int(a) == arg {
				lower[i] -= max2
			} else {
				lower[i] -= max1
			}
		}
	}
}

func sqDist64(a, b []float32) float64 {
	var s float64
	for j, v := range a {
		d := float64(v) - float64(b[j])
		s += d * d
	}
	return s
}

func dot64(a, b []float32) float64 {
	var s float64
	for j := range a {
		s += float64(a[j]) * float64(b[j])
	}
	return s
}

// nearest2 returns the row of cent (rows of w, norms their squared norms)
// nearest to x, the first on ties, and the squared distances from x to it
// and to the second nearest, less |x|^2.
func nearest2(x, cent, norms []float32, w int) (best int, d1, d2 float32) {
	d1, d2 = float32(math.Inf(1)), float32(math.Inf(1))
	keep := func(c int, d float32) {
		if d < d1 {
			best, d1, d2 = c, d, d1
		} else if d < d2 {
			d2 = d
		}
	}
	switch w {
	case 8:
		x0, x1, x2, x3, x4, x5, x6, x7 := x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]
		for c, n := range norms {
			r := cent[c*8 : c*8+8]
			d := n - 2*((x0*r[0]+x1*r[1])+(x2*r[2]+x3*r[3])+(x4*r[4]+x5*r[5])+(x6*r[6]+x7*r[7]))
			if d < d2 {
				keep(c, d)
			}
		}
	case 4:
		x0, x1, x2, x3 := x[0], x[1], x[2], x[3]
		for c, n := range norms {
			r := cent[c*4 : c*4+4]
			if d := n - 2*((x0*r[0]+x1*r[1])+(x2*r[2]+x3*r[3])); d < d2 {
				keep(c, d)
			}
		}
	case 2:
		x0, x1 := x[0], x[1]
		for c, n := range norms {
			r := cent[c*2 : c*2+2]
			if d := n - 2*(x0*r[0]+x1*r[1]); d < d2 {
				keep(c, d)
			}
		}
	default:
		for c, n := range norms {
			r := cent[c*w : (c+1)*w]
			var p float32
			for j, v := range x[:w] {
				p += v * r[j]
			}
			if d := n - 2*p; d < d2 {
				keep(c, d)
			}
		}
	}
	return best, d1, d2
}
