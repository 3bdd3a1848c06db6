package graph

import (
	"context"
	"errors"
	"testing"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/graph/devicetest"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/quant"
)

// A build that measures and prunes on a device (here the host reference
// of device.RowMeter's contract) gives the bytes of the build without:
// candidates from a batched search (measured there) or from the index's
// search row by row, with and without refinement passes (their searches
// on the device, some cut short there and run again on the CPU), float32
// rows and a .f16 file's rows in place, the first pruning and the
// searches cut into several chunks. Where the dimension is not a multiple
// of 8 the device is not used.
func TestDeviceSameGraph(t *testing.T) {
	defer func(c, w int) { pruneChunk, walkChunk = c, w }(pruneChunk, walkChunk)
	pruneChunk, walkChunk = 700, 500
	for _, d := range []int{32, 12} {
		base, _ := clustered(1500, 0, d)
		ix := writeIndex(t, base, 8, quant.KindRotated, 4, index.L2)
		file := writeF16(t, toHalf(base.x), d)
		opts := []BuildOptions{
			{NProbe: 4, Searcher: ix},
			{NProbe: 4, Searcher: ix, Passes: -1, Candidates: 40, Degree: 7},
			{NProbe: 4, Degree: 12, Passes: 2},
			{Degree: 8, Alpha: 1.3},
			{NProbe: 4, Searcher: ix, BuildEf: 300}, // past device.MaxWalkEf: the searches on the CPU
		}
		if d%8 != 0 {
			opts = opts[:1] // the device does not apply: one build shows it left to the CPU
		}
		for _, opt := range opts {
			onDevice(t, ix, base, file, opt, devicetest.Reference{}, func(name, where string, times BuildTimes) {
				if times.Device != (d%8 == 0) {
					t.Errorf("d %d: BuildTimes.Device %v", d, times.Device)
				}
				if where != "" {
					t.Errorf("d %d, %s rows, %+v: on the device, the %s differs", d, name, opt, where)
				}
			})
		}
	}
}

// onDevice builds ix's graph with opt on the CPU, then with dev from base
// and from file (its float16 copy), its searches capped at 8 beam widths
// for the first and at one for the second (most of them past it, run
// again on the CPU), and hands check each build's rows, its first
// difference from the CPU's bytes ("" for none) and its times.
func onDevice(t *testing.T, ix *index.Index, base memRows, file index.Rows, opt BuildOptions, dev device.RowMeter, check func(rows, where string, times BuildTimes)) {
	t.Helper()
	defer func(c int) { walkCap = c }(walkCap)
	ctx := context.Background()
	ref, err := Build(ctx, ix, base, opt)
	if err != nil {
		t.Fatal(err)
	}
	for name, rows := range map[string]index.Rows{"float32": base, ".f16": file} {
		walkCap = 8
		if name == ".f16" {
			walkCap = 1
		}
		o := opt
		o.Device = dev
		var times BuildTimes
		o.Times = &times
		g, err := Build(ctx, ix, rows, o)
		if err != nil {
			t.Fatal(err)
		}
		check(name, sameBytes(ref, g), times)
	}
}

// A device that fails fails the build, with its error; one that cannot
// take the rows leaves the build to the CPU (the same bytes), saying why.
func TestDeviceFails(t *testing.T) {
	base, _ := clustered(600, 0, 16)
	ix := writeIndex(t, base, 4, quant.KindRotated, 4, index.L2)
	ctx := context.Background()
	for _, fail := range []string{"measure", "prune", "adjacency", "walk"} {
		_, err := Build(ctx, ix, base, BuildOptions{NProbe: 2, Searcher: ix, Device: failingDevice{fail}})
		if !errors.Is(err, errDevice) {
			t.Errorf("%s fails: Build error %v, want errDevice", fail, err)
		}
	}
	ref, err := Build(ctx, ix, base, BuildOptions{NProbe: 2, Searcher: ix})
	if err != nil {
		t.Fatal(err)
	}
	var times BuildTimes
	g, err := Build(ctx, ix, base, BuildOptions{NProbe: 2, Searcher: ix, Device: failingDevice{"load"}, Times: &times})
	if err != nil || times.Device || !errors.Is(times.DeviceSkipped, errDevice) {
		t.Fatalf("rows refused: Build error %v, Device %v, DeviceSkipped %v; want the CPU's build and errDevice", err, times.Device, times.DeviceSkipped)
	}
	if where := sameBytes(ref, g); where != "" {
		t.Errorf("rows refused: the %s differs from the CPU's", where)
	}
}

var errDevice = errors.New("the device is on fire")

// failingDevice is the reference but for one step, which fails.
type failingDevice struct{ step string }

func (f failingDevice) LoadRows(rows device.HostRows) (device.DeviceRows, error) {
	if f.step == "load" {
		return nil, errDevice
	}
	dr, err := devicetest.Reference{}.LoadRows(rows)
	return failingRows{dr, f.step}, err
}

type failingRows struct {
	device.DeviceRows
	step string
}

func (f failingRows) Measure(l device.RowLists) error {
	if f.step == "measure" {
		return errDevice
	}
	return f.DeviceRows.Measure(l)
}

func (f failingRows) LoadAdjacency(adj []uint32, r int) error {
	if f.step == "adjacency" {
		return errDevice
	}
	return f.DeviceRows.LoadAdjacency(adj, r)
}

func (f failingRows) Walk(w device.RowWalks) error {
	if f.step == "walk" {
		return errDevice
	}
	return f.DeviceRows.Walk(w)
}

func (f failingRows) Prune(l device.RowLists, r int, alpha2 float32, kept []uint32, keptDists []float32) error {
	if f.step == "prune" {
		return errDevice
	}
	return f.DeviceRows.Prune(l, r, alpha2, kept, keptDists)
}
