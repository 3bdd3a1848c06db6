//go:build cuda

package cuda

import _ "embed"

// kernelsPTX is kernels.cu compiled to PTX for compute_80 (see generate.go);
// the driver compiles it for the GPU at hand when a Device opens.
//
//go:embed kernels.ptx
var kernelsPTX []byte

// kernelsSM90PTX is kernels_sm90.cu (kernels.cu and the wgmma assign)
// compiled to PTX for sm_90a, loaded instead on compute capability 9.0.
//
//go:embed kernels_sm90.ptx
var kernelsSM90PTX []byte
