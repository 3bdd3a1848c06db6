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
				if v, ok := vec.L2Below(a, anchors[j*d:(j+1)*d], limit); ok {
					out[i] = neighbour{j, v}
				}
			}
		}
	})
	return out
}
