//go:build cuda

package cuda

import (
	"context"
	"errors"
	"testing"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index"
	searchtest "github.com/vlc-embed/vlc/index/devicetest"
)

// The device search gives the CPU path's hits (index/devicetest's suite:
// every bits setting and metric, entry counts and lists that straddle the
// 32-entry tiles and the 256-thread blocks, nprobe 1 to all lists).
func TestSearchParity(t *testing.T) {
	searchtest.Parity(t, gpuDevice(t), searchtest.Options{})
}

// A batch larger than one pass is split into passes with the same hits.
func TestSearchSplit(t *testing.T) {
	dev := gpuDevice(t)
	t.Setenv("VLC_CUDA_SEARCH_BATCH", "7")
	searchtest.Parity(t, dev, searchtest.Options{Cases: searchtest.DefaultCases[:1]})
}

// Dimensions whose scan needs more than 48 KiB of shared memory (the
// opt-in), and one that is a power of two (one Walsh-Hadamard block).
func TestSearchWide(t *testing.T) {
	searchtest.Parity(t, gpuDevice(t), searchtest.Options{Cases: []searchtest.Case{
		{Name: "l2-d1536-b4", N: 400, Dim: 1536, Lists: 5, Bits: 4, Metric: index.L2, Queries: 20},
		{Name: "cos-d1024-b8", N: 400, Dim: 1024, Lists: 6, Bits: 8, Metric: index.Cosine, Queries: 20},
	}})
}

// 100 uploads, searches and closes leave the device's free memory as
// it was.
func TestSearchNoLeak(t *testing.T) {
	dev := gpuDevice(t)
	b := searchtest.Build(t, t.TempDir(), searchtest.DefaultCases[0])
	cycle := func() {
		di, err := b.Index.OnDevice(dev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := di.SearchBatch(context.Background(), b.Queries, index.SearchOptions{K: 10, NProbe: 5}); err != nil {
			t.Fatal(err)
		}
		if di.DeviceBytes() <= 0 {
			t.Errorf("DeviceBytes %d", di.DeviceBytes())
		}
		if err := di.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cycle() // the module and the staging buffer stay loaded
	var before int64
	dev.run(func() (err error) { before, _, err = dev.memInfo(); return err })
	for range 100 {
		cycle()
	}
	var after int64
	dev.run(func() (err error) { after, _, err = dev.memInfo(); return err })
	if after != before {
		t.Errorf("free device memory %d before 100 cycles, %d after", before, after)
	}
}

// A batch whose one query cannot fit is a clear out-of-memory error.
func TestSearchOutOfMemory(t *testing.T) {
	dev := gpuDevice(t)
	r := &resident{d: dev, data: &device.IndexData{Dim: 8, Lists: 1 << 40}}
	_, err := r.batchSize(1, 1, 1)
	if !errors.Is(err, errOutOfMemory) {
		t.Fatalf("batchSize: %v, want errOutOfMemory", err)
	}
	t.Log(err)
}
