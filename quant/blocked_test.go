package quant

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vlc-embed/vlc/internal/f16"
)

// The blocked layout scores as the entry codes do: for every bit width, at
// dimensions that straddle the 8-dimension chunk, at entry counts that
// straddle the 32-entry block, for the L2 and dot forms, Refine equals
// Scorer.Score on the entry code it was packed from (to float32 rounding),
// and the first estimate is within its bound for all but a few entries.
func TestBlockedMatchesEntryCodes(t *testing.T) {
	for _, bits := range []int{1, 2, 4, 8} {
		for _, d := range []int{1, 7, 8, 9, 96, 100, 300} {
			for _, n := range []int{1, 31, 32, 33, 70} {
				t.Run(fmt.Sprintf("b=%d/d=%d/n=%d", bits, d, n), func(t *testing.T) {
					checkBlocked(t, bits, d, n)
				})
			}
		}
	}
}

func checkBlocked(t *testing.T, bits, d, n int) {
	c := NewRotated(d, bits, 3)
	// Two lists: the second's anchor is offset, so that L2 scoring
	// subtracts a real anchor.
	anchors := randomResiduals(2, d, 9)
	c.SetAnchors(anchors)
	res := randomResiduals(n, d, uint64(d*bits+n))
	params := make([]byte, c.ParamBytes())
	c.Fit(params, res, n)
	cb := c.CodeBytes()
	codes := make([]byte, n*cb)
	for i := range n {
		c.Encode(codes[i*cb:(i+1)*cb], 1, params, res[i*d:(i+1)*d])
	}
	blocks := make([]byte, (n+BlockLen-1)/BlockLen*c.BlockBytes())
	low := make([]byte, n*c.LowBytes()+LowPad)
	c.Pack(codes, n, blocks, low)
	sc, bs := c.NewScorer(), c.NewBlockScorer()
	var est, bound [BlockLen]float32
	misses, checked := 0, 0
	for qi := range 5 {
		q := randomResiduals(1, d, uint64(100+qi))
		for _, dot := range []bool{false, true} {
			sc.SetQuery(q)
			bs.SetQuery(q)
			if dot {
				sc.ForDot(1, params)
				bs.ForDot(1, params)
			} else {
				sc.ForL2(1, params)
				bs.ForL2(1, params)
			}
			for e := range n {
				b, v := e/BlockLen, e%BlockLen
				block := blocks[b*c.BlockBytes() : (b+1)*c.BlockBytes()]
				want := sc.Score(codes[e*cb : (e+1)*cb])
				got := bs.Refine(block, v, low[e*c.LowBytes():])
				// Both sum <q', l> in float32, in different orders, and
				// subtract L/2 sum q': their rounding scales with the
				// terms, beta L |q'_j|, not with the result.
				rb := bs.(*rotatedBlockScorer)
				var terms float64
				for _, x := range rb.q {
					terms += math.Abs(float64(x))
				}
				beta := f16.ToFloat32(binary.LittleEndian.Uint16(codes[e*cb+c.packed+2:])) * rb.sqrtS
				terms *= float64(beta) * float64(int(1)<<bits)
				if math.Abs(float64(got-want)) > 1e-4*(1+math.Abs(float64(want)))+1e-6*terms {
					t.Fatalf("query %d dot=%v entry %d: Refine %v, Score %v", qi, dot, e, got, want)
				}
				bs.Estimate(block, v, v+1, &est, &bound)
				if bound[v] < 0 || math.IsNaN(float64(est[v])) {
					t.Fatalf("entry %d: estimate %v, bound %v", e, est[v], bound[v])
				}
				checked++
				if math.Abs(float64(est[v]-want)) > float64(bound[v])*(1+1e-5)+1e-5 {
					misses++
				}
			}
		}
	}
	// A normal variable leaves 4 deviations with probability 6e-5; the
	// bound also covers the query's rounding in full. Allow one miss in
	// a hundred, which a wrong bound would exceed by far.
	if misses > checked/100 {
		t.Errorf("%d of %d first estimates outside their bound", misses, checked)
	}
}

