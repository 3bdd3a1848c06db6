//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/synth"
	"github.com/vlc-embed/vlc/internal/vec"
)

// The device's k-means++ distances are the host's bits (vec.L2 of the
// decoded rows, kept as the minimum over rounds), at dimensions around the
// 4-wide unrolling and sample sizes around the 256-thread blocks.
func TestSampleDistancesParity(t *testing.T) {
	dev := gpuDevice(t)
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
