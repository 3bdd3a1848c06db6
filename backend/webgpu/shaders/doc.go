// Package shaders holds the WGSL kernels of the WebGPU backend
// (backend/webgpu), embedded with go:embed so that a binary carries them.
//
// Every kernel shares one header of constants, made here from Go constants
// by Source: the tile sizes live once, in shaders.go, and the Go side that
// sizes buffers and dispatches reads the same values. WGSL has no float16
// type that the bundled compiler accepts, so points are float16 packed two
// per u32 (element 2w in the low half of word w) and read with the core
// builtin unpack2x16float.
package shaders
