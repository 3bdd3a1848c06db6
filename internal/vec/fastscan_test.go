package vec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/internal/f16"
)

// chunkCounts straddle the level kernel's four-chunk step and the scan's
// 128-chunk call.
var chunkCounts = []int{1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 48, 96, 127, 128, 129, 192, 255, 256, 257}

// TestFastScan holds FastScan, in use and as the Go reference, to the sum
// it documents computed from scratch, with table bytes up to 255 so that
// the 16-bit lanes of the assembly run closest to overflow.
func TestFastScan(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, pairs := range chunkCounts {
		lut, signs := randBytes(r, 32*pairs), randBytes(r, 32*pairs)
		if pairs == 128 {
			for i := range lut {
				lut[i] = 255
			}
		}
		var want [32]uint32
		for p := range pairs {
			for v := range 32 {
				b := signs[32*p+v]
				want[v] += uint32(lut[32*p+int(b&15)]) + uint32(lut[32*p+16+int(b>>4)])
			}
		}
		var got, ref [32]uint32
		FastScan(lut, signs, &got)
		for p := 0; p < pairs; p += scanChunkPairs {
			n := min(pairs-p, scanChunkPairs)
			fastScanGo(lut[32*p:32*(p+n)], signs[32*p:32*(p+n)], &ref)
		}
		if got != want || ref != want {
			t.Fatalf("pairs=%d: FastScan %v, reference %v, want %v", pairs, got, ref, want)
		}
	}
}

// levels returns the levels DotLevels documents, from scratch.
func levels(signs, low []byte, w, n int) []float32 {
	v := make([]float32, n)
	for j := range v {
		p, i := j/8, j%8
		l := int(signs[32*p]>>i) & 1 << w
		for b := range w {
			bit := w*j + b // bit of the low bits, chunks being whole bytes
			l |= int(low[bit/8]>>(bit%8)) & 1 << b
		}
		v[j] = float32(l)
	}
	return v
}

// TestDotLevels holds DotLevels to its Go reference bit for bit, to the
// documented lane order, and to a float64 sum.
func TestDotLevels(t *testing.T) {
	t.Logf("kernels: %s", Kernels())
	r := rand.New(rand.NewPCG(13, 14))
	for _, w := range []int{0, 1, 3, 7} {
		for _, chunks := range chunkCounts {
			n := 8 * chunks
			q := randFloats(r, n)
			signs := randBytes(r, 32*chunks)
			low := randBytes(r, w*chunks+LevelsPad)
			got := DotLevels(q, signs, low, w)
			sameBits(t, fmt.Sprintf("w=%d chunks=%d", w, chunks), []float32{got}, []float32{dotLevelsGo(q, signs, low, w)})
			v := levels(signs, low, w, n)
			var a [32]float32
			var want float64
			for j := range v {
				a[8*((j/8)%4)+j%8] += float32(q[j] * v[j])
				want += float64(q[j]) * float64(v[j])
			}
			sameBits(t, fmt.Sprintf("w=%d chunks=%d, documented order", w, chunks), []float32{got}, []float32{foldLanes(&a)})
			if math.Abs(float64(got)-want) > 1e-5*float64(n)*float64(int(1)<<(w+1)) {
				t.Errorf("w=%d chunks=%d: %v, float64 sum %v", w, chunks, got, want)
			}
		}
	}
}

func TestFastScanArgs(t *testing.T) {
	for name, f := range map[string]func(){
		"FastScan ragged table":    func() { FastScan(make([]byte, 33), make([]byte, 64), new([32]uint32)) },
		"FastScan short signs":     func() { FastScan(make([]byte, 64), make([]byte, 32), new([32]uint32)) },
		"DotLevels ragged":         func() { DotLevels(make([]float32, 9), make([]byte, 64), make([]byte, 16), 1) },
		"DotLevels 2 low bits":     func() { DotLevels(make([]float32, 8), make([]byte, 64), make([]byte, 16), 2) },
		"DotLevels short signs":    func() { DotLevels(make([]float32, 16), make([]byte, 32), make([]byte, 16), 1) },
		"DotLevels no low padding": func() { DotLevels(make([]float32, 16), make([]byte, 64), make([]byte, 6), 3) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || fmt.Sprint(r)[:5] != "vec: " {
					t.Errorf("%s: recovered %v, want a panic naming the problem", name, r)
				}
			}()
			f()
		}()
	}
}

