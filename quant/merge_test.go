package quant

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/vlc-embed/vlc/internal/f16"
)

// The rotated code is a Merger; SQ8 and PQ are not (their per-list grids
// cannot be re-expressed without loss).
func TestMergerKinds(t *testing.T) {
	if _, ok := Code(NewRotated(8, 4, 1)).(Merger); !ok {
		t.Error("rotated code is not a Merger")
	}
	if _, ok := Code(NewSQ8(8)).(Merger); ok {
		t.Error("SQ8 is a Merger")
	}
	if _, ok := Code(NewPQ(8, 4, 4, 1)).(Merger); ok {
		t.Error("PQ is a Merger")
	}
}

// Tolerances of the rescale. Rescale rounds each scalar to float16 once
// more (through float32, as Encode does): round to nearest moves a normal
// float16 by at most half an ulp, 2^-11 of its value, and a subnormal one
// by at most 2^-25 (half the subnormal spacing 2^-24). The stored values
// are multiplied back by s and sqrt(s), so, decoded,
//
//	|after - before| <= 2^-11 |before| + 2^-25 s (first scalar)
//	|after - before| <= 2^-11 |before| + 2^-25 sqrt(s) (B).
//
// The tests allow twice the relative part, 2^-10: the float64 -> float32
// -> float16 double rounding adds at most 2^-24 relative, and Decode's
// float32 rotation adds a few float32 roundings (~1e-6 relative at these
// dimensions); a scalar left unscaled, or scaled by the wrong power of the
// ratio (9 in these tests), would be off by far more.
const (
	rescaleRel = 1.0 / 1024      // 2^-10
	f16HalfSub = 1.0 / (1 << 25) // half float16's subnormal spacing
)

// A list encoded under its own parameters, merged with a list of larger
// residuals and rescaled, decodes and scores as it did, to the float16
// rounding of its scalars; the list whose parameters the merge keeps, and
// any rescale from params to the same params, are left byte for byte.
func TestRotatedRescale(t *testing.T) {
	for _, bits := range []int{1, 2, 4, 8} {
		for _, d := range []int{1, 7, 9, 100} {
			for _, ip := range []bool{false, true} {
				t.Run(fmt.Sprintf("b=%d/d=%d/ip=%v", bits, d, ip), func(t *testing.T) {
					checkRescale(t, bits, d, ip)
				})
			}
		}
	}
}

