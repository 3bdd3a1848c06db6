//go:build !cuda

package cuda

import "github.com/vlc-embed/vlc/device"

// Open reports that this binary was built without CUDA support.
func Open() (device.Device, error) { return nil, device.NotBuilt("CUDA", device.BuildCUDA) }

// OpenDevices reports that this binary was built without CUDA support.
func OpenDevices([]int) ([]device.Device, error) {
	return nil, device.NotBuilt("CUDA", device.BuildCUDA)
}

func init() { device.RegisterUnbuilt("cuda", device.BuildCUDA) }
