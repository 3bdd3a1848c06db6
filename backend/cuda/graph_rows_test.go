//go:build cuda

package cuda

import (
	"testing"

	graphtest "github.com/vlc-embed/vlc/graph/devicetest"
)

// A graph build's measuring and pruning give the host's bits, list for
// list (the suite's cases), in one chunk and cut into chunks of at most
// 100 entries (a long list then alone in its chunk).
func TestGraphRowsParity(t *testing.T) {
	dev := gpuDevice(t)
	graphtest.Parity(t, dev)
	defer func(c int) { graphChunk = c }(graphChunk)
	graphChunk = 100
	graphtest.Parity(t, dev)
}
