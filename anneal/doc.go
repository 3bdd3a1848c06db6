// Package anneal learns anchors (coarse centroids) for a set of points with an
// annealing loop of assign, robust reduce, update and maintenance (merge,
// split, re-seed). The schedule, the maintenance and the convergence test live
// here once; a device.Device (the CPU, CUDA or WebGPU backend) only runs the
// steps, with the points resident on it.
package anneal
