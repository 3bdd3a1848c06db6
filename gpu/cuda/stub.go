//go:build !cuda

package cuda

import (
	"errors"

	"github.com/vlc-embed/vlc/anneal"
)

// buildHint says how to build the backend in.
const buildHint = "build with -tags cuda (pure Go: neither cgo nor the CUDA toolkit is needed)"

// Open reports that this binary was built without CUDA support.
func Open() (anneal.Device, error) {
	return nil, errors.New("not built with CUDA support: " + buildHint)
}

// OpenDevices reports that this binary was built without CUDA support.
func OpenDevices([]int) ([]anneal.Device, error) {
	return nil, errors.New("not built with CUDA support: " + buildHint)
}

func init() { anneal.RegisterUnbuilt("cuda", buildHint) }
