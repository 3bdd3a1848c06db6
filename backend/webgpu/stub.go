//go:build !webgpu

package webgpu

import "github.com/vlc-embed/vlc/device"

// Open reports that this binary was built without WebGPU support.
func Open() (device.Device, error) { return nil, device.NotBuilt("WebGPU", device.BuildWebGPU) }

func init() { device.RegisterUnbuilt("webgpu", device.BuildWebGPU) }

// OpenAny reports that this binary was built without WebGPU support.
func OpenAny() (device.Device, error) { return Open() }
