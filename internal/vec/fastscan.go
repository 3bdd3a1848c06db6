package vec

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/vlc-embed/vlc/internal/f16"
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

// L2Lanes returns the sum of (a[j] - b[j])^2 for j < len(a) (a multiple
// of 8; b at least as long): DiffStats's sum of squares, the same bits,
// without storing the differences.
func L2Lanes(a, b []float32) float32 {
	n := len(a)
	if n%8 != 0 || len(b) < n {
		panic(fmt.Sprintf("vec: L2Lanes wants whole chunks of 8 values, got %d and %d", n, len(b)))
	}
	if n == 0 {
		return 0
	}
	return l2Lanes(a, b[:n])
}

// L2Lanes4 returns L2Lanes(a, b) for four rows b at once, the same bits
// each: four chains of additions in flight where one L2Lanes has one,
// whose latency bounds it. Every b must be at least as long as a.
func L2Lanes4(a, b0, b1, b2, b3 []float32) [4]float32 {
	n := len(a)
	if n%8 != 0 || len(b0) < n || len(b1) < n || len(b2) < n || len(b3) < n {
		panic(fmt.Sprintf("vec: L2Lanes4 wants whole chunks of 8 values, got %d and %d, %d, %d, %d", n, len(b0), len(b1), len(b2), len(b3)))
	}
	var out [4]float32
	if n > 0 {
		l2Lanes4(a, b0[:n], b1[:n], b2[:n], b3[:n], &out)
	}
	return out
}

func l2Lanes4Go(a, b0, b1, b2, b3 []float32, out *[4]float32) {
	for k, b := range [4][]float32{b0, b1, b2, b3} {
		out[k] = l2LanesGo(a, b)
	}
}

// L2LanesHalf is L2Lanes over float16 values (their bit patterns): the
// same bits as L2Lanes over the rows decoded to float32, half the bytes
// read.
func L2LanesHalf(a, b []uint16) float32 {
	n := len(a)
	if n%8 != 0 || len(b) < n {
		panic(fmt.Sprintf("vec: L2LanesHalf wants whole chunks of 8 values, got %d and %d", n, len(b)))
	}
	if n == 0 {
		return 0
	}
	return l2LanesHalf(a, b[:n])
}

// HalfKernels reports whether L2LanesHalf and L2LanesHalf4 run as vector
// kernels (amd64 with F16C): elsewhere they decode through a table, slower
// than L2Lanes over float32 rows.
func HalfKernels() bool { return halfKernels() }

// L2LanesHalf4 is L2Lanes4 over float16 values: the same bits as
// L2LanesHalf of each row.
func L2LanesHalf4(a, b0, b1, b2, b3 []uint16) [4]float32 {
	n := len(a)
	if n%8 != 0 || len(b0) < n || len(b1) < n || len(b2) < n || len(b3) < n {
		panic(fmt.Sprintf("vec: L2LanesHalf4 wants whole chunks of 8 values, got %d and %d, %d, %d, %d", n, len(b0), len(b1), len(b2), len(b3)))
	}
	var out [4]float32
	if n > 0 {
		l2LanesHalf4(a, b0[:n], b1[:n], b2[:n], b3[:n], &out)
	}
	return out
}

func l2LanesHalfGo(a, b []uint16) float32 {
	var sq [8]float32
	for j := range a {
		x := f16.ToFloat32(a[j]) - f16.ToFloat32(b[j])
		sq[j%8] += float32(x * x)
	}
	return fold8(&sq, false)
}

func l2LanesHalf4Go(a, b0, b1, b2, b3 []uint16, out *[4]float32) {
	for k, b := range [4][]uint16{b0, b1, b2, b3} {
		out[k] = l2LanesHalfGo(a, b)
	}
}

func l2LanesGo(a, b []float32) float32 {
	var sq [8]float32
	for j := range a {
		x := a[j] - b[j]
		sq[j%8] += float32(x * x)
	}
	return fold8(&sq, false)
}

