// Package webgpu is the backend for any GPU (build tag webgpu): WGSL
// kernels (package backend/webgpu/shaders) run through
// github.com/cogentcore/webgpu, a cgo binding of wgpu-native, on Vulkan,
// Metal or Direct3D 12, and in CI on the CPU through Mesa's lavapipe
// Vulkan driver. Built without the tag,
// Open says so, and the package registers only how to build it in
// (device.RegisterUnbuilt).
//
// The design is CUDA's (backend/cuda): the points go to the device once, as
// float16 packed two per u32; anchors, assignments and statistics stay
// there; a Step brings back 16 bytes (changed count and energy). Point sets
// larger than the adapter's maxStorageBufferBindingSize are split into
// chunks, one binding each.
//
// Semantics against the reference backend (package cpu), per point: the
// argmin runs on |a|^2 - 2 x.a with float32 anchors and float32
// accumulation (fused multiply-adds, in order of the dimension), ties to
// the lowest anchor index; distance = max(that + |x|^2, 0), as the CPU
// computes it. An assignment can differ from the CPU's only where two
// anchors are within float32 rounding of each other (internal/parity.NearTie). The
// per-anchor sums are float32 per invocation, combined in a fixed tree;
// the order of an anchor's points depends on the atomics of the counting
// sort, so the last bits of the anchors and statistics can vary from run
// to run.
//
// The Device also searches indexes (device.Searcher, search.go): the
// entries of an index stay on the device, and a batch of queries runs
// through five kernels (rotate, coarse, probe, score, topk) and brings
// back only each query's best entries and their distances.
//
// docs/WEBGPU.md describes the buffers, the kernels and what crosses the
// bus, with measured numbers.
package webgpu
