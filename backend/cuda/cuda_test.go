//go:build cuda

package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/anneal/devicetest"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/synth"
)

// testDevice is the GPU, opened once for the test binary; without a CUDA
// driver or device the tests skip.
var testDevice = devicetest.Shared[*Device]{
	Open:        open,
	Unavailable: func(err error) bool { return strings.HasPrefix(err.Error(), "no CUDA") },
	Describe:    func(d *Device) string { return d.Name() + ", PTX " + d.info.PTXSource },
}

func gpuDevice(t *testing.T) *Device { t.Helper(); return testDevice.Get(t) }

// The conformance suite of training backends (anneal/devicetest), at
// sizes straddling the tiles (128 points, 128 and 256 anchors, 32 and 64
// dimensions), for every assign variant this device has.
func TestConformance(t *testing.T) {
	dev := gpuDevice(t)
	var assign []devicetest.Size
	for _, n := range []int{1, 127, 128, 129, 1000, 4099} {
		for _, m := range []int{1, 7, 64, 65, 300} {
			for _, d := range []int{1, 8, 15, 16, 17, 96, 130} {
				assign = append(assign, devicetest.Size{N: n, M: m, D: d})
			}
		}
	}
	devicetest.Run(t, dev, devicetest.Options{
		F16Anchors:    true,
		DirectEnergy:  true,
		Deterministic: true,
		Variants:      dev.variantNames(),
		UseVariant: func(ds device.Dataset, name string) bool {
			v, ok := dev.variantNamed(name)
			ds.(*dataset).variant = v
			return ok
		},
		AssignSizes: assign,
		StepSizes:   []devicetest.Size{{N: 129, M: 7, D: 96}, {N: 1000, M: 64, D: 17}, {N: 4099, M: 65, D: 130}, {N: 4099, M: 300, D: 16}, {N: 128, M: 1, D: 1}},
		// A steady-state Step moves 16 bytes to the host (energy,
		// changed, the largest distance) and none to the device.
		Transfers: &devicetest.Transfers{
			Load:       func(_ device.Dataset, n, d int) int64 { return int64(n * roundUp(d, tileK) * 2) },
			SetAnchors: func(m, d int) int64 { return int64(m * d * 4) },
			StepDown:   scalarSize,
		},
	})
}

// k-means++ on points that stream from the host in batches (gathered
// there, drawn on the device) picks the goldens too.
func TestPlusPlusBatched(t *testing.T) {
	dev := gpuDevice(t)
	dev.batchRows = 256
	defer func() { dev.batchRows = 0 }()
	devicetest.PlusPlusGolden(t, dev)
}

// A point set larger than the device's free memory streams in batches of
// a multiple of 128 rows; one whose single batch cannot fit is refused with
// a clear error before anything is allocated.
func TestTooLarge(t *testing.T) {
	dev := gpuDevice(t)
	n, d := int(dev.info.TotalMem/2048+1024), 1024
	var rows int
	err := dev.run(func() (err error) { rows, err = dev.residentRows(n, d); return err })
	if err != nil || rows >= n || rows%tileM != 0 || rows < tileM {
		t.Fatalf("%d x %d points: %d resident rows, %v", n, d, rows, err)
	}
	t.Logf("%d x %d points: batches of %d rows", n, d, rows)
	err = dev.run(func() (err error) { _, err = dev.residentRows(1000, 1<<30); return err })
	if err == nil || !strings.Contains(err.Error(), "even one batch") {
		t.Fatalf("rows of 2 GiB: %v", err)
	}
	t.Log(err)
}

// Points streamed in batches (a partial last batch, padded columns) give
// the same bits as resident points, through robust Steps and a final
// Assign; each pass moves the points up once.
func TestBatchedParity(t *testing.T) {
	dev := gpuDevice(t)
	const n, d, m = 5000, 130, 70
	pts := synth.Clusters(n, d, 40, 21)
	anchors := synth.AnchorsNear(pts, m, 0.1, 4)
	run := func(batch int) (res []devicetest.Result, up int64) {
		dev.batchRows = batch
		defer func() { dev.batchRows = 0 }()
		ds, err := dev.Load(pts)
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		if got := ds.(*dataset).batch; got != batch {
			t.Fatalf("batch rows %d, want %d", got, batch)
		}
		if err := ds.SetAnchors(anchors, m); err != nil {
			t.Fatal(err)
		}
		up0, _ := ds.Transfer()
		res = devicetest.Passes(t, ds, n, m, d, 3, 5)
		up1, _ := ds.Transfer()
		return res, up1 - up0
	}
	whole, _ := run(0)
	batched, up := run(1024)
	devicetest.SameBits(t, "resident / batched", whole, batched)
	if want := int64(4) * n * int64(roundUp(d, tileK)) * 2; up != want {
		t.Errorf("4 batched passes moved %d bytes up, want %d (the points, once a pass)", up, want)
	}
}

// The reduce by runs of sorted points gives the one-atomic-per-value
// reduce's bits (the same fixed-point terms in another order), through
// robust Steps and an Assign, at dimensions around the 32-lane registers
// and for each of its 1 to 4 groups of 256; beyond maxRunDim the dataset
// keeps the per-point reduce.
func TestReduceRunsParity(t *testing.T) {
	dev := gpuDevice(t)
	for _, c := range []struct{ n, d, m int }{{1, 1, 1}, {5000, 130, 70}, {2000, 300, 20}, {3000, 768, 40}, {1500, 1000, 10}, {700, 33, 300}} {
		pts := synth.Clusters(c.n, c.d, max(1, c.m/2), 31)
		anchors := synth.AnchorsNear(pts, c.m, 0.1, 6)
		run := func(runs bool) []devicetest.Result {
			ds, err := dev.Load(pts)
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			if ds.(*dataset).perm == 0 || ds.(*dataset).runs != (c.n >= runMinPoints) {
				t.Fatalf("d=%d, n=%d: perm %x, runs %v", c.d, c.n, ds.(*dataset).perm, ds.(*dataset).runs)
			}
			ds.(*dataset).runs = runs
			if err := ds.SetAnchors(anchors, c.m); err != nil {
				t.Fatal(err)
			}
			return devicetest.Passes(t, ds, c.n, c.m, c.d, 2, 3)
		}
		devicetest.SameBits(t, fmt.Sprintf("%+v per point / runs", c), run(false), run(true))
	}
	pts := synth.Clusters(300, 1100, 4, 1)
	ds, err := dev.Load(pts)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if ds.(*dataset).runs || ds.(*dataset).perm != 0 {
		t.Error("d = 1100 reduces by runs, beyond maxRunDim")
	}
}

// Two runs of the same Steps from the same start give the same bits at a
// size that takes the reduce by runs, whose many atomics land in another
// order each time (the suite's own check takes the per-point reduce).
func TestDeterministicRuns(t *testing.T) {
	devicetest.Deterministic(t, gpuDevice(t), devicetest.Size{N: runMinPoints + 4000, M: 200, D: 96})
}
