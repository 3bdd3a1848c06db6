package quant

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/vlc-embed/vlc/internal/vec"
)

// The flat code's Spec: 32 bits, named "flat", made by New from Bits 0 or
// 32 and no other.
func TestFlatSpec(t *testing.T) {
	for _, bits := range []int{0, 32} {
		c, err := New(Spec{Kind: KindFlat, Dim: 5, Bits: bits})
		if err != nil {
			t.Fatalf("bits %d: %v", bits, err)
		}
		s := c.Spec()
		if s != (Spec{Kind: KindFlat, Dim: 5, Bits: 32}) || c.CodeBytes() != 20 || c.ParamBytes() != 0 {
			t.Errorf("bits %d: spec %+v, %d code bytes, %d parameter bytes", bits, s, c.CodeBytes(), c.ParamBytes())
		}
		if got := s.String(); got != "flat, 32 bits per dimension" {
			t.Errorf("String() = %q", got)
		}
		if s.BitsPerDim() != 32 || (Spec{Kind: KindFlat, Dim: 5}).BitsPerDim() != 32 {
			t.Errorf("BitsPerDim %g", s.BitsPerDim())
		}
	}
	for _, s := range []Spec{{Kind: KindFlat, Dim: 5, Bits: 8}, {Kind: KindFlat, Dim: 5, Subspaces: 2}} {
		if _, err := New(s); !errors.Is(err, ErrBits) {
			t.Errorf("%+v: %v, want ErrBits", s, err)
		}
	}
	if k, err := ParseKind("flat"); err != nil || k != KindFlat || k.String() != "flat" {
		t.Errorf(`ParseKind("flat") = %v, %v`, k, err)
	}
	if b := Bits(KindFlat); !slices.Equal(b, []int{32}) {
		t.Errorf("Bits(KindFlat) = %v", b)
	}
	if c, err := New(Spec{Kind: KindFlat, Dim: 3, IP: true}); err != nil || !c.Spec().IP {
		t.Errorf("ip spec: %v, %v", c, err)
	}
}

// Decode gives back every residual bit for bit, the unusual values
// (signed zeros, subnormals, the largest float32s, NaN payloads) too, and
// merging changes nothing.
func TestFlatDecodeExact(t *testing.T) {
	special := []float32{0, float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32,
		math.MaxFloat32, -math.MaxFloat32, math.Float32frombits(0x7fc01234), float32(math.Inf(-1)), 1e-40}
	for _, d := range []int{1, 3, 9, 96} {
		n := 20
		c := NewFlat(d, false)
		res := randomResiduals(n, d, uint64(d))
		copy(res, special)
		codes := make([]byte, n*c.CodeBytes())
		c.EncodeList(codes, nil, 0, res, n)
		again := make([]byte, len(codes))
		if !c.EncodeFrozen(again, nil, 0, res, n) || !slices.Equal(again, codes) {
			t.Fatalf("d=%d: EncodeFrozen differs from EncodeList", d)
		}
		dec := make([]float32, d)
		cb := c.CodeBytes()
		for i := range n {
			code := codes[i*cb : (i+1)*cb]
			before := slices.Clone(code)
			c.Rescale(code, nil, nil)
			if !slices.Equal(code, before) {
				t.Fatalf("d=%d row %d: Rescale changed the code", d, i)
			}
			c.Decode(dec, nil, code)
			for j, v := range dec {
				if want := res[i*d+j]; math.Float32bits(v) != math.Float32bits(want) {
					t.Fatalf("d=%d row %d dim %d: decoded %v (%#x), encoded %v (%#x)", d, i, j, v, math.Float32bits(v), want, math.Float32bits(want))
				}
			}
		}
	}
}

