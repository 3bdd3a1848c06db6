package vec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// lengths straddle every block the kernels use: 4 lanes, 8, 16 and 32
// values, and whole panels.
var lengths = []int{1, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 96, 100, 127, 128, 129, 392, 768, 784}

func randFloats(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return b
}

// TestPanelsBits holds Dots4 and Dots1 to a plain in-order loop, bit for
// bit, and so to Dot2x4, the CPU assign's reference semantics.
func TestPanelsBits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, d := range lengths {
		for _, m := range []int{1, 5, 16, 17, 63, 64, 65, 130} {
			anchors := randFloats(r, m*d)
			x := randFloats(r, 4*d)
			p := NewPanels(anchors, m, d)
			out4 := make([]float32, 4*p.Stride())
			out1 := make([]float32, p.Stride())
			p.Dots4(x, out4)
			// Eight distinct rows: the second four must not be the first.
			x8 := append(append([]float32(nil), x...), randFloats(r, 4*d)...)
			out8 := make([]float32, 8*p.Stride())
			p.DotsBlock(x8, out8)
			sameBits(t, fmt.Sprintf("DotsBlock d=%d m=%d", d, m), out8[:4*p.Stride()], out4)
			p.Dots4(x8[4*d:], out4)
			sameBits(t, fmt.Sprintf("DotsBlock d=%d m=%d, rows 4..7", d, m), out8[4*p.Stride():], out4)
			p.Dots4(x, out4)
			for k := range 4 {
				p.Dots1(x[k*d:(k+1)*d], out1)
				for a := range p.Stride() {
					var want float32
					if a < m {
						for j := range d {
							want += float32(x[k*d+j] * anchors[a*d+j])
						}
					}
					if got := out4[k*p.Stride()+a]; math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("d=%d m=%d: Dots4 point %d anchor %d = %v, want %v", d, m, k, a, got, want)
					}
					if got := out1[a]; math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("d=%d m=%d: Dots1 point %d anchor %d = %v, want %v", d, m, k, a, got, want)
					}
				}
				if m >= 4 {
					r := Dot2x4(x[k*d:(k+1)*d], x[k*d:(k+1)*d], anchors[:d], anchors[d:2*d], anchors[2*d:3*d], anchors[3*d:4*d])
					for a := range 4 {
						if math.Float32bits(r[a]) != math.Float32bits(out4[k*p.Stride()+a]) {
							t.Fatalf("d=%d: Dots4 differs from Dot2x4 at anchor %d", d, a)
						}
					}
				}
			}
		}
	}
}

// TestKernelParity compares the kernels in use (assembly where the CPU has
// it) with the Go references, bit for bit.
func TestKernelParity(t *testing.T) {
	t.Logf("kernels: %s", Kernels())
	r := rand.New(rand.NewPCG(3, 4))
	for _, d := range lengths {
		panel := randFloats(r, panelGroup*PanelWidth*d)
		x := randFloats(r, 4*d)
		got, want := make([]float32, 4*PanelWidth), make([]float32, 4*PanelWidth)
		panel4(x, d, panel, d, got, PanelWidth)
		panel4Go(x, d, panel, d, want, PanelWidth)
		sameBits(t, fmt.Sprintf("panel4 d=%d", d), got, want)
		panel1(x[:d], panel, PanelWidth*d, d, got)
		panel1Go(x[:d], panel, PanelWidth*d, d, want)
		sameBits(t, fmt.Sprintf("panel1 d=%d", d), got, want)
	}
	for _, n := range lengths {
		q := randFloats(r, 2*n)
		c := randBytes(r, n)
		b := n &^ 31
		sameBits(t, fmt.Sprintf("dotU8 n=%d", b), []float32{dotU8(q, c[:b])}, []float32{dotU8Go(q, c[:b])})
		b = n &^ 15
		sameBits(t, fmt.Sprintf("dotU4 n=%d", b), []float32{dotU4(q, c[:b])}, []float32{dotU4Go(q, c[:b])})
		b = n &^ 31
		sameBits(t, fmt.Sprintf("sumSquares n=%d", b), []float32{sumSquares(q[:b])}, []float32{sumSquaresGo(q[:b])})
	}
}

