//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/anneal/devicetest"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/synth"
)

// testDevices are the GPUs the split tests spread their shares over:
// VLC_CUDA_TEST_DEVICES (device numbers, such as 0,1), else GPU 0 alone.
func testDevices() []int {
	var out []int
	for _, f := range strings.Split(os.Getenv("VLC_CUDA_TEST_DEVICES"), ",") {
		if o, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		return []int{0}
	}
	return out
}

// sharedDevices opens k more Devices, share i on GPU testDevices()[i %
// len] (several shares on one GPU each have their own worker and buffers,
// the GPU's context shared), closed when t ends; t skips without a GPU.
func sharedDevices(t *testing.T, k int) []*Device {
	t.Helper()
	gpuDevice(t)
	gpus := testDevices()
	ordinals := make([]int, k)
	for i := range ordinals {
		ordinals[i] = gpus[i%len(gpus)]
	}
	devs, err := OpenDevices(ordinals)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*Device, k)
	for i, d := range devs {
		out[i] = d.(*Device)
		t.Cleanup(func() { d.Close() })
	}
	return out
}

// multi is device.Multi over devs with the given split.
func multi(devs []*Device, split func(n, k int) []int) *device.MultiDevice {
	ad := make([]device.Device, len(devs))
	for i, d := range devs {
		ad[i] = d
	}
	return device.Multi(ad...).WithSplit(split)
}

// setBatch makes each device stream its points in batches of rows (0:
// resident) until t ends.
func setBatch(t *testing.T, rows []int, devs ...*Device) {
	for i, d := range devs {
		d.batchRows = rows[min(i, len(rows)-1)]
	}
	t.Cleanup(func() {
		for _, d := range devs {
			d.batchRows = 0
		}
	})
}

// multiPasses runs robust Steps and an Assign from anchors, then moves the
// anchors eight times as far from the origin (the distances grow beyond the
// scales the last pass left: the next Step reduces again, finishPass's
// rescale) and runs them again. It returns what the dataset reports after
// every pass.
func multiPasses(t *testing.T, ds device.Dataset, pts device.Points, anchors []float32, m int) []devicetest.Result {
	t.Helper()
	if err := ds.SetAnchors(anchors, m); err != nil {
		t.Fatal(err)
	}
	res := devicetest.Passes(t, ds, pts.N, m, pts.Dim, 3, 4)
	// Anchors moved far off (every value shifted by 10,000): the next
	// pass meets distances far beyond the 4x room the last one left.
	far := slices.Clone(anchors)
	for i := range far {
		far[i] += 1e4
	}
	if err := ds.SetAnchors(far, m); err != nil {
		t.Fatal(err)
	}
	return append(res, devicetest.Passes(t, ds, pts.N, m, pts.Dim, 2, 4)...)
}

// Split over 2 and 3 Devices on one GPU, resident or streamed in batches,
// a point set gives one device's bits after every Step and Assign: the
// energies and changed counts, assignments, counts, anchors and
// variances, through Huber weights and a pass whose scales were too small
// (reduced again on every share with the scales one device picks). Shares
// straddle the 128-row tiles and runMinPoints, so that one share reduces
// by runs while another reduces per point.
func TestMultiDevicePasses(t *testing.T) {
	one := gpuDevice(t)
	devs := sharedDevices(t, 3)
	cases := []struct {
		n, d, m int
		batch   []int // batch rows of the shares' devices; nil: resident
		splits  []func(n, k int) []int
	}{
		{5000, 130, 70, nil, []func(n, k int) []int{device.EvenSplit, devicetest.Sizes(1, 129), devicetest.Skewed}},
		{runMinPoints + 5000, 96, 256, nil, []func(n, k int) []int{devicetest.Sizes(runMinPoints, 128), devicetest.Sizes(runMinPoints + 1), device.EvenSplit}},
		{5000, 130, 70, []int{256}, []func(n, k int) []int{device.EvenSplit, devicetest.Sizes(1, 1000)}},
		{5000, 130, 70, []int{0, 384, 0}, []func(n, k int) []int{devicetest.Skewed}},
	}
	for _, c := range cases {
		pts := devicetest.Scaled(synth.Clusters(c.n, c.d, 40, uint64(c.n)), 1.0/64, 1, 16)
		anchors := synth.AnchorsNear(pts, c.m, 0.1, 4)
		ds := devicetest.Load(t, one, pts)
		base := ds.(*dataset).rescaled
		want := multiPasses(t, ds, pts, anchors, c.m)
		rescaled := ds.(*dataset).rescaled - base
		if rescaled == 0 {
			t.Fatalf("n=%d: no pass was reduced again: the test misses finishPass's rescale", c.n)
		}
		for _, k := range []int{2, 3} {
			for si, split := range c.splits {
				name := fmt.Sprintf("n=%d/d=%d/m=%d/batch=%v/devices=%d/split=%d%v", c.n, c.d, c.m, c.batch, k, si, split(c.n, k))
				t.Run(name, func(t *testing.T) {
					if c.batch != nil {
						setBatch(t, c.batch, devs[:k]...)
					}
					mds := devicetest.Load(t, multi(devs[:k], split), pts)
					got := multiPasses(t, mds, pts, anchors, c.m)
					devicetest.SameBits(t, "one device / split", want, got)
					for i, sh := range mds.(interface{ Shards() []device.Shard }).Shards() {
						if r := sh.(*dataset).rescaled; r != rescaled {
							t.Errorf("share %d reduced again %d times, one device %d", i, r, rescaled)
						}
					}
				})
			}
		}
	}
}

