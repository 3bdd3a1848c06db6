//go:build !webgpu

package webgpu

import (
	"errors"

	"github.com/vlc-embed/vlc/anneal"
)

// buildHint says how to build the backend in.
const buildHint = "build with -tags webgpu (cgo: needs a C compiler; runs on a Vulkan, Metal or Direct3D 12 driver)"

// Open reports that this binary was built without WebGPU support.
func Open() (anneal.Device, error) {
	return nil, errors.New("not built with WebGPU support: " + buildHint)
}

func init() { anneal.RegisterUnbuilt("webgpu", buildHint) }

// OpenAny reports that this binary was built without WebGPU support.
func OpenAny() (anneal.Device, error) { return Open() }