// TestSumSquares holds SumSquares to a float64 sum and to its documented
// order (foldLanes, then the tail in order), and to Dot(x, x) within the
// bound its doc gives; infinities and NaN come through.
func TestSumSquares(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range lengths {
		x := randFloats(r, n)
		var want float64
		for _, v := range x {
			want += float64(v) * float64(v)
		}
		got := SumSquares(x)
		if math.Abs(float64(got)-want) > 1e-6*want*float64(n) {
			t.Errorf("SumSquares n=%d = %v, float64 sum %v", n, got, want)
		}
		if order := inOrder(x, x); math.Float32bits(order) != math.Float32bits(got) {
			t.Errorf("SumSquares n=%d = %v, the documented order gives %v", n, got, order)
		}
		dot := Dot(x, x)
		if bound := 2 * float64(n) * 0x1p-24 * float64(dot); math.Abs(float64(got)-float64(dot)) > bound {
			t.Errorf("SumSquares n=%d = %v, Dot %v: further apart than %v", n, got, dot, bound)
		}
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(-1)), 0x1p70} {
			y := append([]float32(nil), x...)
			y[r.IntN(n)] = bad
			want := float32(math.Inf(1))
			if bad != bad {
				want = bad
			}
			if got := SumSquares(y); math.Float32bits(got) != math.Float32bits(want) && !(want != want && got != got) {
				t.Errorf("SumSquares n=%d with a %v = %v, want %v", n, bad, got, want)
			}
		}
	}
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: value %d = %v, want %v (bits differ)", what, i, got[i], want[i])
		}
	}
}

// TestDotBytes holds DotU8 and DotU4 to float64 sums and to their own
// documented order (foldLanes, then the tail in order).
func TestDotBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range lengths {
		q := randFloats(r, 2*n)
		c := randBytes(r, n)
		var w8, w4 float64
		v8, v4 := make([]float32, n), make([]float32, 2*n)
		for j, b := range c {
			w8 += float64(q[j]) * float64(b)
			v8[j] = float32(b)
			v4[2*j], v4[2*j+1] = float32(b&15), float32(b>>4)
		}
		for j, v := range v4 {
			w4 += float64(q[j]) * float64(v)
		}
		got8, got4 := DotU8(q, c), DotU4(q, c)
		for _, c := range []struct {
			name   string
			got    float32
			want   float64
			values []float32
		}{
			{"DotU8", got8, w8, v8},
			{"DotU4", got4, w4, v4},
		} {
			if math.Abs(float64(c.got)-c.want) > 1e-4*(1+math.Abs(c.want))*float64(len(c.values)) {
				t.Errorf("%s n=%d = %v, float64 sum %v", c.name, n, c.got, c.want)
			}
			if order := inOrder(q, c.values); math.Float32bits(order) != math.Float32bits(c.got) {
				t.Errorf("%s n=%d = %v, the documented order gives %v", c.name, n, c.got, order)
			}
		}
	}
}

// TestDotBits holds DotBits to a float64 sum and, bit for bit, to the
// documented order, at every length of lengths (in bytes).
func TestDotBits(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, n := range lengths {
		q := randFloats(r, 8*n)
		c := randBytes(r, n)
		v := make([]float32, 8*n)
		var want float64
		for j := range v {
			if c[j/8]>>(j%8)&1 == 1 {
				v[j] = 1
				want += float64(q[j])
			}
		}
		got := DotBits(q, c)
		if math.Abs(float64(got)-want) > 1e-5*float64(len(v)) {
			t.Errorf("n=%d: DotBits = %v, float64 sum %v", n, got, want)
		}
		if order := inOrder(q, v); math.Float32bits(order) != math.Float32bits(got) {
			t.Errorf("n=%d: DotBits = %v, the documented order gives %v", n, got, order)
		}
	}
}

// TestFWHT holds FWHT to its Go loop bit for bit, and to an orthonormal
// transform (applied twice with scale 1/sqrt(n), x comes back).
func TestFWHT(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for n := 1; n <= 2048; n *= 2 {
		x := randFloats(r, n)
		got, want := slices.Clone(x), slices.Clone(x)
		scale := float32(1 / math.Sqrt(float64(n)))
		FWHT(got, scale)
		fwhtGo(want, scale)
		for j := range got {
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
				t.Fatalf("n=%d: value %d is %v, the Go loop gives %v", n, j, got[j], want[j])
			}
		}
		FWHT(got, scale)
		for j := range got {
			if math.Abs(float64(got[j]-x[j])) > 1e-5*math.Sqrt(float64(n)) {
				t.Fatalf("n=%d: twice, value %d is %v, was %v", n, j, got[j], x[j])
			}
		}
	}
}

