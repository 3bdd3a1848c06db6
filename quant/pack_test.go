package quant

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vlc-embed/vlc/internal/par"
)

// Pack writes the bytes of packReference: for every bit width, at
// dimensions that straddle the 8-dimension chunk, the byte and the 64-bit
// word Pack reads (16 dimensions at 4 bits, 32 at 2), at entry counts that
// straddle the block, for levels drawn uniformly, from two values, or all
// equal (whose e2 cancels, so Pack sums in order), and for codes Encode
// wrote.
func TestPackMatchesReference(t *testing.T) {
	for _, bits := range []int{1, 2, 4, 8} {
		for _, d := range []int{1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 130, 767, 768} {
			for _, n := range []int{1, 31, 33, 200} {
				for _, kind := range []string{"uniform", "two", "equal", "encoded"} {
					c := NewRotated(d, bits, 5)
					codes := packCodes(c, n, kind, uint64(bits*100000+d*100+n))
					checkPack(t, fmt.Sprintf("b=%d/d=%d/n=%d/%s", bits, d, n, kind), c, codes, n)
				}
			}
		}
		// Past 4,096 bytes of levels, where Pack's table sums start a new
		// run.
		d := 4096*8/bits + 9
		for _, kind := range []string{"uniform", "extreme"} {
			c := NewRotated(d, bits, 5)
			codes := packCodes(c, 33, kind, uint64(bits))
			checkPack(t, fmt.Sprintf("b=%d/d=%d/n=33/%s", bits, d, kind), c, codes, 33)
		}
	}
	// Enough extreme 8-bit levels for the sum of (2l - L)^2 to pass 2^32.
	c := NewRotated(70000, 8, 5)
	checkPack(t, "b=8/d=70000/n=3/extreme", c, packCodes(c, 3, "extreme", 9), 3)
}

