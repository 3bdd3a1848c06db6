// Command asm generates internal/vec's amd64 kernels with avo
// (github.com/mmcloughlin/avo). It is a module of its own so that the vlc
// module does not depend on avo; `go generate ./internal/vec` runs it, and
// TestGenerated fails when the committed assembly is not what it writes.
//
// Every kernel multiplies and adds in separate instructions (no FMA), each
// rounding to float32 as Go's `s += a * b` does on amd64, and keeps the
// order of additions the pure-Go reference (internal/vec, kernels.go)
// documents, so the two agree to the last bit.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/gotypes"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

func main() {
	ConstraintExpr("amd64,!purego")
	panel4()
	panel1()
	dotBytes(8)
	dotBytes(4)
	dotsU4I8()
	dotBits()
	fwht()
	sumSquares()
	fastScan()
	for _, w := range []int{0, 1, 3, 7} {
		dotLevels(w)
	}
	diffStats()
	l2Lanes()
	l2Lanes4()
	l2LanesHalf()
	l2LanesHalf4()
	cpuidECX1()
	quantize()
	tables()
	blockEstimate()
	prefetch()
	Generate()
}

// zeroed returns n YMM accumulators set to zero.
func zeroed(n int) []VecVirtual {
	acc := make([]VecVirtual, n)
	for i := range acc {
		acc[i] = YMM()
		VXORPS(acc[i], acc[i], acc[i])
	}
	return acc
}

// panel4 is the assign's kernel: four points against one panel of 16
// anchors (panel[j*16+l] is dimension j of anchor l), one float32
// accumulator per pair, in order of j.
func panel4() {
	TEXT("panel4AVX2", NOSPLIT, "func(x *float32, xstride int, panel *float32, d int, out *float32, ostride int)")
	Doc("panel4AVX2 sets out[k*ostride+l] = sum over j < d of x[k*xstride+j] * panel[j*16+l], k < 4, l < 16.")
	x0 := Load(Param("x"), GP64())
	xs := Load(Param("xstride"), GP64())
	p := Load(Param("panel"), GP64())
	d := Load(Param("d"), GP64())
	SHLQ(Imm(2), xs)
	x1, x2, x3 := GP64(), GP64(), GP64()
	LEAQ(Mem{Base: x0, Index: xs, Scale: 1}, x1)
	LEAQ(Mem{Base: x1, Index: xs, Scale: 1}, x2)
	LEAQ(Mem{Base: x2, Index: xs, Scale: 1}, x3)
	xs4 := []Register{x0, x1, x2, x3}
	acc := zeroed(8)
	TESTQ(d, d)
	JZ(LabelRef("store4"))
	Label("loop4")
	lo, hi := YMM(), YMM()
	VMOVUPS(Mem{Base: p}, lo)
	VMOVUPS(Mem{Base: p, Disp: 32}, hi)
	for k, xk := range xs4 {
		b, t0, t1 := YMM(), YMM(), YMM()
		VBROADCASTSS(Mem{Base: xk}, b)
		VMULPS(lo, b, t0)
		VMULPS(hi, b, t1)
		VADDPS(t0, acc[2*k], acc[2*k])
		VADDPS(t1, acc[2*k+1], acc[2*k+1])
	}
	for _, xk := range xs4 {
		ADDQ(Imm(4), xk)
	}
	ADDQ(Imm(64), p)
	DECQ(d)
	JNZ(LabelRef("loop4"))
	Label("store4")
	out := Load(Param("out"), GP64())
	os := Load(Param("ostride"), GP64())
	SHLQ(Imm(2), os)
	for k := range 4 {
		VMOVUPS(acc[2*k], Mem{Base: out})
		VMOVUPS(acc[2*k+1], Mem{Base: out, Disp: 32})
		if k < 3 {
			ADDQ(os, out)
		}
	}
	VZEROUPPER()
	RET()
}

// panel1 is the search's kernel: one query against four panels of 16
// anchors each, one float32 accumulator per anchor, in order of j.
func panel1() {
	TEXT("panel1AVX2", NOSPLIT, "func(x *float32, panel *float32, pstride int, d int, out *float32)")
	Doc("panel1AVX2 sets out[g*16+l] = sum over j < d of x[j] * panel[g*pstride+j*16+l], g < 4, l < 16.")
	x := Load(Param("x"), GP64())
	p0 := Load(Param("panel"), GP64())
	ps := Load(Param("pstride"), GP64())
	d := Load(Param("d"), GP64())
	SHLQ(Imm(2), ps)
	p1, p2, p3 := GP64(), GP64(), GP64()
	LEAQ(Mem{Base: p0, Index: ps, Scale: 1}, p1)
	LEAQ(Mem{Base: p1, Index: ps, Scale: 1}, p2)
	LEAQ(Mem{Base: p2, Index: ps, Scale: 1}, p3)
	ps4 := []Register{p0, p1, p2, p3}
	acc := zeroed(8)
	TESTQ(d, d)
	JZ(LabelRef("store1"))
	Label("loop1")
	b := YMM()
	VBROADCASTSS(Mem{Base: x}, b)
	for g, pg := range ps4 {
		t0, t1 := YMM(), YMM()
		VMULPS(Mem{Base: pg}, b, t0)
		VMULPS(Mem{Base: pg, Disp: 32}, b, t1)
		VADDPS(t0, acc[2*g], acc[2*g])
		VADDPS(t1, acc[2*g+1], acc[2*g+1])
	}
	ADDQ(Imm(4), x)
	for _, pg := range ps4 {
		ADDQ(Imm(64), pg)
	}
	DECQ(d)
	JNZ(LabelRef("loop1"))
	Label("store1")
	out := Load(Param("out"), GP64())
	for i := range acc {
		VMOVUPS(acc[i], Mem{Base: out, Disp: 32 * i})
	}
	VZEROUPPER()
	RET()
}