// TestDotsU4I8 holds DotsU4I8 (and its Go reference) to a plain sum in
// natural order over weights at the int8 extremes and random ones, for
// widths that straddle its 32- and 16-byte steps, rows in any order,
// repeated, and the last row of the data.
func TestDotsU4I8(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{16, 32, 48, 64, 96, 384} {
		for _, extreme := range []bool{false, true} {
			q := make([]int8, 2*n)
			for j := range q {
				q[j] = int8(r.IntN(255) - 127)
				if extreme {
					q[j] = []int8{-128, 127}[r.IntN(2)]
				}
			}
			stride, rows := n+7, 40
			data := randBytes(r, stride*(rows-1)+n) // the last row ends the data
			if extreme {
				for i := range data {
					data[i] = 0xff
				}
			}
			ids := []uint32{uint32(rows - 1), 0, 3, 3, 17, uint32(rows - 2), 1, 2, 5}
			w := make([]int8, len(q))
			U4Weights(w, q)
			got, ref := make([]int32, len(ids)), make([]int32, len(ids))
			DotsU4I8(w, data, stride, ids, got)
			dotsU4I8Go(w, data, stride, rows, ids, ref)
			for k, id := range ids {
				var want int32
				for i, b := range data[int(id)*stride : int(id)*stride+n] {
					want += int32(q[2*i])*int32(b&15) + int32(q[2*i+1])*int32(b>>4)
				}
				if got[k] != want || ref[k] != want {
					t.Errorf("n=%d extreme=%v row %d: kernel %d, Go %d, want %d", n, extreme, id, got[k], ref[k], want)
				}
			}
		}
	}
}

// inOrder sums q[j]*v[j] in the order foldLanes documents, from scratch.
func inOrder(q, v []float32) float32 {
	var a [32]float32
	n := len(v) &^ 31
	for j := range n {
		a[j%32] += float32(q[j] * v[j])
	}
	s := foldLanes(&a)
	for j := n; j < len(v); j++ {
		s += float32(q[j] * v[j])
	}
	return s
}

// BenchmarkKernels times each kernel in use beside its Go reference.
func BenchmarkKernels(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, d := range []int{96, 768} {
		q := randFloats(r, 2*d)
		c := randBytes(r, d)
		m := 256
		p := NewPanels(randFloats(r, m*d), m, d)
		x := randFloats(r, 4*d)
		out := make([]float32, 4*p.Stride())
		w4, c4 := make([]int8, d), randBytes(r, 64*d/2)
		ids, outI := make([]uint32, 32), make([]int32, 32)
		for i := range ids {
			ids[i] = uint32(r.IntN(64))
		}
		var sink float32
		for _, k := range []struct {
			name string
			run  func()
		}{
			{"DotU8", func() { sink += DotU8(q, c) }},
			{"DotU8/go", func() { sink += dotU8Go(q, c) }},
			{"DotU4", func() { sink += DotU4(q, c[:d/2]) }},
			{"DotU4/go", func() { sink += dotU4Go(q, c[:d/2]) }},
			{"FWHT/128", func() { FWHT(q[:128], 0.08838835) }},
			{"FWHT/128/go", func() { fwhtGo(q[:128], 0.08838835) }},
			{"DotBits", func() { sink += DotBits(q, c[:d/8]) }},
			{"DotBits/go", func() { sink += dotBitsGo(q, c[:d/8]) }},
			{"DotsU4I8/32rows", func() { DotsU4I8(w4, c4, d/2, ids, outI) }},
			{"DotsU4I8/32rows/go", func() { dotsU4I8Go(w4, c4, d/2, 64, ids, outI) }},
			{"SumSquares", func() { sink += SumSquares(q[:d]) }},
			{"SumSquares/go", func() { sink += sumSquaresGo(q[:d]) }},
			{"Dot", func() { sink += Dot(q[:d], q[:d]) }},
			{"Dots4/m=256", func() { p.Dots4(x, out) }},
			{"Dots4/m=256/go", func() {
				for g := 0; g < p.Stride()/PanelWidth; g++ {
					panel4Go(x, d, p.data[g*PanelWidth*d:], d, out[g*PanelWidth:], p.Stride())
				}
			}},
			{"Dots1/m=256", func() { p.Dots1(x[:d], out) }},
			{"Dot2x4/m=256", func() {
				for a := 0; a+4 <= m; a += 4 {
					Dot2x4(x[:d], x[d:2*d], x[:d], x[:d], x[:d], x[:d])
				}
			}},
		} {
			b.Run(fmt.Sprintf("%s/d=%d", k.name, d), func(b *testing.B) {
				for b.Loop() {
					k.run()
				}
			})
		}
		_ = sink
	}
}

