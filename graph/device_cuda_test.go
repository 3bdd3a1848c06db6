//go:build cuda

package graph

import (
	"context"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/backend/cuda"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/quant"
)

// A graph whose candidates come from the index's search on a GPU is
// within the tolerance (tolerance_test.go) of the CPU's graph: the
// device's estimates round otherwise and may order near ties otherwise,
// so a row's last candidates may differ, but at least 95 % of the edges
// are shared and recall@10 is within 0.01. For the default build and a
// fast one (no refinement pass, more candidates). Skips without a CUDA
// driver or device.
func TestDeviceCandidates(t *testing.T) {
	dev := openCUDA(t)
	t.Logf("device: %s", dev.Name())
	sd, ok := dev.(device.Searcher)
	if !ok {
		t.Fatalf("%s has no device search", dev.Name())
	}
	base, queries := clustered(6000, 300, 64)
	ix := writeIndex(t, base, 32, quant.KindRotated, 4, index.L2)
	di, err := ix.OnDevice(sd)
	if err != nil {
		t.Fatal(err)
	}
	defer di.Close()
	truth := index.Exact(base, queries, 10, index.L2)
	ctx := context.Background()
	for _, opt := range []BuildOptions{{NProbe: 8}, {NProbe: 8, Passes: -1, Candidates: 128}} {
		ref, err := Build(ctx, ix, base, opt)
		if err != nil {
			t.Fatal(err)
		}
		o := opt
		o.Searcher = di
		var times BuildTimes
		o.Times = &times
		g, err := Build(ctx, ix, base, o)
		if err != nil {
			t.Fatal(err)
		}
		d, err := compareGraphs(t, ref, g, base, queries, truth)
		same := sameBytes(ref, g)
		if same == "" {
			same = "the same bytes"
		} else {
			same = "the " + same + " differs"
		}
		t.Logf("candidates %d, passes %d: %v; %s; search %v", opt.Candidates, opt.Passes, d, same, times.Search)
		if err != nil {
			t.Errorf("candidates %d, passes %d: %v", opt.Candidates, opt.Passes, err)
		}
	}
}

// A build that measures and prunes on the GPU (BuildOptions.Device) gives
// the bytes of the CPU's build, with the CPU index as the batched
// searcher (so only the measuring, the refinement's searches and the
// pruning move): float32 rows and a .f16 file's rows in place, with and
// without the refinement pass, its searches cut short on the device and
// run again on the CPU (a cap of one beam width) or not.
func TestDeviceRowsSameGraph(t *testing.T) {
	dev := openCUDA(t)
	m, ok := dev.(device.RowMeter)
	if !ok {
		t.Fatalf("%s measures no rows", dev.Name())
	}
	base, _ := clustered(6000, 0, 64)
	ix := writeIndex(t, base, 32, quant.KindRotated, 4, index.L2)
	file := writeF16(t, toHalf(base.x), 64)
	for _, opt := range []BuildOptions{{NProbe: 8, Searcher: ix}, {NProbe: 8, Searcher: ix, Passes: -1, Candidates: 128}} {
		onDevice(t, ix, base, file, opt, m, func(name, where string, _ BuildTimes) {
			if where != "" {
				t.Errorf("%s rows, candidates %d, passes %d: on %s, the %s differs", name, opt.Candidates, opt.Passes, dev.Name(), where)
			}
		})
	}
}

// openCUDA opens device 0, closed when the test ends; it skips the test
// without a CUDA driver or device.
func openCUDA(t *testing.T) device.Device {
	t.Helper()
	dev, err := cuda.Open()
	if err != nil {
		if strings.HasPrefix(err.Error(), "no CUDA") {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}
