//go:build webgpu

package vlc

// Built with -tags webgpu, the WebGPU backend registers itself (rank 1:
// "auto" tries it after CUDA and before the CPU, and falls through when
// the machine has no adapter).
import _ "github.com/vlc-embed/vlc/gpu/webgpu"
