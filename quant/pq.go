package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/kmeans"
	"github.com/vlc-embed/vlc/internal/par"
)

// PQ is rotated product quantization: the residual r is rotated (r' = P r,
// the seeded Rotation of the rotated code), cut into nsub subspaces of
// consecutive dimensions (subspace s holds dimensions s*d/nsub up to
// (s+1)*d/nsub, so widths differ by at most one), and each subspace is
// coded by one byte, the index of a centroid in that subspace's codebook
// of 256. Any nsub from 1 to d is a valid code, which lets -ratio spend a
// byte budget exactly. The codebooks are shared by all lists and learned by
// k-means from a sample of residuals (Trainer).
//
// The code's reconstruction x̂ of r' gets the unbiased correction of the
// rotated code (RaBitQ's estimator, which is exact when q' is parallel to
// r'):
//
//	<q', r'> ~ B <q', x̂>,  B = |r|^2 / <x̂, r'>
//	|q - x|^2 ~ |q'|^2 + |r|^2 - 2 B <q', x̂>
//
// for q' = P(q - a). Since only the direction of x̂ matters to this
// estimate, the codebooks are learned from residuals scaled to a common
// norm, and a residual is coded by trying a few scales of it, keeping the
// code closest to it in angle, and then improving that angle one subspace
// at a time (iterated conditional modes).
//
// Scoring builds one table per query, of <P q - P mu, centroid> for every
// centroid of every subspace (mu is the mean of the anchors), rather than
// one per list: the anchor's part of the estimate is folded into a stored
// scalar,
//
//	|q'|^2 + |r|^2 - 2B<q', x̂> = |q'|^2 + C - 2B<Pq - P mu, x̂>,
//	C = |r|^2 + 2B<P(a - mu), x̂>,
//
// and |q'|^2 takes d subtractions per list.
//
// B and C are stored as one byte each, on a linear grid spanning the
// list's smallest to largest value (the list's parameters); C is computed
// from B as stored, so the estimate is the formula's for that B. Measured
// on deep10k and sift5k-ngt at 1 to 4 bits, the bytes lose at most 0.0006
// of recall@10 against float16 B and C, and save two bytes per vector.
//
// Layout of one code: one byte per subspace, then C's byte and B's byte.
// Per list (PARM): float32 B0, Bstep, C0, Cstep (B = B0 + byte*Bstep).
// Shared parameters (QGLB): float32 rho, the norm the training residuals
// were scaled to; one float32 step per subspace; then the centroids as int8
// multiples of their subspace's step, subspace s (dimensions lo..hi) at
// byte 256*lo, 256 rows of hi-lo. int8 centroids cost half of float16 and
// measure the same recall: their rounding error is a hundredth of the
// code's.
type PQ struct {
	dim, bits  int  // bits: as asked for, or 0 when nsub was
	nsub       int  // subspaces: bytes of code
	ip         bool // Spec.IP: C holds -2<a, r> in place of |r|^2
	seed       uint64
	rot        *Rotation
	rho        float32   // training norm, set by SetGlobal
	cb         []float32 // centroids, laid out as in QGLB
	cbNorm     []float32 // |centroid|^2, 256 per subspace
	rotAnchors []float32 // P a, set by SetAnchors
	rotMean    []float32 // P mu
	scratch    sync.Pool // *pqScratch, for concurrent Encode calls
}

const (
	pqCentroids = 256 // centroids per subspace: one byte of code
	pqIters     = 60  // Lloyd iterations at most
	pqScales    = 16  // scales tried when encoding
	pqScaleLo   = 0.6 // smallest and largest scale, relative to rho/|r|
	pqScaleHi   = 1.6
	pqPasses    = 4 // rounds of per-subspace improvement of the angle, at most
	pqParams    = 16
)

// NewPQ returns the rotated product code for dimension dim with nsub
// subspaces (1..dim), its rotation and training drawn from seed; bits is
// recorded as the setting nsub came from (PQSubspaces), or 0.
func NewPQ(dim, nsub, bits int, seed uint64) *PQ {
	return &PQ{dim: dim, bits: bits, nsub: nsub, seed: seed, rot: NewRotation(dim, seed)}
}