func BenchmarkFastScan(b *testing.B) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, d := range []int{96, 768} {
		chunks := d / 8
		lut, signs := randBytes(r, 32*chunks), randBytes(r, 32*chunks)
		q := randFloats(r, d)
		low := randBytes(r, 7*chunks+LevelsPad)
		var out [32]uint32
		var sink float32
		b.Run(fmt.Sprintf("FastScan32/d=%d", d), func(b *testing.B) {
			for b.Loop() {
				FastScan(lut, signs, &out)
			}
		})
		b.Run(fmt.Sprintf("FastScan32/go/d=%d", d), func(b *testing.B) {
			for b.Loop() {
				out = [32]uint32{}
				fastScanGo(lut, signs, &out)
			}
		})
		for _, w := range []int{3, 7} {
			b.Run(fmt.Sprintf("DotLevels/w=%d/d=%d", w, d), func(b *testing.B) {
				for b.Loop() {
					sink += DotLevels(q, signs, low, w)
				}
			})
			b.Run(fmt.Sprintf("DotLevels/go/w=%d/d=%d", w, d), func(b *testing.B) {
				for b.Loop() {
					sink += dotLevelsGo(q, signs, low, w)
				}
			})
		}
		_ = sink
	}
}

// TestPrepareKernels holds DiffStats, L2Lanes and Quantize to their Go
// references bit for bit (L2Lanes to DiffStats's sum of squares), and to
// plain sums.
func TestPrepareKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	for _, chunks := range chunkCounts {
		n := 8 * chunks
		a, b := randFloats(r, n), randFloats(r, n)
		dst, ref := make([]float32, n), make([]float32, n)
		sq, sum, big := DiffStats(dst, a, b)
		var want [3]float32
		diffStatsGo(ref, a, b, &want)
		sameBits(t, fmt.Sprintf("DiffStats n=%d", n), []float32{sq, sum, big}, want[:])
		sameBits(t, fmt.Sprintf("DiffStats n=%d, differences", n), dst, ref)
		sameBits(t, fmt.Sprintf("L2Lanes n=%d", n), []float32{L2Lanes(a, b), l2LanesGo(a, b)}, []float32{sq, sq})
		c, long := randFloats(r, n), randFloats(r, n+8) // long is longer than a: only its first n count
		four, want4 := L2Lanes4(a, b, c, a, long), [4]float32{sq, l2LanesGo(a, c), 0, l2LanesGo(a, long[:n])}
		var go4 [4]float32
		l2Lanes4Go(a, b, c, a, long[:n], &go4)
		sameBits(t, fmt.Sprintf("L2Lanes4 n=%d", n), append(four[:], go4[:]...), append(want4[:], want4[:]...))
		var s2, s1, m float64
		for j := range n {
			x := float64(a[j] - b[j])
			s2, s1, m = s2+x*x, s1+x, math.Max(m, math.Abs(x))
		}
		if math.Abs(float64(sq)-s2) > 1e-5*s2 || math.Abs(float64(sum)-s1) > 1e-5*float64(n) || float64(big) != m {
			t.Errorf("DiffStats n=%d = %v %v %v, float64 %v %v %v", n, sq, sum, big, s2, s1, m)
		}
		inv := 63 / big
		delta := big / 63
		k, kref := make([]int32, n), make([]int32, n)
		e, se := Quantize(dst, inv, delta, k)
		var qwant [2]float32
		quantizeGo(dst, inv, delta, kref, &qwant)
		sameBits(t, fmt.Sprintf("Quantize n=%d", n), []float32{e, se}, qwant[:])
		var e1, e2 float64
		for j := range n {
			x := float64(dst[j]) - float64(delta)*float64(k[j])
			e1, e2 = e1+x, e2+x*x
		}
		if math.Abs(float64(e)-e1) > 1e-4*float64(delta)*float64(n) || math.Abs(float64(se)-e2) > 1e-4*e2+1e-12 {
			t.Errorf("Quantize n=%d: errors sum %v, squares %v; float64 %v, %v", n, e, se, e1, e2)
		}
		for j := range n {
			if k[j] != kref[j] || k[j] < -63 || k[j] > 63 || math.Abs(float64(dst[j]-delta*float32(k[j]))) > float64(delta)*0.5001 {
				t.Fatalf("Quantize n=%d: k[%d] = %d (reference %d) for %v, step %v", n, j, k[j], kref[j], dst[j], delta)
			}
		}
	}
}