// dotBytes is the scorer's kernel for codes of 8 or 4 bits per value:
// sum q[j] * value j, values in four accumulators of eight lanes (value j
// of each 32 in lane j%8 of accumulator (j/8)%4), added lane by lane as
// (a0+a1)+(a2+a3), then lanes l and l+4, then l and l+2, then 0 and 1.
func dotBytes(bits int) {
	name, unit := "dotU8AVX2", "n"
	if bits == 4 {
		name = "dotU4AVX2"
	}
	TEXT(name, NOSPLIT, "func(q *float32, c *byte, "+unit+" int) float32")
	if bits == 8 {
		Doc(name + " returns sum q[j] * c[j] over j < n, n a multiple of 32, in the order foldLanes (kernels.go) documents.")
	} else {
		Doc(name + " returns sum q[j] * nibble j of c over j < 2n (nibble 2k is the low half of c[k]), n a multiple of 16, in the order foldLanes (kernels.go) documents.")
	}
	q := Load(Param("q"), GP64())
	c := Load(Param("c"), GP64())
	n := Load(Param(unit), GP64())
	acc := zeroed(4)
	var mask VecVirtual
	if bits == 4 {
		m32 := GP32()
		MOVL(U32(0x0f0f0f0f), m32)
		mask = XMM()
		VMOVD(m32, mask)
		VPBROADCASTD(mask, mask)
	}
	done := "done" + name
	loop := "loop" + name
	TESTQ(n, n)
	JZ(LabelRef(done))
	Label(loop)
	var v [4]VecVirtual
	for i := range v {
		v[i] = YMM()
	}
	if bits == 8 {
		for i := range v {
			VPMOVZXBD(Mem{Base: c, Disp: 8 * i}, v[i])
		}
	} else {
		raw, hiN, lo, hi := XMM(), XMM(), XMM(), XMM()
		VMOVDQU(Mem{Base: c}, raw)
		VPSRLW(Imm(4), raw, hiN)
		VPAND(mask, raw, raw)
		VPAND(mask, hiN, hiN)
		VPUNPCKLBW(hiN, raw, lo) // values 0..15: low, high nibble of bytes 0..7
		VPUNPCKHBW(hiN, raw, hi) // values 16..31
		VPMOVZXBD(lo, v[0])
		VPSRLDQ(Imm(8), lo, lo)
		VPMOVZXBD(lo, v[1])
		VPMOVZXBD(hi, v[2])
		VPSRLDQ(Imm(8), hi, hi)
		VPMOVZXBD(hi, v[3])
	}
	for i := range v {
		VCVTDQ2PS(v[i], v[i])
		VMULPS(Mem{Base: q, Disp: 32 * i}, v[i], v[i])
		VADDPS(v[i], acc[i], acc[i])
	}
	ADDQ(Imm(128), q)
	if bits == 8 {
		ADDQ(Imm(32), c)
		SUBQ(Imm(32), n)
	} else {
		ADDQ(Imm(16), c)
		SUBQ(Imm(16), n)
	}
	JNZ(LabelRef(loop))
	Label(done)
	foldReturn(acc)
}

// dotsU4I8 is the graph walk's kernel: for each row of a list, the
// integer dot product of its packed 4-bit levels with a query rounded to
// int8, the levels unpacked as bytes and multiplied by VPMADDUBSW (bytes
// times bytes, pairs added in 16 bits), then VPMADDWD by ones (pairs added
// in 32 bits). The weights come as U4Weights lays them out: for each 32
// bytes of levels, the weights of their low nibbles, then of their high
// ones (16 and 16 for a last 16 bytes). Every sum is exact: a 16-bit lane
// holds at most 4 products of 15 and 128.
func dotsU4I8() {
	TEXT("dotsU4I8AVX2", NOSPLIT, "func(w *int8, n int, data *byte, stride int, rows int, ids *uint32, count int, out *int32) int")
	Pragma("noescape")
	Doc("dotsU4I8AVX2 prefetches every line of each row's stride bytes, then sets out[k], k < count, to the sum over j < 2n of w's weight of nibble j times nibble j of the n bytes at data[ids[k]*stride], n a multiple of 16, as dotsU4I8Go (kernels.go) does. It stops at the first id not below rows and returns how many it set.")
	w := Load(Param("w"), GP64())
	n := Load(Param("n"), GP64())
	data := Load(Param("data"), GP64())
	stride := Load(Param("stride"), GP64())
	ids := Load(Param("ids"), GP64())
	count := Load(Param("count"), GP64())
	out := Load(Param("out"), GP64())
	rows := Load(Param("rows"), GP64())
	done := GP64()
	XORQ(done, done)
	mask := broadcast32(0x0f0f0f0f)
	ones := broadcast32(0x00010001)
	TESTQ(count, count)
	JZ(LabelRef("doneDotsU4"))
	// Every line of every record asked for first (a byte every 64 from
	// its start, and its last byte), so that the reads of rows not in
	// cache overlap.
	{
		i, at, end := GP64(), GP64(), GP64()
		XORQ(i, i)
		Label("prefetchDotsU4")
		MOVL(Mem{Base: ids, Index: i, Scale: 4}, at.As32())
		IMULQ(stride, at)
		ADDQ(data, at)
		LEAQ(Mem{Base: at, Index: stride, Scale: 1, Disp: -1}, end)
		PREFETCHT0(Mem{Base: end})
		Label("lineDotsU4")
		PREFETCHT0(Mem{Base: at})
		ADDQ(Imm(64), at)
		CMPQ(at, end)
		JB(LabelRef("lineDotsU4"))
		INCQ(i)
		CMPQ(i, count)
		JB(LabelRef("prefetchDotsU4"))
	}
	Label("rowDotsU4")
	id, rec, wp, m := GP64(), GP64(), GP64(), GP64()
	MOVL(Mem{Base: ids}, id.As32())
	CMPQ(id, rows)
	JAE(LabelRef("doneDotsU4"))
	IMULQ(stride, id)
	LEAQ(Mem{Base: data, Index: id, Scale: 1}, rec)
	MOVQ(w, wp)
	MOVQ(n, m)
	acc := zeroed(1)[0]
	step := func(wide bool) {
		raw, hi := YMM(), YMM()
		var r, h, mk, on Register = raw, hi, mask, ones
		if !wide { // VEX.128: the upper halves come out zero
			r, h, mk, on = raw.AsX(), hi.AsX(), mask.AsX(), ones.AsX()
		}
		half := 32
		if !wide {
			half = 16
		}
		VMOVDQU(Mem{Base: rec}, r)
		VPSRLW(Imm(4), r, h)
		VPAND(mk, r, r)
		VPAND(mk, h, h)
		VPMADDUBSW(Mem{Base: wp}, r, r)
		VPMADDUBSW(Mem{Base: wp, Disp: half}, h, h)
		VPADDW(h, r, r)
		VPMADDWD(on, r, r)
		VPADDD(raw, acc, acc)
		ADDQ(Imm(uint64(half)), rec)
		ADDQ(Imm(uint64(2*half)), wp)
		SUBQ(Imm(uint64(half)), m)
	}
	Label("wideDotsU4")
	CMPQ(m, Imm(32))
	JB(LabelRef("tailDotsU4"))
	step(true)
	JMP(LabelRef("wideDotsU4"))
	Label("tailDotsU4")
	TESTQ(m, m)
	JZ(LabelRef("sumDotsU4"))
	step(false)
	Label("sumDotsU4")
	h, u := XMM(), XMM()
	VEXTRACTI128(Imm(1), acc, u)
	VPADDD(u, acc.AsX(), h)
	VPSHUFD(Imm(0x4e), h, u)
	VPADDD(u, h, h)
	VPSHUFD(Imm(0xb1), h, u)
	VPADDD(u, h, h)
	VMOVD(h, Mem{Base: out})
	ADDQ(Imm(4), ids)
	ADDQ(Imm(4), out)
	INCQ(done)
	CMPQ(done, count)
	JB(LabelRef("rowDotsU4"))
	Label("doneDotsU4")
	VZEROUPPER()
	Store(done, ReturnIndex(0))
	RET()
}