func (*PQ) Kind() Kind { return KindPQ }
func (c *PQ) Spec() Spec {
	return Spec{Kind: KindPQ, Dim: c.dim, Bits: c.bits, Subspaces: c.nsub, Seed: c.seed, IP: c.ip}
}
func (c *PQ) Dim() int               { return c.dim }
func (c *PQ) CodeBytes() int         { return c.nsub + 2 }
func (c *PQ) ParamBytes() int        { return pqParams }
func (c *PQ) GlobalBytes() int       { return 4 + 4*c.nsub + pqCentroids*c.dim }
func (c *PQ) sub(s int) (lo, hi int) { return s * c.dim / c.nsub, (s + 1) * c.dim / c.nsub }

// Train learns the codebooks from count residuals: it rotates them, scales
// each to their mean norm rho, and runs seeded k-means in every subspace,
// the subspaces in parallel. Each subspace's k-means is seeded by its own
// number, and its sums run in a fixed order, so the result does not depend
// on the core count.
//
// The k-means is kmeans.Train on the host (k-means++, the D^2 draw that
// anneal seeds with, then Lloyd with Hamerly's bounds, an empty cluster
// taking half of the largest), not anneal's loop on the CPU backend: the
// bounds skip most of the rows once the centroids settle, where anneal's
// Steps (written for GPUs) assign every point every time. Through
// anneal.Train on the CPU backend the codebooks took 6.6x longer at 52
// subspaces of 10,000 residuals (d = 96) and 3.1x longer at 196 subspaces
// of 20,000 (d = 784), for the same recall on deep10k (0.9517 against
// 0.9522 at -ratio 0.32).
func (c *PQ) Train(residuals []float32, count int) []byte {
	d := c.dim
	x := make([]float32, count*d)
	copy(x, residuals[:count*d])
	norms := make([]float64, count)
	par.For(count, 256, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			c.rot.Apply(x[i*d : (i+1)*d])
			norms[i] = math.Sqrt(dot64(x[i*d:(i+1)*d], x[i*d:(i+1)*d]))
		}
	})
	var rho float64
	for _, n := range norms {
		rho += n
	}
	rho /= float64(max(count, 1))
	if !(rho > 0) || rho > math.MaxFloat32 {
		rho = 1
	}
	par.For(count, 256, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if n := norms[i]; n > 0 {
				f := rho / n
				for j := i * d; j < (i+1)*d; j++ {
					x[j] = float32(float64(x[j]) * f)
				}
			}
		}
	})

	out := make([]byte, c.GlobalBytes())
	putF32(out, 0, float32(rho))
	par.For(c.nsub, 1, func(lo, hi int) {
		for s := lo; s < hi; s++ {
			a, b := c.sub(s)
			w := b - a
			sx := make([]float32, count*w)
			for i := range count {
				copy(sx[i*w:(i+1)*w], x[i*d+a:i*d+b])
			}
			cent := make([]float32, pqCentroids*w)
			rng := rand.New(rand.NewPCG(c.seed, 0x7071_0000+uint64(s))) // "pq"
			kmeans.Train(cent, sx, count, w, pqIters, rng)
			var m float64
			for _, v := range cent {
				m = math.Max(m, math.Abs(float64(v)))
			}
			step := float32(m / 127)
			putF32(out[4:], s, step)
			q := out[4+4*c.nsub+pqCentroids*a : 4+4*c.nsub+pqCentroids*b]
			for i, v := range cent {
				if step > 0 {
					q[i] = byte(int8(math.Round(float64(v / step))))
				}
			}
		}
	})
	return out
}

// SetGlobal installs codebooks from Train or a file, checking their length
// and that rho and the steps are finite, rho positive.
func (c *PQ) SetGlobal(params []byte) error {
	if len(params) != c.GlobalBytes() {
		return fmt.Errorf("quant: product codebooks of %d bytes, want %d", len(params), c.GlobalBytes())
	}
	rho := getF32(params, 0)
	if !(rho > 0) || math.IsInf(float64(rho), 0) {
		return fmt.Errorf("quant: product codebooks: training norm %v", rho)
	}
	cb := make([]float32, pqCentroids*c.dim)
	norms := make([]float32, pqCentroids*c.nsub)
	cents := params[4+4*c.nsub:]
	for s := range c.nsub {
		step := getF32(params[4:], s)
		if !(step >= 0) || math.IsInf(float64(step), 0) {
			return fmt.Errorf("quant: product codebook %d: step %v", s, step)
		}
		a, b := c.sub(s)
		w := b - a
		for i := pqCentroids * a; i < pqCentroids*b; i++ {
			cb[i] = float32(int8(cents[i])) * step
		}
		for k := range pqCentroids {
			var n float32
			for _, v := range cb[pqCentroids*a+k*w : pqCentroids*a+(k+1)*w] {
				n += v * v
			}
			norms[s*pqCentroids+k] = n
		}
	}
	c.rho, c.cb, c.cbNorm = rho, cb, norms
	return nil
}

