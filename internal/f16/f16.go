// Package f16 converts between IEEE 754 half precision (float16, stored as
// its uint16 bit pattern) and float32.
//
// Decoding goes through a 65536-entry table (256 KiB) built once at package
// initialisation from github.com/x448/float16, so it is exact for every bit
// pattern, including subnormals, infinities and NaN payloads. Encoding rounds
// to nearest, ties to even.
package f16

import "github.com/x448/float16"

// table[h] is the float32 value of the float16 bit pattern h.
var table [1 << 16]float32

func init() {
	for i := range table {
		table[i] = float16.Frombits(uint16(i)).Float32()
	}
}

// ToFloat32 returns the float32 value of the float16 bit pattern h. The
// conversion is exact.
func ToFloat32(h uint16) float32 { return table[h] }

// FromFloat32 returns the float16 bit pattern nearest to f, rounding ties to
// even. Values too large for float16 become ±Inf, NaN stays NaN.
func FromFloat32(f float32) uint16 { return float16.Fromfloat32(f).Bits() }

// DecodeRow sets dst[i] = ToFloat32(src[i]) for every i < len(src).
// It panics if len(dst) < len(src).
func DecodeRow(dst []float32, src []uint16) {
	if len(dst) < len(src) {
		panic("f16.DecodeRow: len(dst) < len(src)")
	}
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = table[h]
	}
}

// IsFinite reports whether h is neither an infinity nor a NaN, that is,
// whether its exponent bits are not all ones.
func IsFinite(h uint16) bool { return h&0x7c00 != 0x7c00 }