// dotBits is the split code's re-rank kernel: the sum of the weights
// whose bit is set in a plane of bits, eight weights a byte. A byte is
// broadcast to eight lanes, each lane keeps its own bit (VPAND, VPCMPEQD
// against 1, 2, 4, .. 128) as a mask of the weight (VANDPS), and the
// masked weights add in four accumulators as dotBytes keeps them.
func dotBits() {
	TEXT("dotBitsAVX2", NOSPLIT, "func(q *float32, bits *byte, n int) float32")
	Pragma("noescape")
	Doc("dotBitsAVX2 returns the sum of q[j] over the set bits j of bits[0..n-1] (bit j%8 of byte j/8), n a multiple of 4, in the order foldLanes (kernels.go) documents.")
	q := Load(Param("q"), GP64())
	bits := Load(Param("bits"), GP64())
	n := Load(Param("n"), GP64())
	sel := lanes32("bitLanes", [8]uint32{1, 2, 4, 8, 16, 32, 64, 128})
	acc := zeroed(4)
	TESTQ(n, n)
	JZ(LabelRef("doneDotBits"))
	Label("loopDotBits")
	for i := range acc {
		b := YMM()
		VPBROADCASTB(Mem{Base: bits, Disp: i}, b)
		VPAND(sel, b, b)
		VPCMPEQD(sel, b, b)
		VANDPS(Mem{Base: q, Disp: 32 * i}, b, b)
		VADDPS(b, acc[i], acc[i])
	}
	ADDQ(Imm(4), bits)
	ADDQ(Imm(128), q)
	SUBQ(Imm(4), n)
	JNZ(LabelRef("loopDotBits"))
	Label("doneDotBits")
	foldReturn(acc)
}