type pqScratch struct {
	r    []float32 // P r
	dots []float32 // <r'_s, centroid k> at s*256+k
	try  []byte
}

// pqRaw is what coding one residual yields before B and C are put on the
// list's grids: C's first term (|r|^2, or -2<a, r> for Spec.IP),
// <P(a - mu), x̂> and B, at full precision.
type pqRaw struct{ rr, ax, beta float64 }

// EncodeList codes every residual of list a (encode), then sets the list's
// grids for B and C from their smallest and largest values and writes
// each vector's two bytes.
func (c *PQ) EncodeList(codes, params []byte, a int, residuals []float32, count int) {
	cb, d := c.CodeBytes(), c.dim
	raw := make([]pqRaw, count)
	bLo, bHi := math.Inf(1), math.Inf(-1)
	for i := range count {
		raw[i] = c.encode(codes[i*cb:i*cb+c.nsub], a, residuals[i*d:(i+1)*d])
		bLo, bHi = min(bLo, raw[i].beta), max(bHi, raw[i].beta)
	}
	if count == 0 {
		bLo, bHi = 0, 0
	}
	b0, bStep := grid(bLo, bHi)
	cLo, cHi := math.Inf(1), math.Inf(-1)
	for i, r := range raw {
		k := onGrid(r.beta, b0, bStep)
		codes[i*cb+c.nsub+1] = k
		bq := float64(b0) + float64(k)*float64(bStep)
		cc := r.rr + 2*bq*r.ax
		raw[i].rr = cc // C, from B as stored
		cLo, cHi = min(cLo, cc), max(cHi, cc)
	}
	if count == 0 {
		cLo, cHi = 0, 0
	}
	c0, cStep := grid(cLo, cHi)
	for i, r := range raw {
		codes[i*cb+c.nsub] = onGrid(r.rr, c0, cStep)
	}
	putF32(params, 0, b0)
	putF32(params, 1, bStep)
	putF32(params, 2, c0)
	putF32(params, 3, cStep)
}

// grid returns the origin and step of 256 levels from lo to hi, in
// float32 and clamped to its range.
func grid(lo, hi float64) (origin, step float32) {
	lo = min(max(lo, -math.MaxFloat32/2), math.MaxFloat32/2)
	hi = min(max(hi, lo), math.MaxFloat32/2)
	return float32(lo), float32((hi - lo) / 255)
}

// onGrid returns the level of the grid nearest v.
func onGrid(v float64, origin, step float32) byte {
	if !(step > 0) {
		return 0
	}
	k := math.Round((v - float64(origin)) / float64(step))
	return byte(min(max(k, 0), 255))
}