// Train split over 2 and 3 Devices on one GPU gives one device's model and
// iterations to the bit, k-means++ drawn on the device (the first share
// gathers the sample from the whole set), resident and streamed.
func TestMultiDeviceTrain(t *testing.T) {
	one := gpuDevice(t)
	devs := sharedDevices(t, 3)
	pts := devicetest.Scaled(synth.Clusters(6000, 96, 24, 3), 1.0/64, 1, 16)
	cfg := anneal.Config{M: 64, Seed: 7}
	for _, batch := range []int{0, 256} {
		setBatch(t, []int{batch}, one)
		want := devicetest.TrainTrace(t, one, pts, cfg)
		one.batchRows = 0
		t.Logf("batch=%d: %d iterations, energy %.6g, %d merged, %d split", batch, want.Model.Iterations, want.Model.Energy, want.Model.Merged, want.Model.Split)
		for _, k := range []int{2, 3} {
			for _, split := range []func(n, k int) []int{device.EvenSplit, devicetest.Skewed} {
				t.Run(fmt.Sprintf("batch=%d/devices=%d/split=%v", batch, k, split(pts.N, k)), func(t *testing.T) {
					setBatch(t, []int{batch}, devs[:k]...)
					devicetest.SameTrace(t, "one device / split", want, devicetest.TrainTrace(t, multi(devs[:k], split), pts, cfg))
				})
			}
		}
	}
}

// A steady-state Step of a split set brings only each share's scalars to
// the host; the counts, weighted sums and weights (m x (d x 8 + 12) bytes)
// are combined between the devices, each share moving (k-1)/k of them
// twice (reduce-scatter, all-gather). An Assign combines the counts alone.
// Stats combines the sums of squares (the reduce-scatter alone) and brings
// the total back once, in parts, and the counts from the first share.
func TestMultiDeviceTransfers(t *testing.T) {
	const n, d, m = 3000, 64, 50
	pts := synth.Clusters(n, d, 20, 9)
	for _, k := range []int{2, 3} {
		t.Run(fmt.Sprintf("shares=%d", k), func(t *testing.T) {
			ds := devicetest.Load(t, multi(sharedDevices(t, k), device.EvenSplit), pts)
			if err := ds.SetAnchors(synth.AnchorsNear(pts, m, 0.1, 2), m); err != nil {
				t.Fatal(err)
			}
			inf := float32(math.Inf(1))
			lloyd := device.StepParams{Tau: inf, Rate: 1, MaxMove: inf}
			for range 2 { // the first passes may reduce again
				if _, err := ds.Step(lloyd); err != nil {
					t.Fatal(err)
				}
			}
			exchanged := func() int64 {
				b, _, _ := ds.(interface{ Shards() []device.Shard }).Shards()[0].(device.Exchanger).Exchanged()
				return b
			}
			kk := int64(k)
			check := func(what string, f func() error, up, down, between int64) {
				t.Helper()
				u0, d0 := ds.Transfer()
				x0 := exchanged()
				if err := f(); err != nil {
					t.Fatal(err)
				}
				u1, d1 := ds.Transfer()
				x1 := exchanged()
				if u1-u0 != up || d1-d0 != down || x1-x0 != between {
					t.Errorf("%s moved %d bytes up, %d down and %d between devices over %d shares; want %d, %d and %d", what, u1-u0, d1-d0, x1-x0, k, up, down, between)
				}
			}
			check("a Step", func() error { _, err := ds.Step(lloyd); return err }, 0, kk*scalarSize, 2*(kk-1)*(m*d*8+m*12))
			check("an Assign", func() error { _, err := ds.Assign(); return err }, 0, kk*scalarSize, 2*(kk-1)*m*4)
			check("Stats", func() error { return ds.Stats(make([]int64, m), make([]float32, m*d)) }, 0, m*d*8+m*4, (kk-1)*m*d*8)
			check("Stats again", func() error { return ds.Stats(make([]int64, m), make([]float32, m*d)) }, 0, 0, 0)
			r := ds.(device.SplitReporter).SplitReport()
			if r.Passes != 4 || len(r.Shares) != k || r.ExchangePath != "within one GPU" && len(testDevices()) < 2 {
				t.Errorf("report: %+v", r)
			}
			t.Logf("%+v", r)
		})
	}
}

// A device number the driver does not have is refused by name.
func TestMultiDeviceMissing(t *testing.T) {
	gpuDevice(t)
	_, err := OpenDevices([]int{0, 4096})
	if err == nil || !strings.Contains(err.Error(), "no CUDA device 4096: the driver sees") {
		t.Fatalf("device 4096: %v", err)
	}
	t.Log(err)
}
