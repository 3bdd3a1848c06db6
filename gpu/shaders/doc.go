// Package shaders will hold the WGSL kernels of the WebGPU backend, embedded
// with go:embed. Not written yet; see issue 5.
package shaders
