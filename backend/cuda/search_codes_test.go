//go:build cuda

package cuda

import (
	"testing"

	"github.com/vlc-embed/vlc/index"
	searchtest "github.com/vlc-embed/vlc/index/devicetest"
	"github.com/vlc-embed/vlc/quant"
)

// The pq and sq8 searches give the CPU path's hits (the suite's
// CodeCases).
func TestCodesParity(t *testing.T) {
	searchtest.Parity(t, gpuDevice(t), searchtest.Options{Cases: searchtest.CodeCases})
}

// Dimension 768: pq's table of 384 subspaces (384 KiB) is read from
// global memory rather than shared; sq8's per-dimension terms take 6 KiB.
// A batch split into passes of 7 gives the same hits.
func TestCodesWide(t *testing.T) {
	dev := gpuDevice(t)
	searchtest.Parity(t, dev, searchtest.Options{Cases: []searchtest.Case{
		{Name: "pq-l2-d768-b4", N: 777, Dim: 768, Lists: 9, Bits: 4, Metric: index.L2, Queries: 40, Code: quant.KindPQ},
		{Name: "pq-ipcodes-d768-b1", N: 500, Dim: 768, Lists: 5, Bits: 1, Metric: index.IP, IPCodes: true, Queries: 30, Code: quant.KindPQ},
		{Name: "sq8-cos-d768", N: 777, Dim: 768, Lists: 9, Bits: 8, Metric: index.Cosine, Queries: 40, Code: quant.KindSQ8},
	}})
	t.Setenv("VLC_CUDA_SEARCH_BATCH", "7")
	searchtest.Parity(t, dev, searchtest.Options{Cases: []searchtest.Case{searchtest.CodeCases[0], searchtest.CodeCases[4]}})
}
