package vecfile

import (
	"encoding/binary"
	"io/fs"
	"math"
	"runtime"
	"runtime/debug"
	"sync/atomic"

	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/fault"
	"github.com/vlc-embed/vlc/internal/par"
)

// CheckFinite scans every value and returns an error wrapping ErrNonFinite
// for the first NaN or ±Inf in the lowest-numbered bad row, worded
// "<path>: row 17, column 3: value NaN" (or +Inf, -Inf). In float64 .npy
// data a finite value beyond the float32 range, which Row turns into ±Inf,
// is reported the same way: "<path>: row 17, column 3: value 1e+39 is
// outside the float32 range (|x| <= 3.4028235e+38)". Rows are scanned in
// blocks by runtime.GOMAXPROCS(0) goroutines; the result does not depend on
// scheduling. After Close it returns an error wrapping fs.ErrClosed.
func (m *Matrix) CheckFinite() error {
	if m.data == nil {
		return newError(fs.ErrClosed, m.path, "CheckFinite after Close")
	}
	return m.CheckFiniteRows(0, m.n)
}

// CheckFiniteRows is CheckFinite for rows lo to hi-1 only (rows are
// still named by their number in the file); a range outside the file is
// an error wrapping ErrShape.
func (m *Matrix) CheckFiniteRows(lo, hi int) error {
	return m.CheckRows(lo, hi, false)
}

// CheckRows is CheckFiniteRows that, with nonZero set, also refuses a
// row whose every value is zero, in the same pass over the data: the
// lowest row that is either is reported, a zero one wrapping ErrZero,
// worded "<path>: row 17: every value is 0". A float64 value so small
// that it reads as 0 in float32 (|x| <= 2^-150) counts as 0. (The cosine
// metric refuses zero rows: they have no direction.) A row that is not
// zero is seldom zero in its first values, so the test mostly reads one
// word a row.
func (m *Matrix) CheckRows(lo, hi int, nonZero bool) (err error) {
	defer fault.Catch(&err, debug.SetPanicOnFault(true), m.path, ErrChanged)
	if m.data == nil {
		return newError(fs.ErrClosed, m.path, "CheckFinite after Close")
	}
	if lo < 0 || hi > m.n || lo > hi {
		return newError(ErrRows, m.path, "rows %d to %d: the file has %d", lo, hi, m.n)
	}
	contiguous := m.skip == 0 && m.stride == m.dim*m.elem
	anyBad, abs, limit := anyBadF32, uint64(absF32), uint64(0)
	switch m.elem {
	case 2:
		anyBad, abs = anyBadF16, absF16
	case 8:
		anyBad, abs, limit = anyBadF64, absF64, zeroF64Bits
	}
	first := lo
	bad := parallelFirst(hi-lo, m.blockRows(), func(lo, hi int) int {
		lo, hi = lo+first, hi+first
		if contiguous && !anyBad(m.data[lo*m.stride:hi*m.stride]) {
			if !nonZero {
				return -1
			}
			for i := lo; i < hi; i++ { // the block is in cache
				if isZero(m.rowBytes(i), abs, limit) {
					return i - first
				}
			}
			return -1
		}
		for i := lo; i < hi; i++ {
			if b := m.rowBytes(i); anyBad(b) || nonZero && isZero(b, abs, limit) {
				return i - first
			}
		}
		return -1
	})
	if bad == hi-lo {
		return nil
	}
	bad += first
	b := m.rowBytes(bad)
	for j := 0; j < m.dim; j++ {
		var v float64
		switch m.elem {
		case 2:
			h := binary.LittleEndian.Uint16(b[2*j:])
			if h&0x7c00 != 0x7c00 {
				continue
			}
			v = float64(f16.ToFloat32(h))
		case 8:
			u := binary.LittleEndian.Uint64(b[8*j:])
			if u&^(1<<63) <= maxF32Bits {
				continue
			}
			v = math.Float64frombits(u)
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				return newError(ErrNonFinite, m.path, "row %d, column %d: value %g is outside the float32 range (|x| <= %g)",
					bad, j, v, float32(math.MaxFloat32))
			}
		default:
			v = float64(math.Float32frombits(le32(b[4*j:])))
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				continue
			}
		}
		return newError(ErrNonFinite, m.path, "row %d, column %d: value %s", bad, j, nonFiniteName(v))
	}
	if nonZero && isZero(b, abs, limit) {
		if m.elem == 8 && !isZero(b, absF64, 0) { // tiny float64 values, not 0
			return newError(ErrZero, m.path, "row %d: every value is 0 as float32 (|x| <= 2^-150)", bad)
		}
		return newError(ErrZero, m.path, "row %d: every value is 0", bad)
	}
	panic("vecfile: CheckFinite: bad row without a bad value") // unreachable
}

// Masks of the bits of a 64-bit word of float16, float32 and float64
// values without their signs.
const (
	absF16 = 0x7fff7fff7fff7fff
	absF32 = 0x7fffffff7fffffff
	absF64 = 1<<63 - 1
)

// zeroF64Bits is the float64 bit pattern of 2^-150, half of float32's
// least subnormal: a float64 whose bits less the sign are at most it reads
// as 0 in float32 (round to nearest, ties to even), as Row converts it.
const zeroF64Bits = 0x3690000000000000

// isZero reports whether the row b (little-endian words of values) is
// zero: no word w has w&abs > limit, abs clearing each value's sign, limit
// 0 (float16, float32: every value is +-0) or zeroF64Bits (float64: one
// value a word, every one reads as 0 in float32). It stops at the first
// word that is not, mostly the first. A tail shorter than a word (whole
// values) is read padded with zeros.
func isZero(b []byte, abs, limit uint64) bool {
	for ; len(b) >= 8; b = b[8:] {
		if binary.LittleEndian.Uint64(b)&abs > limit {
			return false
		}
	}
	if len(b) == 0 {
		return true
	}
	var w [8]byte
	copy(w[:], b)
	return binary.LittleEndian.Uint64(w[:])&abs <= limit
}