// packCodes returns n entry codes of c: levels of the kind named (with
// the padding bits past the dimension zero, as Encode leaves them) and
// random scalars, or codes Encode wrote for random residuals. Kinds:
// uniform, two (values), equal, extreme (0 or L), encoded.
func packCodes(c *Rotated, n int, kind string, seed uint64) []byte {
	d, cb, L := c.Dim(), c.CodeBytes(), 1<<c.bits-1
	codes := make([]byte, n*cb)
	if kind == "encoded" {
		c.SetAnchors(make([]float32, d))
		res := randomResiduals(n, d, seed)
		params := make([]byte, c.ParamBytes())
		c.Fit(params, res, n)
		for i := range n {
			c.Encode(codes[i*cb:(i+1)*cb], 0, params, res[i*d:(i+1)*d])
		}
		return codes
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	for e := range n {
		code := codes[e*cb : (e+1)*cb]
		a, b := rng.IntN(L+1), rng.IntN(L+1)
		for j := range d {
			l := a
			switch {
			case kind == "uniform":
				l = rng.IntN(L + 1)
			case kind == "two" && rng.IntN(2) == 1:
				l = b
			case kind == "extreme":
				l = L * rng.IntN(2)
			}
			bit := j * c.bits
			code[bit/8] |= byte(l << (bit % 8))
		}
		for k := c.packed; k < cb; k++ {
			code[k] = byte(rng.Uint32())
		}
	}
	return codes
}

// checkPack compares Pack with packReference into zeroed outputs, then
// into outputs both filled with the same random bytes: Pack must leave
// what it does not own (the low bits' padding, the slots past n in the
// last block) as the reference does, and combine with the rest as the
// reference does (signs ORed in, everything else overwritten).
func checkPack(t *testing.T, name string, c *Rotated, codes []byte, n int) {
	t.Helper()
	nb := (n + BlockLen - 1) / BlockLen
	blocks, low := make([]byte, nb*c.BlockBytes()), make([]byte, n*c.LowBytes()+LowPad)
	wantBlocks, wantLow := make([]byte, len(blocks)), make([]byte, len(low))
	for _, fill := range []string{"zeroed", "filled"} {
		if fill == "filled" {
			rng := rand.New(rand.NewPCG(uint64(n), uint64(len(codes))))
			for i := range blocks {
				blocks[i] = byte(rng.Uint32())
			}
			for i := range low {
				low[i] = byte(rng.Uint32())
			}
			copy(wantBlocks, blocks)
			copy(wantLow, low)
		}
		c.Pack(codes, n, blocks, low)
		packReference(c, codes, n, wantBlocks, wantLow)
		if !bytes.Equal(blocks, wantBlocks) {
			for i := range blocks {
				if blocks[i] != wantBlocks[i] {
					t.Fatalf("%s/%s: block byte %d (block %d, offset %d) is %d, the reference wrote %d", name, fill, i, i/c.BlockBytes(), i%c.BlockBytes(), blocks[i], wantBlocks[i])
				}
			}
		}
		if !bytes.Equal(low, wantLow) {
			for i := range low {
				if low[i] != wantLow[i] {
					t.Fatalf("%s/%s: low byte %d (entry %d) is %d, the reference wrote %d", name, fill, i, i/max(c.LowBytes(), 1), low[i], wantLow[i])
				}
			}
		}
	}
}

// BenchmarkPack: 65,536 entries of 768 dimensions at 2, 4 and 8 bits,
// Pack beside the reference. Run with -cpu=1 for one core's cost an entry
// (ns/op / 65,536).
func BenchmarkPack(b *testing.B) {
	const n, d = 1 << 16, 768
	for _, bits := range []int{2, 4, 8} {
		c := NewRotated(d, bits, 5)
		codes := packCodes(c, n, "uniform", 1)
		blocks := make([]byte, (n+BlockLen-1)/BlockLen*c.BlockBytes())
		low := make([]byte, n*c.LowBytes()+LowPad)
		for _, v := range []struct {
			name string
			pack func(codes []byte, n int, blocks, low []byte)
		}{{"fast", c.Pack}, {"reference", func(codes []byte, n int, blocks, low []byte) { packReference(c, codes, n, blocks, low) }}} {
			b.Run(fmt.Sprintf("%s/n=64K/d=%d/b=%d", v.name, d, bits), func(b *testing.B) {
				b.SetBytes(int64(len(codes)))
				for b.Loop() {
					clear(blocks)
					clear(low)
					v.pack(codes, n, blocks, low)
				}
			})
		}
	}
}

// packReference is Pack as first written, level by level with the eps
// sum in dimension order: the oracle of the faster Pack.
func packReference(c *Rotated, codes []byte, n int, blocks, low []byte) {
	cb, bb, lb := c.CodeBytes(), c.BlockBytes(), c.LowBytes()
	chunks, w := c.chunks(), c.lowBits()
	L := 1<<c.bits - 1
	half := float64(L) / 2
	unit := c.unit()
	sc := 32 * chunks // start of the scalars in a block
	nb := (n + BlockLen - 1) / BlockLen
	par.For(nb, 64, func(lo, hi int) {
		u := make([]float64, c.dim)
		for e := lo * BlockLen; e < min(hi*BlockLen, n); e++ {
			entry := codes[e*cb : (e+1)*cb]
			blk := blocks[(e/BlockLen)*bb : (e/BlockLen+1)*bb]
			v := e % BlockLen
			lowE := low[e*lb : (e+1)*lb]
			var su, su2 float64
			for p := range chunks {
				var lw uint64
				for i := range min(8, c.dim-8*p) {
					j := 8*p + i
					bit := j * c.bits
					l := int(entry[bit/8]>>(bit%8)) & L
					blk[32*p+v] |= byte(l>>w) << i
					lw |= uint64(l&(1<<w-1)) << (w * i)
					u[j] = float64(l) - half
					su += math.Abs(u[j])
					su2 += u[j] * u[j]
				}
				for k := range w {
					lowE[w*p+k] = byte(lw >> (8 * k))
				}
			}
			kb := min(max(math.Round(su2/su/half*255), 1), 255)
			kappa := float64(float32(kb) * unit) // as the scorer computes it
			var e2 float64
			for _, x := range u {
				d := math.Abs(x) - kappa
				e2 += d * d
			}
			eb := min(math.Ceil(math.Sqrt(e2/float64(c.dim))/float64(unit)*(1+1e-6)), 255)
			copy(blk[sc+2*v:], entry[c.packed:c.packed+2])
			copy(blk[sc+64+2*v:], entry[c.packed+2:c.packed+4])
			blk[sc+128+v] = byte(kb)
			blk[sc+160+v] = byte(eb)
		}
	})
}