func checkRescale(t *testing.T, bits, d int, ip bool) {
	code, err := New(Spec{Kind: KindRotated, Dim: d, Bits: bits, Seed: 7, IP: ip})
	if err != nil {
		t.Fatal(err)
	}
	c := code.(*Rotated)
	var m Merger = c
	anchors := randomResiduals(2, d, 9)
	c.SetAnchors(anchors)
	cb, pb := c.CodeBytes(), c.ParamBytes()
	// Two segments of list 1, fitted separately; the second's residuals
	// are 3 times larger, so its s is about 9 times the first's.
	const n1, n2 = 40, 25
	res1 := randomResiduals(n1, d, uint64(11*d+bits))
	res2 := randomResiduals(n2, d, uint64(13*d+bits))
	for i := range res2 {
		res2[i] *= 3
	}
	codes1, codes2 := make([]byte, n1*cb), make([]byte, n2*cb)
	p1, p2 := make([]byte, pb), make([]byte, pb)
	c.EncodeList(codes1, p1, 1, res1, n1)
	c.EncodeList(codes2, p2, 1, res2, n2)
	s1, s2 := float64(getF32(p1, 0)), float64(getF32(p2, 0))
	if !(s2 > 2*s1) {
		t.Fatalf("s %v and %v: the second segment should have the larger residuals", s1, s2)
	}

	// The merged parameters are the larger s, whatever the order: what
	// Fit gives for the union of the residuals.
	pm, pmr, pf := make([]byte, pb), make([]byte, pb), make([]byte, pb)
	m.MergeParams(pm, p1, p2)
	m.MergeParams(pmr, p2, p1)
	c.Fit(pf, append(append([]float32(nil), res1...), res2...), n1+n2)
	if !bytes.Equal(pm, p2) || !bytes.Equal(pmr, p2) || !bytes.Equal(pm, pf) {
		t.Fatalf("merged params % x and % x, want % x (the larger; Fit of the union % x)", pm, pmr, p2, pf)
	}
	sm := float64(getF32(pm, 0))

	// Identity rescales leave codes as they are.
	for e := range n2 {
		got := append([]byte(nil), codes2[e*cb:(e+1)*cb]...)
		m.Rescale(got, p2, pm)
		if !bytes.Equal(got, codes2[e*cb:(e+1)*cb]) {
			t.Fatalf("entry %d of the kept segment: rescaled to its own s, % x became % x", e, codes2[e*cb:(e+1)*cb], got)
		}
	}
	for e := range n1 {
		got := append([]byte(nil), codes1[e*cb:(e+1)*cb]...)
		m.Rescale(got, p1, append([]byte(nil), p1...))
		if !bytes.Equal(got, codes1[e*cb:(e+1)*cb]) {
			t.Fatalf("entry %d: rescaled from p1 to p1, % x became % x", e, codes1[e*cb:(e+1)*cb], got)
		}
	}

	resc := append([]byte(nil), codes1...)
	for e := range n1 {
		m.Rescale(resc[e*cb:(e+1)*cb], p1, pm)
	}
	sc := c.NewScorer()
	L := 1<<bits - 1
	dec1, dec2 := make([]float32, d), make([]float32, d)
	qr := make([]float32, d)
	changed := 0
	for e := range n1 {
		orig, got := codes1[e*cb:(e+1)*cb], resc[e*cb:(e+1)*cb]
		if !bytes.Equal(orig[:c.packed], got[:c.packed]) {
			t.Fatalf("entry %d: Rescale changed the levels", e)
		}
		if !bytes.Equal(orig[c.packed:], got[c.packed:]) {
			changed++
		}
		slot1, beta1 := decodedScalars(c, orig, s1)
		slot2, beta2 := decodedScalars(c, got, sm)
		if tol := rescaleRel*math.Abs(slot1) + f16HalfSub*sm; math.Abs(slot2-slot1) > tol {
			t.Fatalf("entry %d: first scalar decodes to %g under p1, %g rescaled (tolerance %g)", e, slot1, slot2, tol)
		}
		if tol := rescaleRel*beta1 + f16HalfSub*math.Sqrt(sm); math.Abs(beta2-beta1) > tol {
			t.Fatalf("entry %d: B decodes to %g under p1, %g rescaled (tolerance %g)", e, beta1, beta2, tol)
		}
		// Decode reads only B: the residual estimates agree to its rounding.
		c.Decode(dec1, p1, orig)
		c.Decode(dec2, pm, got)
		var diff, norm float64
		for j := range d {
			diff += (float64(dec2[j]) - float64(dec1[j])) * (float64(dec2[j]) - float64(dec1[j]))
			norm += float64(dec1[j]) * float64(dec1[j])
		}
		if math.Sqrt(diff) > rescaleRel*math.Sqrt(norm)+f16HalfSub*math.Sqrt(sm)*math.Sqrt(float64(d))*float64(L) {
			t.Fatalf("entry %d: decoded residuals differ by %g, of norm %g", e, math.Sqrt(diff), math.Sqrt(norm))
		}

		// The scorer's estimates, L2 and dot, agree to the rounding of
		// the scalars. <q', u> is summed alike for both codes (same levels,
		// same q'), so the difference is the scalars' rounding, bounded as
		// above for each term, plus the few float32 roundings of the final
		// combination (2^-20 of the terms' magnitudes, 16 float32 ulps).
		for qi := range 3 {
			q := randomResiduals(1, d, uint64(200+qi))
			for _, dot := range []bool{false, true} {
				// q' = P(q - a) for L2, P q for dot, and <q', u> in float64.
				for j := range d {
					qr[j] = q[j]
					if !dot {
						qr[j] -= anchors[d+j]
					}
				}
				c.rot.Apply(qr)
				var qq, qu float64
				for j := range d {
					bit := j * bits
					l := int(orig[bit/8]>>(bit%8)) & L
					qq += float64(qr[j]) * float64(qr[j])
					qu += float64(qr[j]) * (float64(l) - float64(L)/2)
				}
				bqu := math.Abs(beta1 * qu)
				tol := rescaleRel*bqu + f16HalfSub*math.Sqrt(sm)*math.Abs(qu) + 1.0/(1<<20)*bqu
				if !dot {
					tol = 2*tol + rescaleRel*math.Abs(slot1) + f16HalfSub*sm + 1.0/(1<<20)*(qq+math.Abs(slot1))
				}
				sc.SetQuery(q)
				if dot {
					sc.ForDot(1, p1)
				} else {
					sc.ForL2(1, p1)
				}
				before := float64(sc.Score(orig))
				if dot {
					sc.ForDot(1, pm)
				} else {
					sc.ForL2(1, pm)
				}
				after := float64(sc.Score(got))
				if math.Abs(after-before) > tol {
					t.Fatalf("entry %d query %d dot=%v: estimate %g under p1, %g rescaled (tolerance %g)", e, qi, dot, before, after, tol)
				}
			}
		}
	}
	// The scalars of the first segment are divided by s and sqrt(s): a
	// ninefold s changes (nearly) all their bytes.
	if changed < n1*9/10 {
		t.Errorf("only %d of %d codes changed by a rescale to a %gx larger s", changed, n1, sm/s1)
	}
}

