package vlc

// The backends register themselves in init: the CPU always, and CUDA
// (rank 0: "auto" tries it first) and WebGPU (rank 1) when built with
// their tags; without its tag a GPU backend's stub registers only how to
// build it in, so that asking for it by name says so.
import (
	_ "github.com/vlc-embed/vlc/backend/cpu"
	_ "github.com/vlc-embed/vlc/backend/cuda"
	_ "github.com/vlc-embed/vlc/backend/webgpu"
)
