//go:build cuda

package cuda

import _ "embed"

// kernelsPTX is kernels.cu compiled to PTX for compute_80 (see generate.go);
// the driver compiles it for the GPU at hand when a Device opens.
//
//go:embed kernels.ptx
var kernelsPTX []byte
