//go:build !cuda

package cuda

import (
	"errors"

	"github.com/vlc-embed/vlc/anneal"
)

// Open reports that this binary was built without CUDA support.
func Open() (anneal.Device, error) {
	return nil, errors.New("not built with CUDA support (build with -tags cuda)")
}
