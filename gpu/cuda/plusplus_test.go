//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/synth"
	"github.com/vlc-embed/vlc/internal/vec"
)

// The device's k-means++ distances are the host's bits (vec.L2 of the
// decoded rows, kept as the minimum over rounds), at dimensions around the
// 4-wide unrolling and sample sizes around the 256-thread blocks.
func TestSampleDistancesParity(t *testing.T) {
	dev := device(t)
	for _, d := range []int{1, 3, 4, 5, 96, 130, 768} {
		for _, s := range []int{1, 255, 257, 3000} {
			batch := 0
			if s == 3000 {
				batch = 256 // the points stream from the host: gathered there
			}
			t.Run(fmt.Sprintf("d=%d/s=%d/batch=%d", d, s, batch), func(t *testing.T) {
				n := s + 17
				pts := synth.Clusters(n, d, 5, uint64(d+s))
				dev.batchRows = batch
				ds, err := dev.Load(pts)
				dev.batchRows = 0
				if err != nil {
					t.Fatal(err)
				}
				defer ds.Close()
				rng := rand.New(rand.NewPCG(uint64(s), 2))
				rows := rng.Perm(n)[:s]
				x := make([]float32, s*d)
				for i, r := range rows {
					f16.DecodeRow(x[i*d:(i+1)*d], pts.Data[r*d:(r+1)*d])
				}
				got, want := make([]float32, s), make([]float32, s)
				for round := range 4 {
					c := rng.IntN(s)
					keep := round > 0
					if err := ds.(*dataset).sampleDistances(rows, c, keep, got); err != nil {
						t.Fatal(err)
					}
					for i := range s {
						if v := vec.L2(x[i*d:(i+1)*d], x[c*d:(c+1)*d]); !keep || v < want[i] {
							want[i] = v
						}
					}
					for i := range s {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("round %d, point %d: device %v, host %v", round, i, got[i], want[i])
						}
					}
				}
			})
		}
	}
}

// All of k-means++'s rounds on the device pick what anneal.PlusPlusRounds
// picks on the host, at sample sizes around the 64-distance blocks, with
// duplicate points (totals of 0: the fallbacks), and for points that
// stream in batches.
func TestDrawPlusPlusParity(t *testing.T) {
	dev := device(t)
	for _, c := range []struct{ s, d, m, distinct, batch int }{
		{1, 5, 3, 1, 0}, {63, 7, 20, 63, 0}, {64, 16, 30, 64, 0}, {65, 33, 40, 65, 0},
		{1000, 96, 100, 1000, 0}, {500, 20, 60, 12, 0}, {3000, 130, 50, 3000, 256},
	} {
		t.Run(fmt.Sprintf("%+v", c), func(t *testing.T) {
			n := c.s + 9
			pts := synth.Clusters(c.distinct, c.d, 4, uint64(c.s+c.d))
			data := make([]uint16, n*c.d)
			for i := range n { // duplicates when distinct < n
				copy(data[i*c.d:(i+1)*c.d], pts.Data[(i%c.distinct)*c.d:])
			}
			pts = anneal.Points{Data: data, N: n, Dim: c.d}
			dev.batchRows = c.batch
			ds, err := dev.Load(pts)
			dev.batchRows = 0
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			rng := rand.New(rand.NewPCG(uint64(c.s), 3))
			rows := rng.Perm(n)[:c.s]
			first := rng.IntN(c.s)
			u, fallback := make([]float64, c.m-1), make([]int, c.m-1)
			for k := range u {
				fallback[k], u[k] = rng.IntN(c.s), rng.Float64()
			}
			got, err := ds.(*dataset).DrawPlusPlus(rows, first, u, fallback)
			if err != nil {
				t.Fatal(err)
			}
			x := make([]float32, c.s*c.d)
			for i, r := range rows {
				f16.DecodeRow(x[i*c.d:(i+1)*c.d], pts.Data[r*c.d:(r+1)*c.d])
			}
			dist := make([]float32, c.s)
			want, err := anneal.PlusPlusRounds(first, u, fallback, dist, func(ctr int, keep bool) error {
				for i := range dist {
					if v := vec.L2(x[i*c.d:(i+1)*c.d], x[ctr*c.d:(ctr+1)*c.d]); !keep || v < dist[i] {
						dist[i] = v
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("device picks %v\nhost picks   %v", got, want)
			}
		})
	}
}

// sampleDistances runs one round's distance kernel alone (vlc_pp_dist,
// the one DrawPlusPlus queues every round) and copies the distances back:
// dist[i] = |x[rows[i]] - x[rows[c]]|^2, or the smaller of that and what
// the device kept from the last call when keep.
func (s *dataset) sampleDistances(rows []int, c int, keep bool, dist []float32) error {
	return s.run(func() error {
		if err := s.ppSetup(rows); err != nil {
			return err
		}
		if err := s.launchPPDist(i32(c), 0, keep); err != nil {
			return err
		}
		return s.dev.dtoh(unsafe.Pointer(&dist[0]), s.pp.dist, int64(len(rows))*4)
	})
}
