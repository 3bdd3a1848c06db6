//go:build webgpu

package webgpu

import (
	"testing"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/devicetest"
	"github.com/vlc-embed/vlc/quant"
)

// The pq and sq8 searches give the CPU path's hits (the suite's
// CodeCases; TestSearchParity runs them too, after the rotated cases).
func TestSearchCodes(t *testing.T) {
	devicetest.Parity(t, gpuDevice(t), devicetest.Options{Cases: devicetest.CodeCases[:1]})
}

// The rest of the codes' cases, apart so that no test runs past 20 s
// under -race on lavapipe (the first case alone took 14 s).
func TestSearchCodesRest(t *testing.T) {
	devicetest.Parity(t, gpuDevice(t), devicetest.Options{Cases: devicetest.CodeCases[1:]})
}

// Split into parts of 7 tiles and batches of a few queries (a 64 KiB
// budget), sorted in global memory: the same hits.
func TestSearchCodesSplit(t *testing.T) {
	setKnobs(t, 7, 32, 64<<10)
	devicetest.Parity(t, gpuDevice(t), devicetest.Options{Cases: []devicetest.Case{
		{Name: "split-pq-ipcodes-d48-b2", N: 499, Dim: 48, Lists: 7, Bits: 2, Metric: index.IP, IPCodes: true, Queries: 37, Code: quant.KindPQ},
		{Name: "split-sq8-l2-d33", N: 300, Dim: 33, Lists: 5, Bits: 8, Metric: index.L2, Queries: 23, Code: quant.KindSQ8},
	}})
}

// A pq or sq8 description the kernels cannot search is refused, saying
// why.
func TestSearchCodesErrors(t *testing.T) {
	d := gpuDevice(t)
	data := func(code device.Code, cd device.CodeData) *device.IndexData {
		return &device.IndexData{N: 3, Dim: 4, Lists: 1, Bits: 8, Words: 1, RotP: 4, RotAnchors: make([]float32, 4), Norms: make([]float32, 1),
			Offsets: []uint64{0, 3}, Code: code, CodeData: cd}
	}
	for _, tc := range []struct {
		data *device.IndexData
		want string
	}{
		{data(device.CodePQ, device.CodeData{Subspaces: 2, Codebooks: make([]float32, 10), RotMean: make([]float32, 4), Grids: make([]float32, 4)}),
			"webgpu: index to upload: pq: 10 centroid values, 4 mean values, 4 grid values for dimension 4 and 1 lists"},
		{data(device.CodePQ, device.CodeData{Subspaces: 5}), "webgpu: index to upload: pq: 5 subspaces of dimension 4"},
		{data(device.CodeSQ8, device.CodeData{Lo: make([]float32, 3), Step: make([]float32, 4)}),
			"webgpu: index to upload: sq8: 3 and 4 range values for 1 lists of dimension 4"},
		{data(7, device.CodeData{}), "webgpu: index to upload: no search for code 7"},
	} {
		if _, err := d.UploadIndex(tc.data); err == nil || err.Error() != tc.want {
			t.Errorf("UploadIndex: %v, want %q", err, tc.want)
		}
	}
}