// encode writes the nsub centroid bytes of P r: the code closest to it in
// angle among the codes of its scalings t P r, t*|r|/rho in [0.6, 1.6]
// (pqScales steps), each subspace taking its nearest centroid; then up to
// pqPasses rounds in which each subspace in turn takes the centroid that
// most improves the angle given the others.
func (c *PQ) encode(code []byte, a int, residual []float32) pqRaw {
	d := c.dim
	sc, _ := c.scratch.Get().(*pqScratch)
	if sc == nil {
		sc = &pqScratch{r: make([]float32, d), dots: make([]float32, pqCentroids*c.nsub), try: make([]byte, c.nsub)}
	}
	defer c.scratch.Put(sc)
	r := sc.r
	copy(r, residual[:d])
	c.rot.Apply(r)
	rr := dot64(r, r)

	// <r'_s, centroid>, once; the distance from t r'_s to centroid k is then
	// t^2|r'_s|^2 - 2t dots[k] + |centroid k|^2.
	for s := range c.nsub {
		lo, hi := c.sub(s)
		w := hi - lo
		x := r[lo:hi]
		cb := c.cb[pqCentroids*lo : pqCentroids*hi]
		dots := sc.dots[s*pqCentroids : (s+1)*pqCentroids]
		for k := range dots {
			var p float32
			for j, v := range cb[k*w : (k+1)*w] {
				p += v * x[j]
			}
			dots[k] = p
		}
	}
	bestCos := math.Inf(-1)
	var xr, xx float64 // <x̂, r'> and |x̂|^2 of the best code
	for g := range pqScales {
		t := float32(0)
		if rr > 0 {
			f := pqScaleLo * math.Pow(pqScaleHi/pqScaleLo, float64(g)/(pqScales-1))
			t = float32(f * float64(c.rho) / math.Sqrt(rr))
		}
		var gxr, gxx float64
		for s := range c.nsub {
			dots := sc.dots[s*pqCentroids : (s+1)*pqCentroids]
			norms := c.cbNorm[s*pqCentroids : (s+1)*pqCentroids]
			best, bestD := 0, float32(math.Inf(1))
			for k, n := range norms {
				if dd := n - 2*t*dots[k]; dd < bestD {
					best, bestD = k, dd
				}
			}
			sc.try[s] = byte(best)
			gxr += float64(dots[best])
			gxx += float64(norms[best])
		}
		cos := math.Inf(-1)
		if gxx > 0 {
			cos = gxr / math.Sqrt(gxx)
		}
		if cos > bestCos || g == 0 {
			bestCos, xr, xx = cos, gxr, gxx
			copy(code[:c.nsub], sc.try)
		}
		if rr == 0 {
			break // every scale gives the same code
		}
	}
	for pass := 0; pass < pqPasses && xr > 0; pass++ {
		moved := false
		for s := range c.nsub {
			dots := sc.dots[s*pqCentroids : (s+1)*pqCentroids]
			norms := c.cbNorm[s*pqCentroids : (s+1)*pqCentroids]
			k0 := int(code[s])
			restR, restN := xr-float64(dots[k0]), xx-float64(norms[k0])
			best, bestCos := k0, xr/math.Sqrt(xx)
			for k, n := range norms {
				nr, nn := restR+float64(dots[k]), restN+float64(n)
				if nn > 0 && nr > bestCos*math.Sqrt(nn) {
					best, bestCos = k, nr/math.Sqrt(nn)
				}
			}
			if best != k0 {
				code[s] = byte(best)
				xr, xx = restR+float64(dots[best]), restN+float64(norms[best])
				moved = true
			}
		}
		if !moved {
			break
		}
	}

	var ax float64 // <P(a - mu), x̂>
	pa := c.rotAnchors[a*d : (a+1)*d]
	for s := range c.nsub {
		lo, hi := c.sub(s)
		w := hi - lo
		k := int(code[s])
		for j, v := range c.cb[pqCentroids*lo+k*w : pqCentroids*lo+(k+1)*w] {
			ax += float64(v) * (float64(pa[lo+j]) - float64(c.rotMean[lo+j]))
		}
	}
	var beta float64
	if xr > 0 {
		beta = min(rr/xr, math.MaxFloat32/4)
	}
	if c.ip {
		rr = -2 * dot64(pa, r) // <P a, P r> = <a, r>
	}
	return pqRaw{rr: rr, ax: ax, beta: beta}
}

// scalars reads a code's B and C off its list's grids.
func (c *PQ) scalars(params, code []byte) (beta, cc float32) {
	beta = getF32(params, 0) + float32(code[c.nsub+1])*getF32(params, 1)
	cc = getF32(params, 2) + float32(code[c.nsub])*getF32(params, 3)
	return beta, cc
}

// Decode returns B x̂ rotated back, whose inner product with q is the
// code's estimate of <q, r>.
func (c *PQ) Decode(dst []float32, params []byte, code []byte) {
	beta, _ := c.scalars(params, code)
	for s := range c.nsub {
		lo, hi := c.sub(s)
		w := hi - lo
		k := int(code[s])
		for j, v := range c.cb[pqCentroids*lo+k*w : pqCentroids*lo+(k+1)*w] {
			dst[lo+j] = beta * v
		}
	}
	c.rot.Invert(dst[:c.dim])
}

// SetAnchors rotates the anchors and their mean once.
func (c *PQ) SetAnchors(anchors []float32) {
	d := c.dim
	m := len(anchors) / d
	c.rotAnchors = make([]float32, m*d)
	copy(c.rotAnchors, anchors[:m*d])
	mean := make([]float64, d)
	for a := range m {
		for j, v := range anchors[a*d : (a+1)*d] {
			mean[j] += float64(v)
		}
	}
	c.rotMean = make([]float32, d)
	for j := range mean {
		c.rotMean[j] = float32(mean[j] / float64(max(m, 1)))
	}
	c.rot.Apply(c.rotMean)
	for a := range m {
		c.rot.Apply(c.rotAnchors[a*d : (a+1)*d])
	}
}