// TestL2LanesHalf holds L2LanesHalf and L2LanesHalf4, in use and as the
// Go references, to L2Lanes over the decoded rows bit for bit: random
// finite float16 bit patterns (subnormals, zeros of both signs and
// values up to 65,504 among them), then random values rounded to
// float16.
func TestL2LanesHalf(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	finite := func() uint16 {
		for {
			if h := uint16(r.Uint32()); f16.IsFinite(h) {
				return h
			}
		}
	}
	decode := func(h []uint16) []float32 {
		x := make([]float32, len(h))
		f16.DecodeRow(x, h)
		return x
	}
	for _, chunks := range chunkCounts {
		n := 8 * chunks
		for round := range 2 {
			rows := make([][]uint16, 5)
			for k := range rows {
				rows[k] = make([]uint16, n+8*k) // longer rows: only their first n count
				for j := range rows[k] {
					if round == 0 {
						rows[k][j] = finite()
					} else {
						rows[k][j] = f16.FromFloat32(float32(r.NormFloat64()))
					}
				}
			}
			a := rows[0][:n]
			var want, got, goGot [4]float32
			for k := range 4 {
				want[k] = l2LanesGo(decode(a), decode(rows[k+1][:n]))
				got[k] = L2LanesHalf(a, rows[k+1])
				goGot[k] = l2LanesHalfGo(a, rows[k+1][:n])
			}
			four := L2LanesHalf4(a, rows[1], rows[2], rows[3], rows[4])
			var go4 [4]float32
			l2LanesHalf4Go(a, rows[1][:n], rows[2][:n], rows[3][:n], rows[4][:n], &go4)
			name := fmt.Sprintf("L2LanesHalf n=%d round %d", n, round)
			sameBits(t, name, got[:], want[:])
			sameBits(t, name+", Go", goGot[:], want[:])
			sameBits(t, name+", four", four[:], want[:])
			sameBits(t, name+", four, Go", go4[:], want[:])
		}
	}
	// Every AVX2 processor has F16C: the float16 kernels are in use
	// wherever the others are.
	if Kernels() == "avx2" && !HalfKernels() {
		t.Error("AVX2 kernels in use, the float16 ones not: CPUID's F16C bit not seen")
	}
	if L2LanesHalf(nil, nil) != 0 || L2LanesHalf4(nil, nil, nil, nil, nil) != [4]float32{} {
		t.Error("L2LanesHalf of no values is not 0")
	}
	for name, f := range map[string]func(){
		"L2LanesHalf of 12": func() { L2LanesHalf(make([]uint16, 12), make([]uint16, 12)) },
		"L2LanesHalf4 short row": func() {
			L2LanesHalf4(make([]uint16, 16), make([]uint16, 16), make([]uint16, 8), make([]uint16, 16), make([]uint16, 16))
		},
		"L2Lanes4 of 12": func() { L2Lanes4(make([]float32, 12), nil, nil, nil, nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			f()
		}()
	}
}

// TestTables holds Tables, in use and as the Go reference, to the tables it
// documents: subset sums less the least, from scratch, with |k| = 63 in
// the mix so that entries reach 252.
func TestTables(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	for _, chunks := range chunkCounts {
		n := 8 * chunks
		k := make([]int32, n)
		for j := range k {
			k[j] = int32(r.IntN(127)) - 63
			if j%5 == 0 {
				k[j] = 63 * (1 - 2*int32(j%2))
			}
		}
		got, ref := make([]byte, 4*n), make([]byte, 4*n)
		off, refOff := Tables(k, got), tablesGo(k, ref)
		var wantOff int32
		for j := 0; j < n; j += 4 {
			least := int32(0)
			for i := range 4 {
				least += min(k[j+i], 0)
			}
			wantOff += least
			for v := range 16 {
				var sum int32
				for i := range 4 {
					if v>>i&1 == 1 {
						sum += k[j+i]
					}
				}
				if want := sum - least; int32(got[4*j+v]) != want || int32(ref[4*j+v]) != want {
					t.Fatalf("n=%d: table %d entry %d = %d (reference %d), want %d", n, j/4, v, got[4*j+v], ref[4*j+v], want)
				}
			}
		}
		if off != wantOff || refOff != wantOff {
			t.Fatalf("n=%d: offset %d (reference %d), want %d", n, off, refOff, wantOff)
		}
	}
}

// TestBlockEstimate holds BlockEstimate to its Go reference bit for bit,
// and both to the formulas it documents in float64, over scalars that
// include zeros, negative and subnormal float16 values.
func TestBlockEstimate(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for trial := range 200 {
		var sums [32]uint32
		scal := randBytes(r, 6*ScanBlock)
		for v := range sums {
			sums[v] = uint32(r.IntN(1 << 17))
			h := uint16(r.IntN(0x7c00)) // finite magnitudes, subnormals included
			if trial%3 == 0 && v%4 == 0 {
				h = uint16(r.IntN(1 << 10))
			}
			if v%7 == 0 {
				h |= 0x8000
			}
			binary.LittleEndian.PutUint16(scal[2*v:], h)
			binary.LittleEndian.PutUint16(scal[64+2*v:], uint16(r.IntN(0x7c00)))
		}
		var c [8]float32
		for i := range c {
			c[i] = float32(r.NormFloat64())
		}
		c[7] = abs(c[6])
		var est, bound, refEst, refBound [32]float32
		BlockEstimate(&sums, scal, &c, &est, &bound)
		blockEstimateGo(&sums, scal, &c, &refEst, &refBound)
		sameBits(t, fmt.Sprintf("trial %d estimates", trial), est[:], refEst[:])
		sameBits(t, fmt.Sprintf("trial %d bounds", trial), bound[:], refBound[:])
		for v := range 32 {
			n := float64(f16.ToFloat32(binary.LittleEndian.Uint16(scal[2*v:])))
			b := float64(f16.ToFloat32(binary.LittleEndian.Uint16(scal[64+2*v:])))
			kappa, eps := float64(scal[128+v]), float64(scal[160+v])
			eu := kappa * (float64(c[0])*float64(sums[v]) + float64(c[1]))
			e := float64(c[5])*n + float64(c[4]) + float64(c[6])*b*eu
			x, y := float64(c[2])*kappa, float64(c[3])*eps
			bd := float64(c[7]) * b * math.Sqrt(x*x+y*y)
			scale := math.Abs(float64(c[5])*n) + math.Abs(float64(c[4])) + math.Abs(float64(c[6])*b*eu) + 1e-30
			if math.Abs(float64(est[v])-e) > 1e-5*scale || math.Abs(float64(bound[v])-bd) > 1e-5*math.Abs(bd)+1e-30 {
				t.Fatalf("trial %d entry %d: estimate %v bound %v, float64 %v %v", trial, v, est[v], bound[v], e, bd)
			}
		}
	}
}

// TestPrefetch calls Prefetch over lengths and alignments that straddle
// cache lines: it must neither fault nor change the bytes.
func TestPrefetch(t *testing.T) {
	b := make([]byte, 1024)
	for i := range b {
		b[i] = byte(i)
	}
	for lo := range 70 {
		for _, n := range []int{0, 1, 63, 64, 65, 288, 1024 - 70} {
			Prefetch(b[lo : lo+n])
		}
	}
	for i := range b {
		if b[i] != byte(i) {
			t.Fatalf("byte %d changed to %d", i, b[i])
		}
	}
}

// BenchmarkListKernels times the per-list and per-block kernels of the
// blocked rotated code against their Go references.
func BenchmarkListKernels(b *testing.B) {
	r := rand.New(rand.NewPCG(23, 24))
	k := make([]int32, 768)
	for j := range k {
		k[j] = int32(r.IntN(127)) - 63
	}
	lut := make([]byte, 4*len(k))
	b.Run("Tables/d=768", func(b *testing.B) {
		for b.Loop() {
			Tables(k, lut)
		}
	})
	b.Run("Tables/go/d=768", func(b *testing.B) {
		for b.Loop() {
			tablesGo(k, lut)
		}
	})
	var sums [32]uint32
	scal := randBytes(r, 6*ScanBlock)
	for v := range 64 {
		binary.LittleEndian.PutUint16(scal[2*v:], 0x3c00) // 1.0
	}
	c := [8]float32{1, 2, 3, 4, 5, 6, 7, 7}
	var est, bound [32]float32
	b.Run("BlockEstimate", func(b *testing.B) {
		for b.Loop() {
			BlockEstimate(&sums, scal, &c, &est, &bound)
		}
	})
	b.Run("BlockEstimate/go", func(b *testing.B) {
		for b.Loop() {
			blockEstimateGo(&sums, scal, &c, &est, &bound)
		}
	})
}

// TestNEONGenerated fails when neon_arm64.s or neon_arm64.go is not what
// neon/gen.sh makes of neon/neon_arm64.c. It needs the tools that made
// them, at the versions their headers name (another clang emits other
// instructions), and skips, saying which is missing, elsewhere.
func TestNEONGenerated(t *testing.T) {
	committed, err := os.ReadFile("neon_arm64.s")
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"goat", "clang", "aarch64-linux-gnu-objdump"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: cannot regenerate the NEON kernels (neon/gen.sh says how to install it)", tool)
		}
	}
	out, err := exec.Command("clang", "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := headerVersion(committed, "clang"); !strings.Contains(string(out), " version "+want) {
		t.Skipf("clang is not version %s, which made neon_arm64.s: its output would differ", want)
	}
	if out, err = exec.Command("aarch64-linux-gnu-objdump", "--version").Output(); err != nil {
		t.Fatal(err)
	}
	if want := headerVersion(committed, "objdump"); !strings.Contains(strings.SplitN(string(out), "\n", 2)[0], " "+want) {
		t.Skipf("aarch64 objdump is not version %s, which made neon_arm64.s", want)
	}
	dir := filepath.Join(t.TempDir(), "vec") // the package name GoAT writes
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("sh", "neon/gen.sh", dir).CombinedOutput(); err != nil {
		t.Fatalf("neon/gen.sh: %v\n%s", err, b)
	}
	for _, name := range []string{"neon_arm64.s", "neon_arm64.go"} {
		want, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run internal/vec/neon/gen.sh and commit the result", name)
		}
	}
}

