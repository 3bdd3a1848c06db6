// Package cuda is the NVIDIA backend (build tag cuda): the driver API
// (libcuda.so.1) bound at run time with purego, so that neither cgo nor the
// CUDA headers are needed to build; float16 points resident on the device;
// a fused tensor-core assign whose n x m distance matrix never reaches
// memory. Built without the tag, Open says so, and the package registers
// only how to build it in (device.RegisterUnbuilt).
//
// Semantics against the reference backend (package cpu), per point:
// the argmin runs on |a16|^2 - 2 x.a16 with a16 the anchor rounded to
// float16 (the tensor cores multiply float16 by float16, accumulating in
// float32), ties to the lowest anchor index; so an assignment can differ
// from the CPU's where two anchors are within the float16 rounding of the
// anchors of each other (a near-tie, see internal/parity.NearTie). Distances, energy and the
// Huber weights are then recomputed against the float32 anchor as
// sum (x_j - a_j)^2 in float32. Per-anchor sums are 64-bit fixed point
// (fixed.go), so the anchors, statistics and energies are the same bits
// from run to run.
//
// docs/CUDA.md describes the buffers, the kernels and what crosses the bus,
// with measured numbers.
package cuda
