package anneal

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/internal/vec"
)

// Maintenance's thresholds.
const (
	// starvedShare: an anchor holding fewer than 1/starvedShare of the
	// mean count is starved. Such an anchor costs a list (a probe, its
	// parameters) for very few vectors.
	starvedShare = 16
	// overloadFactor: an anchor whose distortion (count x mean squared
	// radius) exceeds overloadFactor x the mean is overloaded. Only while
	// there are more overloaded anchors than free slots do starved ones
	// give up theirs, so a balanced set of anchors is left alone.
	overloadFactor = 4
	// splitSpread: a split puts the two halves splitSpread standard
	// deviations either side of the old anchor, per dimension. Half a
	// deviation lands each inside its half of the points, and the next
	// Steps move them to the halves' means.
	splitSpread = 0.5
	// crowdFactor: an anchor holding more than crowdFactor x the mean count
	// is crowded, and a merge that would leave a list that large is not
	// made. Search scans whole lists, so list sizes matter beside
	// distortion: in high dimensions the two halves of a split Gaussian
	// cluster settle a small fraction of its radius apart, close enough for
	// the merge test, and without this bound every such split would be
	// undone while anchors starved elsewhere (one cluster, one list of
	// 1,000 vectors, three anchors of 0 or 1 vector each).
	crowdFactor = 1.5
)

// maintain edits the anchors in place between Steps and reports how many
// anchors it merged and split. m stays fixed: every slot that a merge
// frees, every empty anchor, and every starved anchor (starvedShare) while
// some anchor is overloaded (overloadFactor), is refilled by splitting the
// anchor with the largest distortion (count x mean squared radius) into
// two, splitSpread standard deviations either side along a random sign
// pattern scaled by its per-dimension spread. Crowded anchors (crowdFactor)
// count as overloaded, and merges stop short of making one.
func maintain(anchors []float32, counts []int64, variance []float32, d, n int, mergeFrac float64, rng *rand.Rand) (merged, split int) {
	m := len(counts)
	radius := make([]float64, m) // mean squared radius
	sse := make([]float64, m)
	for i := range m {
		var r float64
		for _, v := range variance[i*d : (i+1)*d] {
			r += float64(v)
		}
		radius[i] = r
		sse[i] = float64(counts[i]) * r
	}
	free := make([]bool, m)
	var slots []int
	for i, c := range counts {
		if c == 0 {
			free[i] = true
			slots = append(slots, i)
		}
	}

	// Merge pairs of nearly coincident anchors, closest pairs first.
	type pair struct {
		i, j int
		dist float32
	}
	// A pair needs dist < MergeFrac * min(radius): the search for i's
	// nearest other can stop at MergeFrac * radius[i].
	bound := make([]float64, m)
	for i := range m {
		bound[i] = mergeFrac * radius[i]
	}
	nn := nearestOther(anchors, d, free, bound)
	var pairs []pair
	for i, p := range nn {
		if p.j >= 0 && float64(p.dist) < mergeFrac*math.Min(radius[i], radius[p.j]) {
			pairs = append(pairs, pair{i, p.j, p.dist})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		return cmp.Or(cmp.Compare(a.dist, b.dist), cmp.Compare(a.i, b.i))
	})
	crowded := crowdFactor * float64(n) / float64(m)
	for _, p := range pairs {
		if free[p.i] || free[p.j] || float64(counts[p.i]+counts[p.j]) > crowded {
			continue
		}
		keep, drop := p.i, p.j
		if counts[drop] > counts[keep] || (counts[drop] == counts[keep] && drop < keep) {
			keep, drop = drop, keep
		}
		ck, cd := float64(counts[keep]), float64(counts[drop])
		a, b := anchors[keep*d:(keep+1)*d], anchors[drop*d:(drop+1)*d]
		for j := range a {
			a[j] = float32((ck*float64(a[j]) + cd*float64(b[j])) / (ck + cd))
		}
		sse[keep] += sse[drop] + ck*cd/(ck+cd)*float64(p.dist)
		counts[keep] += counts[drop]
		counts[drop], sse[drop] = 0, 0
		free[drop] = true
		slots = append(slots, drop)
		merged++
	}

	// Starved anchors give their slot to overloaded ones.
	var total float64
	for _, s := range sse {
		total += s
	}
	meanSSE := total / float64(m)
	over := 0
	for i, s := range sse {
		if s > overloadFactor*meanSSE || float64(counts[i]) > crowded {
			over++
		}
	}
	if over > len(slots) {
		starved := make([]int, 0)
		for i, c := range counts {
			if !free[i] && c*starvedShare*int64(m) < int64(n) {
				starved = append(starved, i)
			}
		}
		slices.SortFunc(starved, func(a, b int) int { return cmp.Or(cmp.Compare(counts[a], counts[b]), cmp.Compare(a, b)) })
		for _, i := range starved[:min(len(starved), over-len(slots))] {
			free[i] = true
			sse[i] = 0
			slots = append(slots, i)
		}
	}

	// Refill the slots by splitting the most distorted anchors.
	order := make([]int, 0, m)
	for i := range m {
		if !free[i] && counts[i] >= 2 && sse[i] > 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Or(cmp.Compare(sse[b], sse[a]), cmp.Compare(a, b)) })
	for k, slot := range slots {
		if k >= len(order) {
			break // fewer distinct points than anchors: nothing left to split
		}
		s := order[k]
		a, b := anchors[s*d:(s+1)*d], anchors[slot*d:(slot+1)*d]
		for j := range a {
			delta := float32(splitSpread * math.Sqrt(float64(variance[s*d+j])))
			if rng.IntN(2) == 0 {
				delta = -delta
			}
			b[j] = a[j] - delta
			a[j] += delta
		}
		split++
	}
	return merged, split
}

