package cpu_test

import (
	"fmt"
	"testing"

	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/anneal/devicetest"
	"github.com/vlc-embed/vlc/backend/cpu"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/synth"
)

// devices returns k CPU devices: k simulated shares.
func devices(k int) []device.Device {
	devs := make([]device.Device, k)
	for i := range devs {
		devs[i] = cpu.New()
	}
	return devs
}

// multiSplits are the splits training is checked on: even, and uneven
// shares that straddle the assign's 256-point blocks (one of a single
// point), for 1, 2, 3 and 5 devices.
var multiSplits = []struct {
	k     int
	name  string
	split func(n, k int) []int
}{
	{1, "even", device.EvenSplit},
	{2, "even", device.EvenSplit},
	{2, "255+rest", devicetest.Sizes(255)},
	{3, "even", device.EvenSplit},
	{3, "1+257+rest", devicetest.Sizes(1, 257)},
	{3, "skewed", devicetest.Skewed},
	{5, "even", device.EvenSplit},
	{5, "256+129+127+511+rest", devicetest.Sizes(256, 129, 127, 511)},
	{5, "skewed", devicetest.Skewed},
}

// Training split over 1, 2, 3 and 5 simulated devices gives the bits of
// one device: every iteration's energy and counts, the anchors, counts,
// variances and assignments, with Huber weights, capped moves, merges and
// splits (maintenance) and k-means++ on a sample or on every point.
func TestMultiTrain(t *testing.T) {
	cases := []struct {
		n, d, k int
		scaled  bool // three groups of points at scales 1/256, 1 and 64
		cfg     anneal.Config
	}{
		{1500, 17, 12, true, anneal.Config{M: 30, Seed: 3}},
		{2049, 96, 9, false, anneal.Config{M: 40, Seed: 4, MaintainEvery: 2, InitSample: 2049}},
		{1000, 130, 5, true, anneal.Config{M: 7, Seed: 5, T0: 4}},
	}
	for _, c := range cases {
		pts := synth.Clusters(c.n, c.d, c.k, uint64(c.n+c.d))
		if c.scaled {
			pts = devicetest.Scaled(pts, 1.0/256, 1, 64)
		}
		one := devicetest.TrainTrace(t, cpu.New(), pts, c.cfg)
		t.Logf("n=%d d=%d m=%d: %d iterations, energy %.6g, %d merged, %d split", c.n, c.d, c.cfg.M, one.Model.Iterations, one.Model.Energy, one.Model.Merged, one.Model.Split)
		for _, s := range multiSplits {
			t.Run(fmt.Sprintf("n=%d/d=%d/devices=%d/%s", c.n, c.d, s.k, s.name), func(t *testing.T) {
				dev := device.Multi(devices(s.k)...).WithSplit(s.split)
				devicetest.SameTrace(t, "one device / split", one, devicetest.TrainTrace(t, dev, pts, c.cfg))
			})
		}
	}
}

// Dataset by dataset: robust Steps and a final Assign on a split set give
// the bits of one dataset after every pass, with shares of every size from
// none (a device left out) to all.
func TestMultiPasses(t *testing.T) {
	const n, d, m = 900, 33, 25
	pts := devicetest.Scaled(synth.Clusters(n, d, 10, 8), 1.0/256, 1, 64)
	anchors := synth.AnchorsNear(pts, m, 0.2, 2)
	run := func(dev device.Device) []devicetest.Result {
		ds := devicetest.Load(t, dev, pts)
		if err := ds.SetAnchors(anchors, m); err != nil {
			t.Fatal(err)
		}
		return devicetest.Passes(t, ds, n, m, d, 4, 3)
	}
	one := run(cpu.New())
	for _, split := range [][]int{{n}, {0, n}, {450, 0, 450}, {1, 1, n - 2}, {n - 1, 1}, {300, 300, 0, 299, 1}} {
		t.Run(fmt.Sprint(split), func(t *testing.T) {
			dev := device.Multi(devices(len(split))...).WithSplit(devicetest.Sizes(split...))
			devicetest.SameBits(t, "one / split", one, run(dev))
		})
	}
}

// The conformance suite on three simulated devices, split unevenly.
func TestMultiConformance(t *testing.T) {
	none := func(device.Dataset, int, int) int64 { return 0 }
	devicetest.Run(t, device.Multi(devices(3)...).WithSplit(devicetest.Skewed), devicetest.Options{
		Deterministic: true,
		Transfers: &devicetest.Transfers{
			Load:       none,
			SetAnchors: func(int, int) int64 { return 0 },
		},
	})
}

// Splits that do not add up, and devices that cannot hold a share, are
// refused when the points load.
func TestMultiRefused(t *testing.T) {
	pts := synth.Clusters(10, 4, 2, 1)
	for _, c := range []struct {
		dev  device.Device
		want string
	}{
		{device.Multi(devices(2)...).WithSplit(func(n, k int) []int { return []int{n, 1} }), "device: split [10 1] of 10 points over 2 devices"},
		{device.Multi(devices(2)...).WithSplit(func(n, k int) []int { return []int{n} }), "device: split [10] of 10 points over 2 devices"},
		{device.Multi(devices(2)...).WithSplit(func(n, k int) []int { return []int{12, -2} }), "device: split [12 -2] of 10 points over 2 devices"},
		{device.Multi(), "device: Multi with no devices"},
		{device.Multi(cpu.New(), plainDevice{}), "device: plain cannot hold a share of a split point set"},
	} {
		_, err := c.dev.Load(pts)
		if err == nil || err.Error() != c.want {
			t.Errorf("%v, want %q", err, c.want)
		}
	}
}

// plainDevice is a Device that is not a ShardDevice.
type plainDevice struct{}

func (plainDevice) Name() string                               { return "plain" }
func (plainDevice) Load(device.Points) (device.Dataset, error) { return nil, nil }
func (plainDevice) Close() error                               { return nil }