// Quantize sets k[j] to q[j]*inv rounded to the nearest integer, ties to
// even, for j < len(q) (a multiple of 8; k at least as long), and returns
// the sums of the rounding errors q[j] - delta*k[j] and of their squares,
// value j in lane j%8, lanes folded by fold8.
func Quantize(q []float32, inv, delta float32, k []int32) (sumErr, sqErr float32) {
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
		m[j%8] += float32(e * e)
	}
	out[0], out[1] = fold8(&s, false), fold8(&m, false)
}

// Tables writes FastScan's lookup tables for a query quantised to k
// (len(k) a multiple of 8, every |k[j]| <= 63) into lut (4*len(k) bytes):
// the 16 entries of the table of k[j..j+3], j a multiple of 4, at
// lut[4j:], entry v being the sum of k[j+i] over the set bits i of v less
// the least such sum (the sum of the negative k[j+i]), so 0..252. It
// returns the sum of those least sums over all tables: a FastScan sum of
// the tables plus it is the integer dot product of k with the sign bits.
func Tables(k []int32, lut []byte) (off int32) {
	n := len(k)
	if n%8 != 0 || len(lut) < 4*n {
		panic(fmt.Sprintf("vec: Tables wants whole chunks of 8 values and 4 table bytes a value, got %d and %d", n, len(lut)))
	}
	if n == 0 {
		return 0
	}
	return tables(k, lut[:4*n])
}

// tablesGo is tables' reference: entry v is the sum over i of max(k, 0)
// where bit i of v is set and max(-k, 0) where it is not, which is the sum
// over the set bits less the sum of the negative values.
func tablesGo(k []int32, lut []byte) (off int32) {
	for j := 0; j < len(k); j += 4 {
		for v := range 16 {
			var e int32
			for i := range 4 {
				if v>>i&1 == 1 {
					e += max(k[j+i], 0)
				} else {
					e += max(-k[j+i], 0)
				}
			}
			lut[4*j+v] = byte(e)
		}
		for i := range 4 {
			off += min(k[j+i], 0)
		}
	}
	return off
}

// BlockEstimate turns FastScan's sums of a block into first estimates and
// their bounds, for the 32 entries v of a block whose scalars scal holds:
// 32 float16 norms n, 32 float16 scales b, 32 bytes kappa and 32 bytes eps,
// in that order. With c = {a, b0, ka, ke, c0, c1, c2, |c2|},
//
//	eu[v]    = kappa * (a*sums[v] + b0)
//	est[v]   = (c1*n + c0) + c2*(b*eu)
//	bound[v] = |c2| * (b * sqrt((ka*kappa)^2 + (ke*eps)^2))
//
// each operation rounded to float32 in this order, so that the assembly
// and the Go reference agree to the last bit. The norms and scales must be
// finite.
func BlockEstimate(sums *[32]uint32, scal []byte, c *[8]float32, est, bound *[32]float32) {
	if len(scal) < 6*ScanBlock {
		panic(fmt.Sprintf("vec: BlockEstimate wants %d bytes of scalars, got %d", 6*ScanBlock, len(scal)))
	}
	blockEstimate(sums, scal, c, est, bound)
}

func blockEstimateGo(sums *[32]uint32, scal []byte, c *[8]float32, est, bound *[32]float32) {
	a, b0, ka, ke, c0, c1, c2, c2abs := c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]
	for v := range ScanBlock {
		qs := float32(a*float32(sums[v])) + b0
		kappa, eps := float32(scal[128+v]), float32(scal[160+v])
		eu := float32(kappa * qs)
		n := f16.ToFloat32(binary.LittleEndian.Uint16(scal[2*v:]))
		b := f16.ToFloat32(binary.LittleEndian.Uint16(scal[64+2*v:]))
		est[v] = float32(c1*n) + c0 + float32(c2*float32(b*eu))
		x, y := float32(ka*kappa), float32(ke*eps)
		r := float32(math.Sqrt(float64(float32(x*x) + float32(y*y))))
		bound[v] = float32(c2abs * float32(b*r))
	}
}

// Prefetch asks the processor to bring the cache lines of b into its
// caches, without waiting for them: a hint before reads that would miss,
// so that several misses overlap. The Go version does nothing.
func Prefetch(b []byte) {
	if len(b) > 0 {
		prefetch(b)
	}
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
