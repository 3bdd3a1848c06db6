package vec

import (
	"fmt"
	"math"
)

// The fast-scan kernels score codes laid out in blocks of ScanBlock
// entries. A block's sign plane holds, for every 8 dimensions (a chunk),
// 32 bytes: byte v is entry v's sign bits of those dimensions, bit i for
// dimension 8p+i of chunk p. One 32-byte load is then one chunk of all 32
// entries, and a byte shuffle looks up 32 entries' partial sums at once.

// ScanBlock is the number of entries a fast-scan block interleaves.
const ScanBlock = 32

// LevelsPad is how many bytes past an entry's low bits DotLevels may
// read: storage of low bits must extend that far (the next entry, or
// padding after the last).
const LevelsPad = 4

// scanChunkPairs bounds the chunks one call of the assembly scan sums:
// each adds at most 2*255 to an entry's 16-bit sum.
const scanChunkPairs = 128

// FastScan sets out[v], for each entry v < 32 of a block, to the sum over
// chunks p < len(lut)/32 of lut[32p + (signs[32p+v] & 15)] + lut[32p + 16
// + (signs[32p+v] >> 4)]: the low half of a sign byte looks up the first
// 16-entry table of the chunk, the high half the second. With the tables
// holding partial sums of a quantised query over 4 dimensions, out[v] is
// the query's integer dot product with entry v's sign bits, less the
// tables' offsets. The sums are exact integers: the assembly and the Go
// reference agree exactly.
func FastScan(lut, signs []byte, out *[32]uint32) {
	if len(lut)%32 != 0 || len(signs) < len(lut) {
		panic(fmt.Sprintf("vec: FastScan wants 32-byte table pairs and as many sign bytes (%d and %d)", len(lut), len(signs)))
	}
	*out = [32]uint32{}
	for p := 0; p < len(lut)/32; p += scanChunkPairs {
		n := min(len(lut)/32-p, scanChunkPairs)
		fastScan(lut[32*p:32*(p+n)], signs[32*p:32*(p+n)], out)
	}
}

// fastScanGo is fastScan's reference: it adds the sums of its chunks to out.
func fastScanGo(lut, signs []byte, out *[32]uint32) {
	for p := 0; p < len(lut)/32; p++ {
		t, s := lut[32*p:32*p+32], signs[32*p:32*p+32]
		for v, b := range s {
			out[v] += uint32(t[b&15]) + uint32(t[16+b>>4])
		}
	}
}

// DotLevels returns sum q[j] * level j over j < len(q) (a multiple of 8),
// the level of dimension j = 8p+i being (bit i of signs[32p]) << w | (bits
// w*i .. w*i+w-1 of the w bytes low[w*p:], little-endian): the sign plane
// of one entry of a block (signs starting at its byte of chunk 0) and its
// low bits packed w to a dimension, w in 0, 1, 3 or 7. When w > 0, low
// must hold LevelsPad bytes past w*len(q)/8. Sums go to 32 accumulators,
// value 8p+i to accumulator 8(p%4)+i, folded as foldLanes documents.
func DotLevels(q []float32, signs, low []byte, w int) float32 {
	chunks := len(q) / 8
	switch {
	case len(q)%8 != 0:
		panic(fmt.Sprintf("vec: DotLevels wants whole chunks of 8 values, got %d", len(q)))
	case w != 0 && w != 1 && w != 3 && w != 7:
		panic(fmt.Sprintf("vec: DotLevels has no kernel for %d low bits", w))
	case chunks == 0:
		return 0
	case len(signs) < 32*(chunks-1)+1:
		panic(fmt.Sprintf("vec: DotLevels wants a sign byte every 32 for %d chunks, got %d bytes", chunks, len(signs)))
	case w > 0 && len(low) < w*chunks+LevelsPad:
		panic(fmt.Sprintf("vec: DotLevels wants %d bytes of low bits and %d of padding, got %d", w*chunks, LevelsPad, len(low)))
	}
	return dotLevels(q, signs, low, w)
}

// dotLevelsGo is dotLevels' reference.
func dotLevelsGo(q []float32, signs, low []byte, w int) float32 {
	var a [32]float32
	mask := uint64(1)<<w - 1
	for p := 0; p < len(q)/8; p++ {
		var bits uint64
		for k := range w {
			bits |= uint64(low[w*p+k]) << (8 * k)
		}
		sb := signs[32*p]
		for i := range 8 {
			l := uint64(sb>>i&1)<<w | bits>>(w*i)&mask
			a[8*(p%4)+i] += float32(q[8*p+i] * float32(l))
		}
	}
	return foldLanes(&a)
}

// DiffStats sets dst[j] = a[j] - b[j] for j < len(dst) (a multiple of 8;
// a and b at least as long) and returns the sum of dst[j]^2, the sum of
// dst[j] and the largest |dst[j]|: value j in lane j%8 of each, lanes
// folded by fold8.
func DiffStats(dst, a, b []float32) (squares, sum, largest float32) {
	n := len(dst)
	if n%8 != 0 || len(a) < n || len(b) < n {
		panic(fmt.Sprintf("vec: DiffStats wants whole chunks of 8 values, got %d, %d and %d", n, len(a), len(b)))
	}
	if n == 0 {
		return 0, 0, 0
	}
	var out [3]float32
	diffStats(dst, a[:n], b[:n], &out)
	return out[0], out[1], out[2]
}

func diffStatsGo(dst, a, b []float32, out *[3]float32) {
	var sq, s, big [8]float32
	for j := range dst {
		x := a[j] - b[j]
		dst[j] = x
		sq[j%8] += float32(x * x)
		s[j%8] += x
		big[j%8] = max8(big[j%8], abs(x))
	}
	out[0], out[1], out[2] = fold8(&sq, false), fold8(&s, false), fold8(&big, true)
}

// Quantize sets k[j] to q[j]*inv rounded to the nearest integer, ties to
// even, for j < len(q) (a multiple of 8; k at least as long), and returns
// the sums of the rounding errors q[j] - delta*k[j] and of their
// magnitudes, value j in lane j%8, lanes folded by fold8.
func Quantize(q []float32, inv, delta float32, k []int32) (sumErr, absErr float32) {
	n := len(q)
	if n%8 != 0 || len(k) < n {
		panic(fmt.Sprintf("vec: Quantize wants whole chunks of 8 values and room for them, got %d and %d", n, len(k)))
	}
	if n == 0 {
		return 0, 0
	}
	var out [2]float32
	quantize(q, inv, delta, k[:n], &out)
	return out[0], out[1]
}

func quantizeGo(q []float32, inv, delta float32, k []int32, out *[2]float32) {
	var s, m [8]float32
	for j, x := range q {
		kj := int32(math.RoundToEven(float64(x * inv)))
		k[j] = kj
		e := x - float32(float32(kj)*delta)
		s[j%8] += e
		m[j%8] += abs(e)
	}
	out[0], out[1] = fold8(&s, false), fold8(&m, false)
}

// fold8 adds (or takes the larger of) eight lanes as lanes l and l+4,
// then l and l+2, then 0 and 1: the order of the assembly's folds.
func fold8(a *[8]float32, larger bool) float32 {
	op := func(x, y float32) float32 { return x + y }
	if larger {
		op = max8
	}
	h := [4]float32{op(a[0], a[4]), op(a[1], a[5]), op(a[2], a[6]), op(a[3], a[7])}
	return op(op(h[0], h[2]), op(h[1], h[3]))
}

func max8(x, y float32) float32 {
	if y > x {
		return y
	}
	return x
}

func abs(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }
