package device

import "strings"

// Memory bandwidth of the GPUs whose figures are known: the floor of a
// search that reads every probed code once is the bytes it reads over
// this. Figures are NVIDIA's datasheet peaks (SXM unless named).
var bandwidths = []struct {
	name        string  // a part of the GPU's name, as its backend reports it
	bytesPerSec float64 // peak memory bandwidth
}{
	{"H100 PCIe", 2.0e12},
	{"H100 NVL", 3.9e12},
	{"H100", 3.35e12},
	{"H200", 4.8e12},
}

// MemoryBandwidth is the peak memory bandwidth, in bytes per second, of
// the GPU a backend's name mentions (Device.Name: "cuda (NVIDIA H100 80GB
// HBM3, ...)"), and false for a GPU whose figure is not known.
func MemoryBandwidth(name string) (float64, bool) {
	for _, b := range bandwidths {
		if strings.Contains(name, b.name) {
			return b.bytesPerSec, true
		}
	}
	return 0, false
}
