//go:build !webgpu

package webgpu

import (
	"errors"

	"github.com/vlc-embed/vlc/anneal"
)

// Open reports that this binary was built without WebGPU support.
func Open() (anneal.Device, error) {
	return nil, errors.New("not built with WebGPU support (build with -tags webgpu)")
}

// OpenAny reports that this binary was built without WebGPU support.
func OpenAny() (anneal.Device, error) { return Open() }
