// Package webgpu will be the WebGPU backend (build tag webgpu) for any GPU:
// WGSL kernels through github.com/cogentcore/webgpu. Not built yet; see
// issue 5.
package webgpu
