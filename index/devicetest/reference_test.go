package devicetest_test

import (
	"testing"

	"github.com/vlc-embed/vlc/index/devicetest"
)

// The plain-Go search of device.IndexData gives the CPU path's hits: the
// description the GPU kernels implement is right.
func TestReferenceParity(t *testing.T) {
	devicetest.Parity(t, devicetest.Reference(), devicetest.Options{})
}
