// Package cuda will be the NVIDIA backend (build tag cuda): the driver API
// through purego, float16 points resident on the device, fused tensor-core
// assign. Not built yet; see issue 4.
package cuda
