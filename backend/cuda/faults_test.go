//go:build cuda

package cuda

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/synth"
)

// GPU fault tests: they need a CUDA driver and device and skip without
// one (go test -tags cuda ./backend/cuda/ on the GPU machine).

// freeMem reads the device's free memory through the test Device, whose
// reference keeps the primary context alive across the cycles measured.
func freeMem(t *testing.T, dev *Device) int64 {
	t.Helper()
	var free int64
	if err := dev.run(func() error {
		var err error
		free, _, err = dev.memInfo()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return free
}

// cycle opens a Device, loads points, trains one step, reads the results
// back and closes everything, as one compress does.
func cycle(t *testing.T, pts device.Points, anchors []float32, m int) {
	t.Helper()
	d, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ds, err := d.Load(pts)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if err := ds.SetAnchors(anchors, m); err != nil {
		t.Fatal(err)
	}
	inf := float32(math.Inf(1))
	if _, err := ds.Step(device.StepParams{Tau: inf, Rate: 1, MaxMove: inf}); err != nil {
		t.Fatal(err)
	}
	if err := ds.Assignments(make([]int32, pts.N)); err != nil {
		t.Fatal(err)
	}
	if err := ds.Anchors(make([]float32, m*pts.Dim)); err != nil {
		t.Fatal(err)
	}
}

// 100 Open/Load/Step/Close cycles leave the device's free memory where it
// was: no buffer, event, module or context leaks. The driver hands out
// memory in pages of up to 2 MiB, hence the slack.
func TestOpenCloseCyclesNoLeak(t *testing.T) {
	ref := gpuDevice(t)
	const n, d, m, cycles = 20000, 96, 64, 100
	pts := synth.Clusters(n, d, m, 1)
	anchors := synth.AnchorsNear(pts, m, 0.5, 2)
	cycle(t, pts, anchors, m) // warm-up: the driver's first-use allocations
	before := freeMem(t, ref)
	for range cycles {
		cycle(t, pts, anchors, m)
	}
	after := freeMem(t, ref)
	t.Logf("%d cycles: free memory %d -> %d bytes (%+d)", cycles, before, after, after-before)
	if leak := before - after; leak > 2<<20 {
		t.Errorf("%d cycles lost %d bytes of device memory (%.1f KiB per cycle)", cycles, leak, float64(leak)/cycles/1024)
	}
}

// An allocation far beyond the card fails with an error that says so (out
// of memory, how much, which GPU), and leaves the device usable.
func TestAllocBeyondDevice(t *testing.T) {
	dev := gpuDevice(t)
	before := freeMem(t, dev)
	want := dev.info.TotalMem * 4
	err := dev.run(func() error {
		p, err := dev.alloc(want)
		dev.free(p)
		return err
	})
	if !errors.Is(err, errOutOfMemory) || !strings.Contains(err.Error(), "MiB") || !strings.Contains(err.Error(), dev.info.Name) {
		t.Fatalf("allocating %d bytes: %v; want an out-of-memory error naming the size and the GPU", want, err)
	}
	t.Log(err)
	// Still usable: a small dataset loads and steps.
	pts := synth.Clusters(1000, 32, 8, 3)
	cycle(t, pts, synth.AnchorsNear(pts, 8, 0.5, 4), 8)
	if after := freeMem(t, dev); before-after > 2<<20 {
		t.Errorf("free memory %d -> %d after the failed allocation", before, after)
	}
}

// Calls after Close return errors, never crash: a closed Dataset, a
// Dataset whose Device was closed, a Device closed twice.
func TestUseAfterClose(t *testing.T) {
	gpuDevice(t) // skips without a driver
	d, err := open()
	if err != nil {
		t.Fatal(err)
	}
	pts := synth.Clusters(500, 16, 4, 5)
	anchors := synth.AnchorsNear(pts, 4, 0.5, 6)
	ds, err := d.Load(pts)
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ds.Close(); err != nil {
		t.Errorf("second Dataset Close: %v", err)
	}
	if err := ds.SetAnchors(anchors, 4); err == nil {
		t.Error("SetAnchors on a closed Dataset succeeded")
	}
	if _, err := ds.Step(device.StepParams{Tau: 1, Rate: 1, MaxMove: 1}); err == nil {
		t.Error("Step on a closed Dataset succeeded")
	}
	ds2, err := d.Load(pts)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Device Close: %v", err)
	}
	if err := ds2.SetAnchors(anchors, 4); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("SetAnchors after the Device closed: %v", err)
	}
	if _, err := d.Load(pts); err == nil {
		t.Error("Load on a closed Device succeeded")
	}
	ds2.Close()
}

// A point or an anchor that is not finite leaves no bound for the
// fixed-point sums: Load and SetAnchors refuse it by name, and nothing
// stays allocated.
func TestNonFiniteRefused(t *testing.T) {
	dev := gpuDevice(t)
	before := freeMem(t, dev)
	pts := synth.Clusters(500, 20, 3, 1)
	bad := append([]uint16(nil), pts.Data...)
	bad[3*20+2] = 0x7c00 // +Inf
	_, err := dev.Load(device.Points{Data: bad, N: pts.N, Dim: pts.Dim})
	if !errors.Is(err, device.ErrNonFinite) || !strings.Contains(err.Error(), "point 3, dimension 2") {
		t.Fatalf("Load with +Inf at point 3, dimension 2: %v", err)
	}
	ds, err := dev.Load(pts)
	if err != nil {
		t.Fatal(err)
	}
	anchors := make([]float32, 4*20)
	anchors[2*20+5] = float32(math.NaN())
	if err := ds.SetAnchors(anchors, 4); !errors.Is(err, device.ErrNonFinite) || !strings.Contains(err.Error(), "anchor 2, dimension 5") {
		t.Errorf("SetAnchors with NaN at anchor 2, dimension 5: %v", err)
	}
	ds.Close()
	if after := freeMem(t, dev); after < before-(1<<20) {
		t.Errorf("free memory %d before, %d after", before, after)
	}
}
