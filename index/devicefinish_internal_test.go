package index

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// memRows is an in-memory Rows.
type memRows struct {
	x    []float32
	n, d int
}

func (r memRows) Len() int                           { return r.n }
func (r memRows) Dim() int                           { return r.d }
func (r memRows) Row(i int, dst []float32) []float32 { return append(dst[:0], r.x[i*r.d:(i+1)*r.d]...) }

// fromDevices gives exactly what the general path gives (the parts'
// entries pushed into the heap, then finish): the same hits, bit for
// bit and in the same order, and the same errors, or declines. The
// device results are drawn to hit every case: distances tied (also at
// -0 and 0) and rows tied too (ids that repeat), NaN distances, results
// that stop early (-1), out of order, entries past a part's end, rows
// past the total, one part to four, every metric, an ip scale and
// re-ranking.
func TestFromDevicesMatchesHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const d, m = 4, 8
	handled, declined := 0, 0
	for trial := range 3000 {
		nparts := 1 + (trial/3)%4
		metric := []Metric{L2, Cosine, IP}[trial%3]
		p := partsOnDevice{bases: []int{0}}
		for j := range nparts {
			n := 5 + rng.IntN(20)
			ids := make([]uint32, n)
			for e := range ids {
				ids[e] = uint32(rng.IntN(n))
				if trial%4 != 0 { // ids as a build writes them: a permutation
					ids[e] = uint32(e)
				}
			}
			if trial%50 == 7 {
				ids[rng.IntN(n)] = uint32(n + 3) // past the part: past the total for the last
			}
			w := rowBits(n + 4)
			ix := &Index{n: n, d: d, m: m, ids: newRowIDs(packRows(ids, w), w), path: fmt.Sprintf("part%d", j)}
			ix.meta.Metric = metric
			p.parts = append(p.parts, ix)
			p.devs = append(p.devs, &DeviceIndex{ix: ix})
			p.bases = append(p.bases, p.bases[j]+n)
		}
		ix := p.parts[0]
		total := p.bases[nparts]
		k := 1 + rng.IntN(6)
		opt := SearchOptions{K: k}
		keep := k
		if trial%5 == 0 {
			opt.RerankFactor = 2
			keep = 2 * k
			x := make([]float32, total*d)
			for i := range x {
				x[i] = float32(rng.IntN(3))
			}
			opt.Rerank = memRows{x, total, d}
		}
		st := &deviceSearch{opt: opt, k: k, keep: keep, total: total}
		c := &chunk{which: []int{trial}, qs: make([]float32, d), scales: []float64{1}}
		for j := range c.qs {
			c.qs[j] = float32(rng.NormFloat64())
		}
		if metric == IP && trial%2 == 0 {
			c.scales[0] = 0x1p-30
		}
		c.entries = make([][]int32, nparts)
		c.dists = make([][]float32, nparts)
		for j, part := range p.parts {
			es, ds := make([]int32, keep), make([]float32, keep)
			got := keep
			if rng.IntN(3) == 0 {
				got = rng.IntN(keep + 1)
			}
			var dist float32
			for t := range keep {
				if t >= got {
					es[t], ds[t] = -1, float32(math.Inf(1))
					continue
				}
				es[t] = int32(rng.IntN(part.n))
				if trial%97 == 3 && t == got-1 {
					es[t] = int32(part.n + rng.IntN(2)) // the device errs
				}
				switch r := rng.IntN(20); {
				case r == 0 && trial%3 == 0:
					ds[t] = float32(math.NaN())
				case r == 1:
					ds[t] = float32(math.Copysign(0, -1))
				case r == 2:
					ds[t] = dist - 1 // out of order
				case r < 8:
					ds[t] = dist // a tie
				default:
					dist += float32(rng.IntN(3))
					ds[t] = dist
				}
			}
			c.entries[j], c.dists[j] = es, ds
		}

		// The general path: push, then finish.
		ref := &scratch{q: slices.Clone(c.qs), row: make([]float32, d)}
		ref.top.reset(keep)
		ref.scale, ref.total = c.scales[0], total
		var want []Hit
		wantErr := p.pushDevices(c, 0, keep, ref)
		if wantErr == nil {
			want, wantErr = ix.finish(nil, ref, opt, k)
			if wantErr != nil {
				wantErr = fmt.Errorf("query %d: %w", trial, wantErr)
			}
		}

		s := &scratch{q: make([]float32, d), row: make([]float32, d)}
		got, ok, err := p.fromDevices(st, c, 0, s, m, false)
		switch {
		case err == nil && !ok:
			declined++ // the general path runs
		case err != nil || wantErr != nil:
			if err == nil || wantErr == nil || err.Error() != wantErr.Error() {
				t.Fatalf("trial %d: error %v, the general path's %v", trial, err, wantErr)
			}
			if errors.Is(wantErr, ErrCorrupt) != errors.Is(err, ErrCorrupt) {
				t.Fatalf("trial %d: error %v is not the general path's kind (%v)", trial, err, wantErr)
			}
		default:
			handled++
			if len(got) != len(want) {
				t.Fatalf("trial %d: %d hits, the general path %d: %v, %v", trial, len(got), len(want), got, want)
			}
			for i := range got {
				if got[i].ID != want[i].ID || math.Float32bits(got[i].Distance) != math.Float32bits(want[i].Distance) {
					t.Fatalf("trial %d: hits %v, the general path's %v", trial, got, want)
				}
			}
		}
	}
	if handled < 1000 || declined < 50 {
		t.Fatalf("the cases do not cover both paths: %d handled, %d declined", handled, declined)
	}
	t.Logf("%d handled, %d declined", handled, declined)
}