// Pack's bytes for a known code: the sign plane and low bits of one entry
// of 4 bits in 9 dimensions, and its scalars.
func TestPackLayout(t *testing.T) {
	c := NewRotated(9, 4, 1)
	code := make([]byte, c.CodeBytes())
	levels := []int{0, 15, 8, 7, 9, 1, 14, 6, 12} // sign bits 0 1 1 0 1 0 1 0 | 1
	for j, l := range levels {
		code[j/2] |= byte(l) << (4 * (j % 2))
	}
	code[c.packed], code[c.packed+1], code[c.packed+2], code[c.packed+3] = 1, 2, 3, 4
	blocks := make([]byte, c.BlockBytes())
	low := make([]byte, c.LowBytes()+LowPad)
	c.Pack(code, 1, blocks, low)
	if blocks[0] != 0b01010110 || blocks[32] != 1 {
		t.Errorf("sign bytes %08b %08b, want 01010110 00000001", blocks[0], blocks[32])
	}
	var lowBits uint64
	for i, b := range low[:6] {
		lowBits |= uint64(b) << (8 * i)
	}
	for j, l := range levels {
		if got := int(lowBits>>(3*(j%8)+24*(j/8))) & 7; got != l&7 {
			t.Errorf("dimension %d: low bits %d, want %d", j, got, l&7)
		}
	}
	sc := 64 // scalars after two chunks of signs
	if blocks[sc] != 1 || blocks[sc+1] != 2 || blocks[sc+64] != 3 || blocks[sc+65] != 4 {
		t.Errorf("scalars % x and % x, want 01 02 and 03 04", blocks[sc:sc+2], blocks[sc+64:sc+66])
	}
	// |u| = 7.5 7.5 0.5 0.5 1.5 6.5 6.5 1.5 4.5: kappa = 222.25/36.5 =
	// 6.089, stored as round(6.089/7.5*255) = 207.
	if k := blocks[sc+128]; k != 207 {
		t.Errorf("kappa byte %d, want 207", k)
	}
	if e := blocks[sc+160]; e == 0 {
		t.Error("eps byte 0 for a code whose magnitudes differ")
	}
}

// Unpack is the exact inverse of Pack: for every bit width, at dimensions
// that straddle the 8-dimension chunk and entry counts that straddle the
// block, for the L2 and ip forms, Pack then Unpack gives back every entry
// code Encode wrote, byte for byte, over whatever the destination held; and
// packing the unpacked codes again gives the same blocks and low bits.
func TestPackUnpackRoundTrip(t *testing.T) {
	for _, bits := range []int{1, 2, 4, 8} {
		for _, d := range []int{1, 7, 8, 9, 96, 100} {
			for _, n := range []int{1, 31, 32, 33, 70} {
				for _, ip := range []bool{false, true} {
					t.Run(fmt.Sprintf("b=%d/d=%d/n=%d/ip=%v", bits, d, n, ip), func(t *testing.T) {
						code, err := New(Spec{Kind: KindRotated, Dim: d, Bits: bits, Seed: 3, IP: ip})
						if err != nil {
							t.Fatal(err)
						}
						c := code.(*Rotated)
						c.SetAnchors(randomResiduals(2, d, 9))
						res := randomResiduals(n, d, uint64(d*bits+n))
						codes := make([]byte, n*c.CodeBytes())
						params := make([]byte, c.ParamBytes())
						c.EncodeList(codes, params, 1, res, n)
						checkUnpack(t, c, codes, n)
					})
				}
			}
		}
	}
}

// Unpack inverts Pack for codes that Encode may not produce: every level of
// every dimension, and scalars of any bits (NaN and infinities included).
func TestPackUnpackAnyLevels(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	for _, bits := range []int{1, 2, 4, 8} {
		for _, d := range []int{1, 7, 8, 9, 100} {
			t.Run(fmt.Sprintf("b=%d/d=%d", bits, d), func(t *testing.T) {
				c := NewRotated(d, bits, 1)
				const n = 70
				cb := c.CodeBytes()
				codes := make([]byte, n*cb)
				for e := range n {
					code := codes[e*cb : (e+1)*cb]
					for j := range d {
						l := (e + j) % (1 << bits) // all levels, in every dimension
						if e%3 == 0 {
							l = rng.IntN(1 << bits)
						}
						bit := j * bits
						code[bit/8] |= byte(l << (bit % 8))
					}
					for k := range 4 {
						code[c.packed+k] = byte(rng.Uint32())
					}
				}
				checkUnpack(t, c, codes, n)
			})
		}
	}
}

func checkUnpack(t *testing.T, c *Rotated, codes []byte, n int) {
	t.Helper()
	cb := c.CodeBytes()
	nb := (n + BlockLen - 1) / BlockLen
	blocks := make([]byte, nb*c.BlockBytes())
	low := make([]byte, n*c.LowBytes()+LowPad)
	c.Pack(codes, n, blocks, low)
	back := make([]byte, n*cb)
	for i := range back {
		back[i] = 0xa5 // Unpack overwrites the whole code
	}
	for e := range n {
		c.Unpack(blocks, low, e, back[e*cb:(e+1)*cb])
		if got, want := back[e*cb:(e+1)*cb], codes[e*cb:(e+1)*cb]; !bytes.Equal(got, want) {
			t.Fatalf("entry %d of %d: unpacked % x, encoded % x", e, n, got, want)
		}
	}
	blocks2 := make([]byte, len(blocks))
	low2 := make([]byte, len(low))
	c.Pack(back, n, blocks2, low2)
	if !bytes.Equal(blocks, blocks2) || !bytes.Equal(low, low2) {
		t.Fatal("packing the unpacked codes gives other blocks or low bits")
	}
}