// fwht is the Walsh-Hadamard transform of quant's rotation, n values in
// place, then scaled. Each butterfly x[j], x[j+h] = a+b, a-b is one add
// and one subtract of the same two values as the Go loop's, so the result
// is the same to the bit: h = 1, 2 and 4 within each eight values (a
// lane shuffle gives each lane its partner, and a blend keeps the sum in
// the lower lane of a pair, the difference in the upper), then every
// h >= 8 over whole registers.
func fwht() {
	TEXT("fwhtAVX2", NOSPLIT, "func(x *float32, n int, scale float32)")
	Pragma("noescape")
	Doc("fwhtAVX2 applies the butterflies of quant's fwht to x[0..n-1], n a power of two of at least 8, and multiplies every value by scale.")
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	end := GP64()
	LEAQ(Mem{Base: x, Index: n, Scale: 4}, end)
	p := GP64()
	MOVQ(x, p)
	Label("smallFwht")
	v := YMM()
	VMOVUPS(Mem{Base: p}, v)
	for _, st := range []struct {
		h     int
		blend uint8
	}{{1, 0xaa}, {2, 0xcc}, {4, 0xf0}} {
		sw, sum, diff := YMM(), YMM(), YMM()
		switch st.h {
		case 1:
			VPERMILPS(Imm(0xb1), v, sw)
		case 2:
			VPERMILPS(Imm(0x4e), v, sw)
		case 4:
			VPERM2F128(Imm(0x01), v, v, sw)
		}
		VADDPS(sw, v, sum)
		VSUBPS(v, sw, diff) // sw - v: the lower lane's value less the upper's
		VBLENDPS(Imm(uint64(st.blend)), diff, sum, v)
	}
	VMOVUPS(v, Mem{Base: p})
	ADDQ(Imm(32), p)
	CMPQ(p, end)
	JB(LabelRef("smallFwht"))
	// h >= 8: for each block of 2h values, its halves' registers pairwise.
	h := GP64() // in bytes
	MOVQ(U32(32), h)
	SHLQ(Imm(2), n) // n in bytes from here
	Label("stageLoopFwht")
	CMPQ(h, n)
	JAE(LabelRef("scaleFwht"))
	blk := GP64()
	MOVQ(x, blk)
	Label("blockFwht")
	j, stop := GP64(), GP64()
	MOVQ(blk, j)
	LEAQ(Mem{Base: blk, Index: h, Scale: 1}, stop)
	Label("pairFwht")
	a, b, t := YMM(), YMM(), YMM()
	VMOVUPS(Mem{Base: j}, a)
	VMOVUPS(Mem{Base: j, Index: h, Scale: 1}, b)
	VADDPS(b, a, t)
	VSUBPS(b, a, a)
	VMOVUPS(t, Mem{Base: j})
	VMOVUPS(a, Mem{Base: j, Index: h, Scale: 1})
	ADDQ(Imm(32), j)
	CMPQ(j, stop)
	JB(LabelRef("pairFwht"))
	LEAQ(Mem{Base: stop, Index: h, Scale: 1}, blk)
	CMPQ(blk, end)
	JB(LabelRef("blockFwht"))
	SHLQ(Imm(1), h)
	JMP(LabelRef("stageLoopFwht"))
	Label("scaleFwht")
	sc := YMM()
	VBROADCASTSS(mustResolve(Param("scale")).Addr, sc) // from memory: no SSE move beside dirty YMM halves
	MOVQ(x, p)
	Label("mulFwht")
	m := YMM()
	VMULPS(Mem{Base: p}, sc, m)
	VMOVUPS(m, Mem{Base: p})
	ADDQ(Imm(32), p)
	CMPQ(p, end)
	JB(LabelRef("mulFwht"))
	VZEROUPPER()
	RET()
}

// sumSquares is the finiteness check's kernel: sum x[j]^2, values in
// four accumulators of eight lanes as dotBytes keeps them, folded by
// foldReturn.
func sumSquares() {
	TEXT("sumSquaresAVX2", NOSPLIT, "func(x *float32, n int) float32")
	Pragma("noescape")
	Doc("sumSquaresAVX2 returns sum x[j]^2 over j < n, n a multiple of 32, in the order foldLanes (kernels.go) documents.")
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	acc := zeroed(4)
	TESTQ(n, n)
	JZ(LabelRef("doneSumSquares"))
	Label("loopSumSquares")
	for i := range acc {
		v := YMM()
		VMOVUPS(Mem{Base: x, Disp: 32 * i}, v)
		VMULPS(v, v, v)
		VADDPS(v, acc[i], acc[i])
	}
	ADDQ(Imm(128), x)
	SUBQ(Imm(32), n)
	JNZ(LabelRef("loopSumSquares"))
	Label("doneSumSquares")
	foldReturn(acc)
}

// foldReturn adds four accumulators of eight lanes lane by lane as
// (a0+a1)+(a2+a3), then lanes l and l+4, then l and l+2, then 0 and 1
// (foldLanes in kernels.go), and returns the sum.
func foldReturn(acc []VecVirtual) {
	VADDPS(acc[1], acc[0], acc[0])
	VADDPS(acc[3], acc[2], acc[2])
	VADDPS(acc[2], acc[0], acc[0])
	h, t := XMM(), XMM()
	VEXTRACTF128(Imm(1), acc[0], t)
	VMOVAPS(acc[0].AsX(), h)
	VADDPS(t, h, h) // lanes l + l+4
	VMOVHLPS(h, h, t)
	VADDPS(t, h, h) // lanes l + l+2
	VMOVSHDUP(h, t)
	VADDSS(t, h, h) // lanes 0 + 1
	VZEROUPPER()    // before Store's SSE move: no AVX-SSE transition
	Store(h, ReturnIndex(0))
	RET()
}

// broadcast32 returns a YMM register holding v in every 32-bit lane.
func broadcast32(v uint32) VecVirtual {
	g, y := GP32(), YMM()
	MOVL(U32(v), g)
	VMOVD(g, y.AsX())
	VPBROADCASTD(y.AsX(), y)
	return y
}

// lanes32 returns a YMM register holding v[i] in 32-bit lane i, from a
// read-only table named name.
func lanes32(name string, v [8]uint32) VecVirtual {
	m := GLOBL(name, RODATA|NOPTR)
	for i, x := range v {
		DATA(4*i, U32(x))
	}
	y := YMM()
	VMOVDQU(m, y)
	return y
}