// headerVersion returns the version GoAT's header gives for tool.
func headerVersion(src []byte, tool string) string {
	for _, line := range strings.Split(string(src), "\n") {
		if f := strings.Fields(strings.TrimPrefix(line, "//")); len(f) == 2 && f[0] == tool {
			return f[1]
		}
	}
	return "(none)"
}

// BenchmarkL2Lanes: the graph build's exact distance, against DiffStats
// (which also stores the differences and sums them and their largest).
func BenchmarkL2Lanes(b *testing.B) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, n := range []int{96, 768} {
		x, y, dst := randFloats(r, n), randFloats(r, n), make([]float32, n)
		b.Run(fmt.Sprintf("DiffStats/%d", n), func(b *testing.B) {
			for b.Loop() {
				DiffStats(dst, x, y)
			}
		})
		b.Run(fmt.Sprintf("L2Lanes/%d", n), func(b *testing.B) {
			for b.Loop() {
				L2Lanes(x, y)
			}
		})
		b.Run(fmt.Sprintf("L2Lanes4/%d", n), func(b *testing.B) { // four rows an op
			for b.Loop() {
				L2Lanes4(x, y, dst, y, dst)
			}
		})
		hx, hy := make([]uint16, n), make([]uint16, n)
		for j := range n {
			hx[j], hy[j] = f16.FromFloat32(x[j]), f16.FromFloat32(y[j])
		}
		b.Run(fmt.Sprintf("L2LanesHalf/%d", n), func(b *testing.B) {
			for b.Loop() {
				L2LanesHalf(hx, hy)
			}
		})
		b.Run(fmt.Sprintf("L2LanesHalf4/%d", n), func(b *testing.B) { // four rows an op
			for b.Loop() {
				L2LanesHalf4(hx, hy, hx, hy, hx)
			}
		})
	}
}
