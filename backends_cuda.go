//go:build cuda

package vlc

// Built with -tags cuda, the CUDA backend registers itself (rank 0: "auto"
// tries it first and falls through to the next backend when the machine has
// no CUDA driver).
import _ "github.com/vlc-embed/vlc/gpu/cuda"