// fastScan is the first pass of the blocked rotated code: for 32 entries
// at once, the sum over chunks of two 16-byte table lookups (VPSHUFB), one
// per half of each entry's sign byte, in 16-bit lanes. Two bytes of one
// lane belong to entries 2i and 2i+1: the lane's sum is even + 256*odd
// (mod 2^16), and a second sum of the lanes shifted right by 8 is odd
// alone, so even = all - odd<<8. At most 128 chunks a call keep both
// below 2^16.
func fastScan() {
	TEXT("fastScanAVX2", NOSPLIT, "func(lut *byte, signs *byte, pairs int, sums *uint16)")
	Pragma("noescape") // sums may live on the caller's stack
	Doc("fastScanAVX2 sets sums[i] to entry 2i's and sums[16+i] to entry 2i+1's sum over pairs <= 128 chunks of lut[32p + (signs[32p+v] & 15)] + lut[32p + 16 + (signs[32p+v] >> 4)].")
	lut := Load(Param("lut"), GP64())
	signs := Load(Param("signs"), GP64())
	n := Load(Param("pairs"), GP64())
	mask := broadcast32(0x0f0f0f0f)
	all := zeroed(2)
	odd := zeroed(2)
	TESTQ(n, n)
	JZ(LabelRef("doneScan"))
	Label("loopScan")
	x, hi := YMM(), YMM()
	VMOVDQU(Mem{Base: signs}, x)
	VPSRLW(Imm(4), x, hi)
	VPAND(mask, x, x)
	VPAND(mask, hi, hi)
	for h, idx := range []VecVirtual{x, hi} {
		t := YMM()
		VBROADCASTI128(Mem{Base: lut, Disp: 16 * h}, t)
		VPSHUFB(idx, t, t)
		VPADDW(t, all[h], all[h])
		VPSRLW(Imm(8), t, t)
		VPADDW(t, odd[h], odd[h])
	}
	ADDQ(Imm(32), lut)
	ADDQ(Imm(32), signs)
	DECQ(n)
	JNZ(LabelRef("loopScan"))
	Label("doneScan")
	VPADDW(all[1], all[0], all[0])
	VPADDW(odd[1], odd[0], odd[0])
	VPSLLW(Imm(8), odd[0], x)
	VPSUBW(x, all[0], all[0])
	out := Load(Param("sums"), GP64())
	VMOVDQU(all[0], Mem{Base: out})
	VMOVDQU(odd[0], Mem{Base: out, Disp: 32})
	VZEROUPPER()
	RET()
}

// dotLevels is the refinement of the blocked rotated code, for w low bits
// a dimension: eight dimensions a step, each level rebuilt in a 32-bit
// lane as (sign bit << w) | low bits by variable shifts of broadcast
// bytes, converted and multiplied by q; chunk p goes to accumulator p%4.
func dotLevels(w int) {
	name := fmt.Sprintf("dotLevels%dAVX2", w)
	TEXT(name, NOSPLIT, "func(q *float32, signs *byte, low *byte, chunks int) float32")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s returns sum q[j] * level j over j < 8*chunks, level 8p+i being (bit i of signs[32p]) << %d | %d low bits of low from bit %d*i of chunk p's %d bytes, in the order dotLevelsGo (fastscan.go) keeps.", name, w, w, w, w))
	q := Load(Param("q"), GP64())
	signs := Load(Param("signs"), GP64())
	var low Register
	if w > 0 {
		low = Load(Param("low"), GP64())
	}
	n := Load(Param("chunks"), GP64())
	bitShifts := lanes32(fmt.Sprintf("bitShifts%d", w), [8]uint32{0, 1, 2, 3, 4, 5, 6, 7})
	one := broadcast32(1)
	var lowShifts, lowMask VecVirtual
	if w > 0 {
		var sh [8]uint32
		for i := range sh {
			sh[i] = uint32(w * i)
			if w == 7 && i >= 4 {
				sh[i] = uint32(w*i - 24) // read from the chunk's fourth byte
			}
		}
		lowShifts = lanes32(fmt.Sprintf("lowShifts%d", w), sh)
		lowMask = broadcast32(1<<w - 1)
	}
	acc := zeroed(4)
	chunk := func(i int) {
		m := YMM()
		VPBROADCASTB(Mem{Base: signs, Disp: 32 * i}, m)
		VPSRLVD(bitShifts, m, m)
		VPAND(one, m, m)
		if w > 0 {
			VPSLLD(Imm(uint64(w)), m, m)
			l := YMM()
			switch w {
			case 1:
				VPBROADCASTB(Mem{Base: low, Disp: i}, l)
			case 3:
				VPBROADCASTD(Mem{Base: low, Disp: 3 * i}, l)
			case 7:
				h := XMM()
				VPBROADCASTD(Mem{Base: low, Disp: 7 * i}, l.AsX())
				VPBROADCASTD(Mem{Base: low, Disp: 7*i + 3}, h)
				VINSERTI128(Imm(1), h, l, l)
			}
			VPSRLVD(lowShifts, l, l)
			VPAND(lowMask, l, l)
			VPOR(l, m, m)
		}
		VCVTDQ2PS(m, m)
		VMULPS(Mem{Base: q, Disp: 32 * i}, m, m)
		VADDPS(m, acc[i], acc[i])
	}
	loop, tail, done := "loop"+name, "tail"+name, "done"+name
	CMPQ(n, Imm(4))
	JL(LabelRef(tail))
	Label(loop)
	for i := range 4 {
		chunk(i)
	}
	ADDQ(Imm(128), q)
	ADDQ(Imm(128), signs)
	if w > 0 {
		ADDQ(Imm(uint64(4*w)), low)
	}
	SUBQ(Imm(4), n)
	CMPQ(n, Imm(4))
	JGE(LabelRef(loop))
	Label(tail)
	for i := range 3 {
		CMPQ(n, Imm(uint64(i+1)))
		JL(LabelRef(done))
		chunk(i)
	}
	Label(done)
	foldReturn(acc)
}

// fold8 adds the eight lanes of y as lanes l and l+4, then l and l+2,
// then 0 and 1 (fold8 in fastscan.go), into the low lane of the result.
func fold8(y VecVirtual, max bool) VecVirtual {
	h, t := XMM(), XMM()
	op := VADDPS
	if max {
		op = VMAXPS
	}
	VEXTRACTF128(Imm(1), y, t)
	VMOVAPS(y.AsX(), h)
	op(t, h, h)
	VMOVHLPS(h, h, t)
	op(t, h, h)
	VMOVSHDUP(h, t)
	op(t, h, h)
	return h
}