// The scorer's L2, dot and ip-form L2 estimates equal the float64 values
// of what they stand for, within float32 rounding, for anchors at the
// origin and elsewhere; at the origin they are vec.L2 and vec.Dot of the
// query and the vector, bit for bit; and a code that is not 4-byte
// aligned (read through a copy) scores as an aligned one.
func TestFlatScore(t *testing.T) {
	for _, d := range []int{1, 4, 7, 96, 385} {
		t.Run(fmt.Sprintf("d=%d", d), func(t *testing.T) {
			const n, m = 30, 3
			anchors := randomResiduals(m, d, 77)
			clear(anchors[:d]) // anchor 0 at the origin
			res := randomResiduals(n, d, uint64(d)+1)
			q := randomResiduals(1, d, uint64(d)+2)
			for _, ip := range []bool{false, true} {
				c := NewFlat(d, ip)
				c.SetAnchors(anchors)
				cb := c.CodeBytes()
				codes := make([]byte, n*cb)
				c.EncodeList(codes, nil, 0, res, n)
				shifted := make([]byte, n*cb+1)[1:] // misaligned by one byte
				copy(shifted, codes)
				sc := c.NewScorer()
				sc.SetQuery(q)
				for a := range m {
					anchor := anchors[a*d : (a+1)*d]
					for i := range n {
						r := res[i*d : (i+1)*d]
						var l2, dot, qa2 float64
						for j := range d {
							x := float64(anchor[j]) + float64(r[j])
							l2 += (float64(q[j]) - x) * (float64(q[j]) - x)
							dot += float64(q[j]) * float64(r[j])
							qa2 += (float64(q[j]) - float64(anchor[j])) * (float64(q[j]) - float64(anchor[j]))
						}
						var scale float64 // of the terms summed: the rounding is relative to it
						for j := range d {
							scale += math.Abs(float64(q[j]))*math.Abs(float64(anchor[j])+float64(r[j])) + float64(q[j])*float64(q[j])
						}
						for _, f := range []struct {
							name string
							set  func(a int, params []byte)
							want float64
						}{
							{"l2", sc.ForL2, l2},
							{"dot", sc.ForDot, dot},
						} {
							if ip && f.name == "l2" {
								f.want = qa2 - 2*dot // |q-a|^2 - 2<q, r>
							}
							f.set(a, nil)
							got := sc.Score(codes[i*cb : (i+1)*cb])
							if tol := 1e-5 * (scale + l2 + qa2); math.Abs(float64(got)-f.want) > tol {
								t.Errorf("ip=%v anchor %d row %d %s: %g, want %g (tolerance %g)", ip, a, i, f.name, got, f.want, tol)
							}
							if odd := sc.Score(shifted[i*cb : (i+1)*cb]); math.Float32bits(odd) != math.Float32bits(got) {
								t.Errorf("ip=%v anchor %d row %d %s: misaligned code scores %g, aligned %g", ip, a, i, f.name, odd, got)
							}
							if a != 0 {
								continue
							}
							var ref float32
							switch {
							case f.name == "dot":
								ref = vec.Dot(q, r)
							case !ip:
								ref = vec.L2(q, r)
							default:
								ref = vec.L2(q, anchor) - 2*vec.Dot(q, r)
							}
							if math.Float32bits(got) != math.Float32bits(ref) {
								t.Errorf("ip=%v row %d %s at the origin: %g, vec gives %g", ip, i, f.name, got, ref)
							}
						}
					}
				}
			}
		})
	}
}

// BenchmarkFlatScore is the scorer's cost per vector, beside vec.L2 on
// the same float32 rows (the floor: the scorer adds an interface call and
// the view).
func BenchmarkFlatScore(b *testing.B) {
	for _, d := range []int{96, 384, 768} {
		const n = 1024
		c := NewFlat(d, false)
		c.SetAnchors(make([]float32, d))
		res := randomResiduals(n, d, 1)
		codes := make([]byte, n*c.CodeBytes())
		c.EncodeList(codes, nil, 0, res, n)
		q := randomResiduals(1, d, 2)
		b.Run(fmt.Sprintf("d=%d/scorer", d), func(b *testing.B) {
			sc := c.NewScorer()
			sc.SetQuery(q)
			sc.ForL2(0, nil)
			cb := c.CodeBytes()
			b.SetBytes(int64(cb))
			var sink float32
			for i := 0; b.Loop(); i++ {
				k := i % n
				sink += sc.Score(codes[k*cb : (k+1)*cb])
			}
			_ = sink
		})
		b.Run(fmt.Sprintf("d=%d/vec.L2", d), func(b *testing.B) {
			b.SetBytes(int64(4 * d))
			var sink float32
			for i := 0; b.Loop(); i++ {
				k := i % n
				sink += vec.L2(q, res[k*d:(k+1)*d])
			}
			_ = sink
		})
	}
}