// headDims is how many leading values nearestOther's first test reads:
// two of vec.L2Below's checks of 16.
const headDims = 32

// headReaches reports whether the float32 sum of (a_j - b_j)^2 over the
// first 16, or else the first headDims, values, in vec.L2's four chains
// and its order, is at least limit: vec.L2Below's first two checks, either
// of which drops the pair. L2 continues those chains, and float32 sums of
// non-negative terms never decrease, so nothing below limit is dropped.
func headReaches(a, b *[headDims]float32, limit float64) bool {
	var s0, s1, s2, s3 float32
	for j := 0; j < headDims; j += 4 {
		d0 := a[j] - b[j]
		d1 := a[j+1] - b[j+1]
		d2 := a[j+2] - b[j+2]
		d3 := a[j+3] - b[j+3]
		s0 += float32(d0 * d0)
		s1 += float32(d1 * d1)
		s2 += float32(d2 * d2)
		s3 += float32(d3 * d3)
		if j%16 == 12 && float64((s0+s1)+(s2+s3)) >= limit {
			return true
		}
	}
	return false
}

type neighbour struct {
	j    int // -1: none
	dist float32
}

// nearestOther finds, for every anchor i not marked skip, the nearest
// other anchor not marked skip (squared L2; ties to the lowest index)
// among those closer than bound[i], or none (j = -1). Most pairs are far
// beyond the bound, and vec.L2Below drops them after a few dimensions.
func nearestOther(anchors []float32, d int, skip []bool, bound []float64) []neighbour {
	m := len(skip)
	out := make([]neighbour, m)
	// Each anchor's first headDims values side by side, for a first test
	// that drops most pairs without a call: 256 KiB at 4,096 anchors,
	// read from cache.
	var heads [][headDims]float32
	if d >= headDims {
		heads = make([][headDims]float32, m)
		for i := range heads {
			copy(heads[i][:], anchors[i*d:])
		}
	}
	par.For(m, 16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			out[i] = neighbour{j: -1}
			if skip[i] {
				continue
			}
			a := anchors[i*d : (i+1)*d]
			for j := range m {
				if j == i || skip[j] {
					continue
				}
				limit := bound[i]
				if out[i].j >= 0 {
					limit = min(limit, float64(out[i].dist)) // a tie keeps the lower j
				}
				if heads != nil && headReaches(&heads[i], &heads[j], limit) {
					continue
				}
				if v, ok := vec.L2Below(a, anchors[j*d:(j+1)*d], limit); ok {
					out[i] = neighbour{j, v}
				}
			}
		}
	})
	return out
}