// Layout returns what a device needs to search the code
// (device.CodeData): the rotation, with the rotated anchors, as the
// rotated code's Layout gives it (Bits and Packed aside), the centroids as
// SetGlobal decoded them and P mu. The slices are the code's own.
func (c *PQ) Layout() (rot device.RotatedLayout, codebooks, rotMean []float32) {
	rot = device.RotatedLayout{Dim: c.dim, IP: c.ip, P: c.rot.p, Scale: float32(1 / math.Sqrt(float64(c.rot.p))), RotAnchors: c.rotAnchors}
	for k := range c.rot.signs {
		rot.Signs = append(rot.Signs, c.rot.signs[k])
	}
	return rot, c.cb, c.rotMean
}

func (c *PQ) NewScorer() Scorer {
	return &pqScorer{
		c: c, pq: make([]float32, c.dim), x: make([]float32, c.dim),
		l2: make([][pqCentroids]float32, c.nsub), dotT: make([][pqCentroids]float32, c.nsub),
	}
}

// pqScorer sums a table entry per subspace. Tables are built per query:
// l2 from P q - P mu at SetQuery, dotT from P q at the first ForDot.
type pqScorer struct {
	c        *PQ
	pq, x    []float32 // P q; scratch
	l2, dotT [][pqCentroids]float32
	lut      [][pqCentroids]float32 // the table For* chose
	dotReady bool
	qq       float32
	dot      bool

	b0, bStep, c0, cStep float32 // the list's grids for B and C
}

func (sc *pqScorer) SetQuery(q []float32) {
	c := sc.c
	copy(sc.pq, q[:c.dim])
	c.rot.Apply(sc.pq)
	for j, v := range sc.pq {
		sc.x[j] = v - c.rotMean[j]
	}
	sc.table(sc.l2, sc.x)
	sc.dotReady = false
}

// table sets t[s][k] = <x_s, centroid k of subspace s>.
func (sc *pqScorer) table(t [][pqCentroids]float32, x []float32) {
	c := sc.c
	for s := range c.nsub {
		lo, hi := c.sub(s)
		w := hi - lo
		xs := x[lo:hi]
		cb := c.cb[pqCentroids*lo : pqCentroids*hi]
		row := &t[s]
		for k := range row {
			var p float32
			for j, v := range cb[k*w : (k+1)*w] {
				p += v * xs[j]
			}
			row[k] = p
		}
	}
}

func (sc *pqScorer) ForL2(a int, params []byte) {
	d := sc.c.dim
	var qq float32
	for j, v := range sc.c.rotAnchors[a*d : (a+1)*d] {
		x := sc.pq[j] - v
		qq += x * x
	}
	sc.qq, sc.dot, sc.lut = qq, false, sc.l2
	sc.grids(params)
}

func (sc *pqScorer) ForDot(_ int, params []byte) {
	if !sc.dotReady {
		sc.table(sc.dotT, sc.pq)
		sc.dotReady = true
	}
	sc.dot, sc.lut = true, sc.dotT
	sc.grids(params)
}

func (sc *pqScorer) grids(params []byte) {
	sc.b0, sc.bStep = getF32(params, 0), getF32(params, 1)
	sc.c0, sc.cStep = getF32(params, 2), getF32(params, 3)
}

func (sc *pqScorer) Score(code []byte) float32 {
	n := sc.c.nsub
	lut := sc.lut[:n]
	idx := code[:n]
	var t0, t1, t2, t3 float32
	s := 0
	for ; s+4 <= n; s += 4 {
		t0 += lut[s][idx[s]]
		t1 += lut[s+1][idx[s+1]]
		t2 += lut[s+2][idx[s+2]]
		t3 += lut[s+3][idx[s+3]]
	}
	for ; s < n; s++ {
		t0 += lut[s][idx[s]]
	}
	ip := (t0 + t1) + (t2 + t3)
	beta := sc.b0 + float32(code[n+1])*sc.bStep
	if sc.dot {
		return beta * ip
	}
	cc := sc.c0 + float32(code[n])*sc.cStep
	return sc.qq + cc - 2*beta*ip
}