// Arguments the kernels cannot score panic with a message, rather than
// reading past a slice or dividing by zero.
func TestKernelArgs(t *testing.T) {
	for name, f := range map[string]func(){
		"DotU8 short weights":   func() { DotU8(make([]float32, 3, 64), make([]byte, 4)) },
		"DotU4 short weights":   func() { DotU4(make([]float32, 7, 64), make([]byte, 4)) },
		"Panels of no anchors":  func() { NewPanels(nil, 0, 4) },
		"FWHT of 12 values":     func() { FWHT(make([]float32, 12), 1) },
		"DotBits short weights": func() { DotBits(make([]float32, 15, 64), make([]byte, 2)) },
		"DotsU4I8 no weights":   func() { DotsU4I8(nil, make([]byte, 64), 0, []uint32{0}, make([]int32, 1)) },
		"DotsU4I8 33 weights":   func() { DotsU4I8(make([]int8, 33), make([]byte, 64), 16, []uint32{0}, make([]int32, 1)) },
		"DotsU4I8 odd width":    func() { DotsU4I8(make([]int8, 48), make([]byte, 64), 24, []uint32{0}, make([]int32, 1)) },
		"DotsU4I8 row past end": func() { DotsU4I8(make([]int8, 32), make([]byte, 35), 20, []uint32{1}, make([]int32, 1)) },
		"DotsU4I8 late row past end": func() {
			DotsU4I8(make([]int8, 32), make([]byte, 200), 20, []uint32{0, 9, 3, 10, 1}, make([]int32, 5))
		},
		"DotsU4I8 short out":    func() { DotsU4I8(make([]int8, 32), make([]byte, 40), 20, []uint32{0, 0}, make([]int32, 1)) },
		"U4Weights odd length":  func() { U4Weights(make([]int8, 16), make([]int8, 16)) },
		"Panels of dimension 0": func() { NewPanels(nil, 4, 0) },
		"DotsBlock of 3 rows":   func() { NewPanels(make([]float32, 8), 2, 4).DotsBlock(make([]float32, 12), make([]float32, 256)) },
		"DotsBlock of no rows":  func() { NewPanels(make([]float32, 8), 2, 4).DotsBlock(nil, make([]float32, 256)) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "vec: ") {
					t.Errorf("%s: recovered %v, want a panic naming the problem", name, r)
				}
			}()
			f()
		}()
	}
}

// Dot2x4 returns the dot products of x0 and x1 with a0..a3 in one pass (one
// float32 accumulator per pair, summed in order of j): the CPU assign's
// kernel before the panels, kept as a second reference for their bits and
// as the baseline of BenchmarkKernels.
func Dot2x4(x0, x1, a0, a1, a2, a3 []float32) (r [8]float32) {
	n := len(x0)
	x1, a0, a1, a2, a3 = x1[:n], a0[:n], a1[:n], a2[:n], a3[:n]
	var s00, s01, s02, s03, s10, s11, s12, s13 float32
	for j, u := range x0 {
		v := x1[j]
		b0, b1, b2, b3 := a0[j], a1[j], a2[j], a3[j]
		s00 += float32(u * b0)
		s01 += float32(u * b1)
		s02 += float32(u * b2)
		s03 += float32(u * b3)
		s10 += float32(v * b0)
		s11 += float32(v * b1)
		s12 += float32(v * b2)
		s13 += float32(v * b3)
	}
	return [8]float32{s00, s01, s02, s03, s10, s11, s12, s13}
}