func nonFiniteName(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return "NaN"
}

// blockRows is the number of rows a worker claims at a time: about 256 KiB.
func (m *Matrix) blockRows() int {
	return max(1, (256<<10)/m.stride)
}

// anyBadF16 reports whether b, little-endian float16 values, holds a NaN or
// an infinity (exponent bits all ones), four values per 64-bit word.
func anyBadF16(b []byte) bool {
	return anyBad(b, 0x7c007c007c007c00, 0x0400040004000400, 0x8000800080008000)
}

// anyBadF32 is anyBadF16 for little-endian float32 values, two per word.
func anyBadF32(b []byte) bool {
	return anyBad(b, 0x7f8000007f800000, 0x0080000000800000, 0x8000000080000000)
}

// maxF32Bits is the float64 bit pattern of math.MaxFloat32. Positive
// float64 values order as their bits, so a value whose bits without the
// sign exceed it is NaN, ±Inf or beyond the float32 range.
const maxF32Bits = 0x47efffffe0000000

// anyBadF64 reports whether b, little-endian float64 values, holds one
// that is not a finite float32 (see maxF32Bits). One value fills a word, so
// there is no lane trick; four words are tested per step.
func anyBadF64(b []byte) bool {
	const abs = 1<<63 - 1
	for len(b) >= 32 {
		w0 := binary.LittleEndian.Uint64(b) & abs
		w1 := binary.LittleEndian.Uint64(b[8:]) & abs
		w2 := binary.LittleEndian.Uint64(b[16:]) & abs
		w3 := binary.LittleEndian.Uint64(b[24:]) & abs
		if max(w0, w1, w2, w3) > maxF32Bits {
			return true
		}
		b = b[32:]
	}
	for ; len(b) >= 8; b = b[8:] {
		if binary.LittleEndian.Uint64(b)&abs > maxF32Bits {
			return true
		}
	}
	return false
}

// anyBad reports whether a lane of b, read as little-endian 64-bit words,
// has all the bits of exp set: (w & exp) + one carries into a lane's top
// bit (carry) exactly then, and never into the next lane. exp, one and
// carry repeat one lane's masks across the word. A tail shorter than a
// word is read padded with zeros, which never carry.
func anyBad(b []byte, exp, one, carry uint64) bool {
	for len(b) >= 64 {
		w0 := binary.LittleEndian.Uint64(b)
		w1 := binary.LittleEndian.Uint64(b[8:])
		w2 := binary.LittleEndian.Uint64(b[16:])
		w3 := binary.LittleEndian.Uint64(b[24:])
		w4 := binary.LittleEndian.Uint64(b[32:])
		w5 := binary.LittleEndian.Uint64(b[40:])
		w6 := binary.LittleEndian.Uint64(b[48:])
		w7 := binary.LittleEndian.Uint64(b[56:])
		if (((w0&exp)+one)|((w1&exp)+one)|((w2&exp)+one)|((w3&exp)+one)|
			((w4&exp)+one)|((w5&exp)+one)|((w6&exp)+one)|((w7&exp)+one))&carry != 0 {
			return true
		}
		b = b[64:]
	}
	for len(b) >= 32 {
		w0 := binary.LittleEndian.Uint64(b)
		w1 := binary.LittleEndian.Uint64(b[8:])
		w2 := binary.LittleEndian.Uint64(b[16:])
		w3 := binary.LittleEndian.Uint64(b[24:])
		if (((w0&exp)+one)|((w1&exp)+one)|((w2&exp)+one)|((w3&exp)+one))&carry != 0 {
			return true
		}
		b = b[32:]
	}
	for len(b) > 0 {
		var w [8]byte
		n := copy(w[:], b)
		if ((binary.LittleEndian.Uint64(w[:])&exp)+one)&carry != 0 {
			return true
		}
		b = b[n:]
	}
	return false
}

// parallelFirst returns the lowest i in [0, n) that scan reports, or n.
// scan(lo, hi) returns the lowest reported index in [lo, hi), or -1. Blocks
// of block indexes each are handed out in increasing order to
// runtime.GOMAXPROCS(0) workers; a worker stops once its next block starts
// at or after the lowest index found so far, so every block below the
// answer is scanned and the answer is deterministic.
func parallelFirst(n, block int, scan func(lo, hi int) int) int {
	nblocks := (n + block - 1) / block
	workers := min(runtime.GOMAXPROCS(0), nblocks)
	if workers <= 1 {
		for lo := 0; lo < n; lo += block {
			if r := scan(lo, min(lo+block, n)); r >= 0 {
				return r
			}
		}
		return n
	}
	var next, best atomic.Int64
	best.Store(int64(n))
	// par.Go: a fault (the file cut short) is raised again in the caller,
	// whose fault mode the workers take.
	par.Go(workers, func() {
		for {
			b := next.Add(1) - 1
			if b >= int64(nblocks) {
				return
			}
			lo := int(b) * block
			if int64(lo) >= best.Load() {
				return
			}
			r := scan(lo, min(lo+block, n))
			if r < 0 {
				continue
			}
			for {
				cur := best.Load()
				if int64(r) >= cur || best.CompareAndSwap(cur, int64(r)) {
					break
				}
			}
			return // later blocks only hold higher indexes
		}
	}, func() { next.Store(int64(nblocks)) })
	return int(best.Load())
}