// diffStats is the per-list start of the blocked rotated code's first
// pass: dst = a - b, with the sum of squares, the sum and the largest
// magnitude, eight lanes each (value j in lane j%8), folded by fold8.
func diffStats() {
	TEXT("diffStatsAVX2", NOSPLIT, "func(dst *float32, a *float32, b *float32, n int, out *float32)")
	Pragma("noescape")
	Doc("diffStatsAVX2 sets dst[j] = a[j] - b[j] for j < n (a multiple of 8) and out to the sum of dst[j]^2, the sum of dst[j] and the largest |dst[j]|, in the order diffStatsGo (fastscan.go) keeps.")
	dst := Load(Param("dst"), GP64())
	a := Load(Param("a"), GP64())
	b := Load(Param("b"), GP64())
	n := Load(Param("n"), GP64())
	acc := zeroed(3) // squares, sum, largest magnitude
	sign := broadcast32(0x7fffffff)
	TESTQ(n, n)
	JZ(LabelRef("doneDiff"))
	Label("loopDiff")
	x, t := YMM(), YMM()
	VMOVUPS(Mem{Base: a}, x)
	VSUBPS(Mem{Base: b}, x, x)
	VMOVUPS(x, Mem{Base: dst})
	VMULPS(x, x, t)
	VADDPS(t, acc[0], acc[0])
	VADDPS(x, acc[1], acc[1])
	VANDPS(sign, x, x)
	VMAXPS(x, acc[2], acc[2])
	ADDQ(Imm(32), a)
	ADDQ(Imm(32), b)
	ADDQ(Imm(32), dst)
	SUBQ(Imm(8), n)
	JNZ(LabelRef("loopDiff"))
	Label("doneDiff")
	out := Load(Param("out"), GP64())
	for i := range 3 {
		h := fold8(acc[i], i == 2)
		VMOVSS(h, Mem{Base: out, Disp: 4 * i})
	}
	VZEROUPPER()
	RET()
}