// decodedScalars returns a code's first scalar and B as the scorers read
// them, times s and sqrt(s), in float64.
func decodedScalars(c *Rotated, code []byte, s float64) (slot, beta float64) {
	slot = float64(f16.ToFloat32(binary.LittleEndian.Uint16(code[c.packed:]))) * s
	beta = float64(f16.ToFloat32(binary.LittleEndian.Uint16(code[c.packed+2:]))) * math.Sqrt(s)
	return slot, beta
}

// MergeParams of no lists is Fit's for an empty list; of one, that list's.
func TestRotatedMergeParamsEdges(t *testing.T) {
	c := NewRotated(4, 2, 1)
	dst := make([]byte, c.ParamBytes())
	c.MergeParams(dst)
	empty := make([]byte, c.ParamBytes())
	c.Fit(empty, nil, 0)
	if !bytes.Equal(dst, empty) {
		t.Errorf("merge of no lists % x, Fit of none % x", dst, empty)
	}
	p := make([]byte, c.ParamBytes())
	putF32(p, 0, 0.25)
	c.MergeParams(dst, p)
	if !bytes.Equal(dst, p) {
		t.Errorf("merge of one list % x, want % x", dst, p)
	}
}

// The store's use: two packed segments of a list, fitted separately, lose
// some deleted entries and merge: Unpack, Rescale to the merged params,
// Pack. The merged file's entries are the rescaled codes, byte for byte.
func TestRotatedMergeSegments(t *testing.T) {
	const d, bits = 100, 4
	c := NewRotated(d, bits, 5)
	c.SetAnchors(randomResiduals(1, d, 3))
	cb, pb := c.CodeBytes(), c.ParamBytes()
	pack := func(codes []byte, n int) (blocks, low []byte) {
		blocks = make([]byte, (n+BlockLen-1)/BlockLen*c.BlockBytes())
		low = make([]byte, n*c.LowBytes()+LowPad)
		c.Pack(codes, n, blocks, low)
		return blocks, low
	}
	ns := []int{45, 33}
	var segs [][]byte
	var params [][]byte
	for k, n := range ns {
		res := randomResiduals(n, d, uint64(20+k))
		for i := range res {
			res[i] *= float32(1 + 2*k)
		}
		codes, p := make([]byte, n*cb), make([]byte, pb)
		c.EncodeList(codes, p, 0, res, n)
		segs, params = append(segs, codes), append(params, p)
	}
	pm := make([]byte, pb)
	c.MergeParams(pm, params...)
	var merged, want []byte
	code := make([]byte, cb)
	for k, n := range ns {
		blocks, low := pack(segs[k], n)
		for e := range n {
			if e%5 == 2 {
				continue // deleted
			}
			c.Unpack(blocks, low, e, code)
			c.Rescale(code, params[k], pm)
			merged = append(merged, code...)
			w := append([]byte(nil), segs[k][e*cb:(e+1)*cb]...)
			c.Rescale(w, params[k], pm)
			want = append(want, w...)
		}
	}
	n := len(merged) / cb
	blocks, low := pack(merged, n)
	for e := range n {
		c.Unpack(blocks, low, e, code)
		if !bytes.Equal(code, want[e*cb:(e+1)*cb]) {
			t.Fatalf("merged entry %d: % x, want % x", e, code, want[e*cb:(e+1)*cb])
		}
	}
}
