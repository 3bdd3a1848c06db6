//go:build webgpu

package webgpu

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/anneal/devicetest"
	"github.com/vlc-embed/vlc/backend/cpu"
	"github.com/vlc-embed/vlc/backend/webgpu/shaders"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/parity"
	"github.com/vlc-embed/vlc/internal/synth"
)

// TestMain points XDG_RUNTIME_DIR at the temporary folder where it is
// unset, as the vlc command does (see cmd/vlc/webgpu.go): the test binary
// owns its process, and Mesa's warnings would bury the output.
func TestMain(m *testing.M) {
	if _, ok := os.LookupEnv("XDG_RUNTIME_DIR"); !ok {
		os.Setenv("XDG_RUNTIME_DIR", os.TempDir())
	}
	os.Exit(m.Run())
}

// testDevice is the adapter, opened once for the test binary. Without one (no
// Vulkan driver: install mesa-vulkan-drivers for lavapipe; make test does
// so where it can) the tests skip, unless VLC_WEBGPU_REQUIRE is set (make
// test sets it once lavapipe is installed): then they fail.
var testDevice = devicetest.Shared[*Device]{
	Open: func() (*Device, error) { return open(true) },
	Unavailable: func(err error) bool {
		return strings.HasPrefix(err.Error(), "no WebGPU adapter") && os.Getenv("VLC_WEBGPU_REQUIRE") == ""
	},
	Describe: func(d *Device) string {
		return fmt.Sprintf("%s; max storage binding %d bytes, max buffer %d", d.Name(), d.info.MaxBinding, d.info.MaxBuffer)
	},
}

func gpuDevice(t *testing.T) *Device { t.Helper(); return testDevice.Get(t) }

// The conformance suite of training backends (anneal/devicetest), for
// each assign tile: the default sizes straddle the workgroups (64 and 128
// points and anchors per assign tile, 256 invocations elsewhere, 16 and
// 32 float16 values per step of the dimension).
func TestConformance(t *testing.T) {
	dev := gpuDevice(t)
	var tiles []string
	for _, tile := range shaders.AssignTiles {
		tiles = append(tiles, tile.Name)
	}
	devicetest.Run(t, dev, devicetest.Options{
		Variants: tiles,
		UseVariant: func(ds device.Dataset, name string) bool {
			w := ds.(*dataset)
			for _, c := range w.dev.tiles {
				if c.Name == name {
					w.tile = c
					return true
				}
			}
			return false
		},
		// A steady-state Step moves 16 bytes to the host (changed,
		// energy) and the 48 bytes of its parameters to the device;
		// loading moves the points once (rows padded to 32 float16
		// values: none at the suite's d = 128), each chunk's header
		// and the parameters, SetAnchors the anchors and the
		// parameters.
		Transfers: &devicetest.Transfers{
			Load: func(ds device.Dataset, n, d int) int64 {
				return int64(n*d*2) + int64(len(ds.(*dataset).chunks))*chunkSize + paramsSize
			},
			SetAnchors: func(m, d int) int64 { return int64(m*d*4) + paramsSize },
			StepUp:     paramsSize,
			StepDown:   scalarHead,
		},
	})
}

// Split into chunks (as the binding limit splits large point sets), a
// point set gives the same results as in one piece: several Steps, then
// assignments, anchors, counts and energy against the CPU.
func TestChunks(t *testing.T) {
	dev := gpuDevice(t)
	const n, d, m = 1000, 40, 33
	pts := synth.Clusters(n, d, 6, 11)
	anchors := synth.AnchorsNear(pts, m, 0.5, 2)
	run := func(dv device.Device) (devicetest.Result, int) {
		ds, err := dv.Load(pts)
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		chunks := 1
		if w, ok := ds.(*dataset); ok {
			chunks = len(w.chunks)
		}
		if err := ds.SetAnchors(anchors, m); err != nil {
			t.Fatal(err)
		}
		var st device.StepStats
		for range 3 {
			if st, err = ds.Step(device.StepParams{Tau: 20, Rate: 0.5, MaxMove: 3}); err != nil {
				t.Fatal(err)
			}
		}
		return devicetest.Read(t, ds, st, n, m, d), chunks
	}
	testChunkRows = 256
	g, chunks := run(dev)
	testChunkRows = 0
	if chunks != 4 {
		t.Fatalf("%d chunks, want 4 of 256 rows", chunks)
	}
	c, _ := run(cpu.New())
	agr := parity.Compare(pts.Data, d, g.Anchors, g.Assign, c.Assign, false)
	if agr.Mismatches > 0 || agr.Equal < n*99/100 {
		t.Errorf("assignments after 3 steps: %+v", agr)
	}
	if r := parity.RelDiff(g.Stats.Energy, c.Stats.Energy); r > 1e-3 {
		t.Errorf("energy %v, cpu %v (rel %.2g)", g.Stats.Energy, c.Stats.Energy, r)
	}
	devicetest.CheckCounts(t, m, g)
	for i := range g.Anchors {
		if math.Abs(float64(g.Anchors[i]-c.Anchors[i])) > 1e-3*(1+math.Abs(float64(c.Anchors[i]))) {
			t.Fatalf("anchor %d dim %d: %v, cpu %v", i/d, i%d, g.Anchors[i], c.Anchors[i])
		}
	}
}

// A tile this adapter cannot run, named by VLC_WEBGPU_TILE, is refused with
// the names it can run.
func TestUnknownTile(t *testing.T) {
	dev := gpuDevice(t)
	t.Setenv("VLC_WEBGPU_TILE", "t999")
	_, err := dev.Load(synth.Clusters(10, 4, 2, 1))
	if err == nil || !strings.Contains(err.Error(), `VLC_WEBGPU_TILE="t999": want one of t64`) {
		t.Errorf("Load with an unknown tile: %v", err)
	}
}