// l2Lanes is DiffStats's sum of squares alone, with no differences
// stored: the graph build's exact distances, the same bits.
func l2Lanes() {
	TEXT("l2LanesAVX2", NOSPLIT, "func(a *float32, b *float32, n int) float32")
	Pragma("noescape")
	Doc("l2LanesAVX2 returns the sum of (a[j] - b[j])^2 for j < n (a multiple of 8), in the order l2LanesGo (fastscan.go) keeps.")
	a := Load(Param("a"), GP64())
	b := Load(Param("b"), GP64())
	n := Load(Param("n"), GP64())
	acc := zeroed(1)
	TESTQ(n, n)
	JZ(LabelRef("doneL2"))
	Label("loopL2")
	x := YMM()
	VMOVUPS(Mem{Base: a}, x)
	VSUBPS(Mem{Base: b}, x, x)
	VMULPS(x, x, x)
	VADDPS(x, acc[0], acc[0])
	ADDQ(Imm(32), a)
	ADDQ(Imm(32), b)
	SUBQ(Imm(8), n)
	JNZ(LabelRef("loopL2"))
	Label("doneL2")
	Store(fold8(acc[0], false), ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// l2Lanes4 is l2Lanes of one row a against four rows at once: four
// accumulators, so four chains of additions in flight where l2Lanes has
// one (its time is the chain's latency), each row's sums in l2Lanes's
// order, so the same bits.
func l2Lanes4() { l2LanesFour(false) }

// l2LanesHalf is l2Lanes over float16 rows: each 8 values widened to
// float32 (F16C's VCVTPH2PS, exact), then the same subtraction, product
// and lane sums, so the same bits as l2Lanes over the decoded rows.
func l2LanesHalf() {
	TEXT("l2LanesHalfAVX2", NOSPLIT, "func(a *uint16, b *uint16, n int) float32")
	Pragma("noescape")
	Doc("l2LanesHalfAVX2 returns the sum of (a[j] - b[j])^2 for j < n (a multiple of 8) over float16 values widened to float32, in the order l2LanesGo (fastscan.go) keeps.")
	a := Load(Param("a"), GP64())
	b := Load(Param("b"), GP64())
	n := Load(Param("n"), GP64())
	acc := zeroed(1)
	TESTQ(n, n)
	JZ(LabelRef("doneL2H"))
	Label("loopL2H")
	x, y := YMM(), YMM()
	VCVTPH2PS(Mem{Base: a}, x)
	VCVTPH2PS(Mem{Base: b}, y)
	VSUBPS(y, x, x)
	VMULPS(x, x, x)
	VADDPS(x, acc[0], acc[0])
	ADDQ(Imm(16), a)
	ADDQ(Imm(16), b)
	SUBQ(Imm(8), n)
	JNZ(LabelRef("loopL2H"))
	Label("doneL2H")
	Store(fold8(acc[0], false), ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// l2LanesHalf4 is l2Lanes4 over float16 rows, widened as l2LanesHalf
// widens them.
func l2LanesHalf4() { l2LanesFour(true) }

// l2LanesFour writes l2Lanes4AVX2 (float32 rows) or, with half,
// l2LanesHalf4AVX2 (float16 rows, each 8 values widened by VCVTPH2PS).
func l2LanesFour(half bool) {
	name, elem, label, over := "l2Lanes4AVX2", "float32", "L24", ""
	if half {
		name, elem, label, over = "l2LanesHalf4AVX2", "uint16", "L2H4", ", over float16 values widened to float32"
	}
	step := uint64(32) // bytes of 8 values
	if half {
		step = 16
	}
	TEXT(name, NOSPLIT, fmt.Sprintf("func(a *%[1]s, b0 *%[1]s, b1 *%[1]s, b2 *%[1]s, b3 *%[1]s, n int, out *float32)", elem))
	Pragma("noescape")
	Doc(name + " sets out[k] to the sum of (a[j] - bk[j])^2 for j < n (a multiple of 8), k < 4" + over + ", each in the order l2LanesGo (fastscan.go) keeps.")
	a := Load(Param("a"), GP64())
	bs := []Register{Load(Param("b0"), GP64()), Load(Param("b1"), GP64()), Load(Param("b2"), GP64()), Load(Param("b3"), GP64())}
	n := Load(Param("n"), GP64())
	acc := zeroed(4)
	TESTQ(n, n)
	JZ(LabelRef("done" + label))
	Label("loop" + label)
	x := YMM()
	if half {
		VCVTPH2PS(Mem{Base: a}, x)
	} else {
		VMOVUPS(Mem{Base: a}, x)
	}
	for k, b := range bs {
		y := YMM()
		if half {
			VCVTPH2PS(Mem{Base: b}, y)
			VSUBPS(y, x, y)
		} else {
			VSUBPS(Mem{Base: b}, x, y)
		}
		VMULPS(y, y, y)
		VADDPS(y, acc[k], acc[k])
	}
	ADDQ(Imm(step), a)
	for _, b := range bs {
		ADDQ(Imm(step), b)
	}
	SUBQ(Imm(8), n)
	JNZ(LabelRef("loop" + label))
	Label("done" + label)
	store4(acc)
	VZEROUPPER()
	RET()
}

// store4 folds four accumulators (fold8) and stores the four sums to
// out in one 16-byte store: four 4-byte stores read back as one 16-byte
// value would stall the store forwarding.
func store4(acc []VecVirtual) {
	h := make([]VecVirtual, 4)
	for k := range 4 {
		h[k] = fold8(acc[k], false)
	}
	VUNPCKLPS(h[1], h[0], h[0])
	VUNPCKLPS(h[3], h[2], h[2])
	VMOVLHPS(h[2], h[0], h[0])
	out := Load(Param("out"), GP64())
	VMOVUPS(h[0], Mem{Base: out})
}

// cpuidECX1 returns ECX of CPUID leaf 1, where bit 29 says F16C:
// golang.org/x/sys/cpu does not report it.
func cpuidECX1() {
	TEXT("cpuidECX1", NOSPLIT, "func() uint32")
	Doc("cpuidECX1 returns ECX of CPUID leaf 1.")
	MOVL(U32(1), EAX)
	XORL(ECX, ECX)
	CPUID()
	Store(ECX, ReturnIndex(0))
	RET()
}

// quantize rounds q/delta to integers (q*inv, to nearest even, as the
// MXCSR default does) and sums the rounding errors q - delta*k and their
// squares, eight lanes each, folded by fold8.
func quantize() {
	TEXT("quantizeAVX2", NOSPLIT, "func(q *float32, n int, inv float32, delta float32, k *int32, out *float32)")
	Pragma("noescape")
	Doc("quantizeAVX2 sets k[j] to q[j]*inv rounded to the nearest integer (ties to even) for j < n (a multiple of 8) and out to the sums of q[j] - delta*k[j] and of their squares, in the order quantizeGo (fastscan.go) keeps.")
	q := Load(Param("q"), GP64())
	n := Load(Param("n"), GP64())
	inv, delta := YMM(), YMM()
	VBROADCASTSS(Load(Param("inv"), XMM()), inv)
	VBROADCASTSS(Load(Param("delta"), XMM()), delta)
	k := Load(Param("k"), GP64())
	acc := zeroed(2)
	TESTQ(n, n)
	JZ(LabelRef("doneQuant"))
	Label("loopQuant")
	x, r, f := YMM(), YMM(), YMM()
	VMOVUPS(Mem{Base: q}, x)
	VMULPS(inv, x, r)
	VCVTPS2DQ(r, r)
	VMOVDQU(r, Mem{Base: k})
	VCVTDQ2PS(r, f)
	VMULPS(delta, f, f)
	VSUBPS(f, x, x)
	VADDPS(x, acc[0], acc[0])
	VMULPS(x, x, x)
	VADDPS(x, acc[1], acc[1])
	ADDQ(Imm(32), q)
	ADDQ(Imm(32), k)
	SUBQ(Imm(8), n)
	JNZ(LabelRef("loopQuant"))
	Label("doneQuant")
	out := Load(Param("out"), GP64())
	for i := range 2 {
		h := fold8(acc[i], false)
		VMOVSS(h, Mem{Base: out, Disp: 4 * i})
	}
	VZEROUPPER()
	RET()
}

// tables builds vec.FastScan's lookup tables from a quantised query, two
// tables (8 values) a step. Entry v of the table of k[j..j+3] is the sum
// over i of max(k[j+i], 0) where bit i of v is set and max(-k[j+i], 0)
// where it is not. Each 32-bit lane of x holds max(k, 0) in its first byte
// and max(-k, 0) in its second, and one byte shuffle per i picks, within
// each 128-bit lane (one table), the byte bit i of v asks for.
func tables() {
	TEXT("tablesAVX2", NOSPLIT, "func(k *int32, n int, lut *byte) int32")
	Pragma("noescape")
	Doc("tablesAVX2 sets lut[4j+v], for j < n (a multiple of 8) in steps of 4 and v < 16, to the sum over i < 4 of max(k[j+i], 0) if bit i of v is set, else max(-k[j+i], 0), and returns minus the sum of max(-k[j], 0).")
	k := Load(Param("k"), GP64())
	n := Load(Param("n"), GP64())
	lut := Load(Param("lut"), GP64())
	var pick [4]VecVirtual
	for i := range pick {
		var lanes [8]uint32
		for v := range 16 {
			b := uint32(4*i + 1) // max(-k, 0): bit i clear
			if v>>i&1 == 1 {
				b = uint32(4 * i)
			}
			lanes[v/4] |= b << (8 * (v % 4))
			lanes[4+v/4] |= b << (8 * (v % 4))
		}
		pick[i] = lanes32(fmt.Sprintf("tablePick%d", i), lanes)
	}
	zero := zeroed(1)[0]
	negs := zeroed(1)[0]
	TESTQ(n, n)
	JZ(LabelRef("doneTables"))
	Label("loopTables")
	x, neg, t := YMM(), YMM(), YMM()
	VMOVDQU(Mem{Base: k}, x)
	VPSUBD(x, zero, neg)
	VPMAXSD(zero, neg, neg)
	VPADDD(neg, negs, negs)
	VPMAXSD(zero, x, x)
	VPSLLD(Imm(8), neg, neg)
	VPOR(neg, x, x)
	VPSHUFB(pick[0], x, t)
	for i := 1; i < 4; i++ {
		u := YMM()
		VPSHUFB(pick[i], x, u)
		VPADDB(u, t, t)
	}
	VMOVDQU(t, Mem{Base: lut})
	ADDQ(Imm(32), k)
	ADDQ(Imm(32), lut)
	SUBQ(Imm(8), n)
	JNZ(LabelRef("loopTables"))
	Label("doneTables")
	h, u := XMM(), XMM()
	VEXTRACTI128(Imm(1), negs, u)
	VPADDD(u, negs.AsX(), h)
	VPSHUFD(Imm(0x4e), h, u)
	VPADDD(u, h, h)
	VPSHUFD(Imm(0xb1), h, u)
	VPADDD(u, h, h)
	r := GP32()
	VMOVD(h, r)
	NEGL(r)
	VZEROUPPER()
	Store(r, ReturnIndex(0))
	RET()
}

// blockEstimate turns vec.FastScan's sums of one block into the first
// estimates and their bounds, eight entries a step (see BlockEstimate in
// fastscan.go for the formulas and the order of operations). A float16
// scalar becomes a float32 by integer moves: its magnitude bits shifted
// into a float32's place and multiplied by 2^112 (exact, subnormals
// included), its sign bit moved to bit 31.
func blockEstimate() {
	TEXT("blockEstimateAVX2", NOSPLIT, "func(sums *uint32, scal *byte, c *float32, est *float32, bound *float32)")
	Pragma("noescape")
	Doc("blockEstimateAVX2 computes est and bound for 32 entries as blockEstimateGo (fastscan.go) does.")
	sums := Load(Param("sums"), GP64())
	scal := Load(Param("scal"), GP64())
	cp := Load(Param("c"), GP64())
	est := Load(Param("est"), GP64())
	bound := Load(Param("bound"), GP64())
	// a, b0, ka and ke stay in registers; c0, c1, c2 and |c2| are
	// broadcast where used, for want of registers.
	var c [4]VecVirtual
	for i := range c {
		c[i] = YMM()
		VBROADCASTSS(Mem{Base: cp, Disp: 4 * i}, c[i])
	}
	a, b, ka, ke := c[0], c[1], c[2], c[3]
	constant := func(i int) VecVirtual {
		y := YMM()
		VBROADCASTSS(Mem{Base: cp, Disp: 4 * i}, y)
		return y
	}
	sign := broadcast32(0x8000)
	scale := broadcast32(0x77800000) // 2^112
	half := func(disp int) VecVirtual {
		h, s := YMM(), YMM()
		VPMOVZXWD(Mem{Base: scal, Disp: disp}, h)
		VPAND(sign, h, s)
		VPXOR(s, h, h) // the magnitude bits
		VPSLLD(Imm(16), s, s)
		VPSLLD(Imm(13), h, h)
		VMULPS(scale, h, h)
		VPOR(s, h, h)
		return h
	}
	for g := range 4 {
		s, kap, eps := YMM(), YMM(), YMM()
		VCVTDQ2PS(Mem{Base: sums, Disp: 32 * g}, s)
		VMULPS(a, s, s)
		VADDPS(b, s, s) // qs
		VPMOVZXBD(Mem{Base: scal, Disp: 128 + 8*g}, kap)
		VCVTDQ2PS(kap, kap)
		VPMOVZXBD(Mem{Base: scal, Disp: 160 + 8*g}, eps)
		VCVTDQ2PS(eps, eps)
		VMULPS(s, kap, s) // eu
		norm := half(16 * g)
		beta := half(64 + 16*g)
		VMULPS(constant(5), norm, norm)
		VADDPS(constant(4), norm, norm)
		VMULPS(beta, s, s)
		VMULPS(constant(6), s, s)
		VADDPS(s, norm, norm)
		VMOVUPS(norm, Mem{Base: est, Disp: 32 * g})
		VMULPS(ka, kap, kap)
		VMULPS(kap, kap, kap)
		VMULPS(ke, eps, eps)
		VMULPS(eps, eps, eps)
		VADDPS(eps, kap, kap)
		VSQRTPS(kap, kap)
		VMULPS(beta, kap, kap)
		VMULPS(constant(7), kap, kap)
		VMOVUPS(kap, Mem{Base: bound, Disp: 32 * g})
	}
	VZEROUPPER()
	RET()
}

// prefetch asks for every cache line of n bytes from p into the caches.
func prefetch() {
	TEXT("prefetchLines", NOSPLIT, "func(p *byte, n int)")
	Pragma("noescape")
	Doc("prefetchLines issues PREFETCHT0 for each 64-byte line holding any of p[0..n-1], n > 0.")
	p := Load(Param("p"), GP64())
	n := Load(Param("n"), GP64())
	end := GP64()
	LEAQ(Mem{Base: p, Index: n, Scale: 1}, end)
	ANDQ(I32(-64), p)
	Label("loopPrefetch")
	PREFETCHT0(Mem{Base: p})
	ADDQ(Imm(64), p)
	CMPQ(p, end)
	JB(LabelRef("loopPrefetch"))
	RET()
}

// mustResolve is c's argument slot, for an instruction that reads it from
// memory itself.
func mustResolve(c gotypes.Component) *gotypes.Basic {
	b, err := c.Resolve()
	if err != nil {
		panic(err)
	}
	return b
}
