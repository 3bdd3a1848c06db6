// Package cpu is the reference backend: plain Go on all cores, deterministic,
// the oracle every GPU backend is tested against.
//
// Semantics, per element: points are float16 decoded exactly to float32;
// a point's distance to anchor a is |a|^2 - 2 x.a + |x|^2 in float32, x.a
// summed in one float32 accumulator in order of j (vec.Panels, SIMD where
// the CPU has it, with the same bits), |a|^2 and |x|^2 as vec.Dot, clamped
// at 0; ties go to the lowest anchor index. Reductions run per anchor over
// its points in ascending point order with float64 sums, so results do not
// depend on the core count, nor on how device.Multi splits the points over
// simulated devices (shard.go carries the sums from share to share).
package cpu

import (
	"fmt"
	"math"
	"runtime"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/internal/vec"
)

// Device is the CPU backend.
type Device struct{}

var _ device.Device = (*Device)(nil)

// New returns the CPU backend.
func New() *Device { return &Device{} }

// Name reports the backend and its core count.
func (*Device) Name() string { return fmt.Sprintf("cpu (%d cores)", runtime.GOMAXPROCS(0)) }

// Close releases nothing: the CPU backend holds no resources.
func (*Device) Close() error { return nil }

// Load keeps a reference to the points; nothing is copied.
func (*Device) Load(p device.Points) (device.Dataset, error) {
	if p.Dim < 1 || p.N < 1 || len(p.Data) != p.N*p.Dim {
		return nil, fmt.Errorf("cpu: %d values do not make %d points of dimension %d", len(p.Data), p.N, p.Dim)
	}
	return newDataset(p.Data, p.N, p.Dim), nil
}

func newDataset(pts []uint16, n, d int) *dataset {
	ds := &dataset{pts: pts, n: n, d: d, assign: make([]int32, n), dist: make([]float32, n)}
	for i := range ds.assign {
		ds.assign[i] = -1
	}
	return ds
}

type dataset struct {
	pts    []uint16
	n, d   int
	m      int
	anc    []float32  // m*d
	norms  []float32  // |a|^2 per anchor
	panels vec.Panels // the anchors laid out for the assign's kernel
	assign []int32
	dist   []float32 // squared distance of each point to its anchor

	counts   []int64
	variance []float32

	share *share // set when the dataset is a share of a split set (shard.go)
}

func (s *dataset) SetAnchors(a []float32, m int) error {
	if m < 1 || len(a) < m*s.d {
		return fmt.Errorf("cpu: %d values do not make %d anchors of dimension %d", len(a), m, s.d)
	}
	if m != s.m {
		s.m = m
		s.anc = make([]float32, m*s.d)
		s.norms = make([]float32, m)
		s.counts = make([]int64, m)
		s.variance = make([]float32, m*s.d)
	}
	copy(s.anc, a[:m*s.d])
	vec.Norms(s.norms, s.anc, s.d)
	s.panels.Set(s.anc, m, s.d)
	return nil
}

func (s *dataset) Step(p device.StepParams) (device.StepStats, error) {
	if s.m == 0 {
		return device.StepStats{}, fmt.Errorf("cpu: Step before SetAnchors")
	}
	st := s.assignAll()
	s.reduce(&p)
	return st, nil
}

func (s *dataset) Assign() (device.StepStats, error) {
	if s.m == 0 {
		return device.StepStats{}, fmt.Errorf("cpu: Assign before SetAnchors")
	}
	st := s.assignAll()
	s.reduce(nil)
	return st, nil
}

func (s *dataset) Anchors(dst []float32) error {
	copy(dst, s.anc)
	return nil
}

func (s *dataset) Stats(counts []int64, variance []float32) error {
	copy(counts, s.counts)
	copy(variance, s.variance)
	return nil
}

func (s *dataset) Assignments(dst []int32) error {
	copy(dst, s.assign)
	return nil
}

func (*dataset) Transfer() (int64, int64) { return 0, 0 }
func (*dataset) Close() error             { return nil }

// assignBlock is the number of points one goroutine assigns at a time.
const assignBlock = 256

// assignAll sets every point's nearest anchor and its squared distance,
// and returns the energy and the number of points whose anchor changed.
func (s *dataset) assignAll() device.StepStats {
	changed := s.assignRows()
	return device.StepStats{Energy: addDist(0, s.dist) / float64(s.n), Changed: changed}
}

// assignRows sets every point's nearest anchor and its squared distance,
// and returns the number of points whose anchor changed.
func (s *dataset) assignRows() int {
	d, m := s.d, s.m
	stride := s.panels.Stride()
	changed := make([]int, (s.n+assignBlock-1)/assignBlock)
	par.For(s.n, assignBlock, func(lo, hi int) {
		// Four points at a time (the last copied at an uneven end)
		// against every anchor, through the panels' blocked kernel.
		x := make([]float32, 4*d)
		dots := make([]float32, 4*stride)
		c := 0
		for i := lo; i < hi; i += 4 {
			for k := range 4 {
				f16.DecodeRow(x[k*d:(k+1)*d], s.pts[min(i+k, hi-1)*d:(min(i+k, hi-1)+1)*d])
			}
			s.panels.Dots4(x, dots)
			for k := range min(4, hi-i) {
				p := i + k
				best, dist := nearest(dots[k*stride:k*stride+m], s.norms)
				xk := x[k*d : (k+1)*d]
				s.dist[p] = max(dist+vec.Dot(xk, xk), 0)
				if s.assign[p] != best {
					c++
					s.assign[p] = best
				}
			}
		}
		changed[lo/assignBlock] = c
	})
	total := 0
	for _, c := range changed {
		total += c
	}
	return total
}

// addDist returns e plus the distances, added in point order: the energy's
// sum, carried from share to share when the points are split.
func addDist(e float64, dist []float32) float64 {
	for _, v := range dist {
		e += float64(v)
	}
	return e
}

// nearest returns the anchor with the least partial distance |a|^2 - 2 x.a
// given the dot products x.a, and that distance (ties to the lowest index).
func nearest(dots, norms []float32) (int32, float32) {
	best, dist := int32(0), float32(math.Inf(1))
	for a, r := range dots {
		if v := norms[a] - 2*r; v < dist {
			best, dist = int32(a), v
		}
	}
	return best, dist
}

// reduce gathers counts and variances and, when p is not nil, moves each
// anchor toward the Huber-weighted mean of its points.
func (s *dataset) reduce(p *device.StepParams) {
	d, m := s.d, s.m
	start, members := s.byAnchor()
	par.For(m, 1, func(lo, hi int) {
		x := make([]float32, d)
		sum := make([]float64, d)
		sq := make([]float64, d)
		for a := lo; a < hi; a++ {
			pts := members[start[a]:start[a+1]]
			anc := s.anc[a*d : (a+1)*d]
			clear(sum)
			clear(sq)
			wsum := s.addPoints(pts, anc, p, x, sum, sq, 0)
			s.counts[a] = int64(len(pts))
			finishAnchor(anc, sum, sq, wsum, int64(len(pts)), s.variance[a*d:(a+1)*d], p)
		}
	})
	if p != nil {
		vec.Norms(s.norms, s.anc, d)
		s.panels.Set(s.anc, m, d)
	}
}

// byAnchor sorts the points by anchor (a counting sort): anchor a's points
// are members[start[a]:start[a+1]], in ascending point order.
func (s *dataset) byAnchor() (start []int, members []int32) {
	m := s.m
	start = make([]int, m+1)
	for _, a := range s.assign {
		start[a+1]++
	}
	for a := range m {
		start[a+1] += start[a]
	}
	members = make([]int32, s.n)
	fill := append([]int(nil), start[:m]...)
	for i, a := range s.assign {
		members[fill[a]] = int32(i)
		fill[a]++
	}
	return start, members
}

// addPoints adds the terms of the points pts (one anchor's, ascending) to
// that anchor's sums, in order: sum[j] += w (x_j - anc_j) and sq[j] +=
// (x_j - anc_j)^2 in float64, w the Huber weight min(1, Tau/r) (1 when p
// is nil or Tau is +Inf), and returns wsum plus the weights. x is scratch
// of d values.
func (s *dataset) addPoints(pts []int32, anc []float32, p *device.StepParams, x []float32, sum, sq []float64, wsum float64) float64 {
	d := s.d
	for _, i := range pts {
		f16.DecodeRow(x, s.pts[int(i)*d:(int(i)+1)*d])
		w := 1.0
		if p != nil && !math.IsInf(float64(p.Tau), 1) {
			if r := math.Sqrt(float64(s.dist[i])); r > float64(p.Tau) {
				w = float64(p.Tau) / r
			}
		}
		wsum += w
		for j, v := range x {
			r := float64(v - anc[j])
			sum[j] += w * r
			sq[j] += r * r
		}
	}
	return wsum
}

// finishAnchor ends one anchor's reduce from its sums (addPoints) and
// point count: its variance v, and when p is not nil and it has points,
// its move, rate * (robust mean - anchor) capped in length, applied to
// anc. sum is overwritten.
func finishAnchor(anc []float32, sum, sq []float64, wsum float64, count int64, v []float32, p *device.StepParams) {
	if count == 0 {
		clear(v)
		return
	}
	for j := range v {
		v[j] = float32(sq[j] / float64(count))
	}
	if p == nil {
		return
	}
	var norm float64
	for j := range sum {
		sum[j] = float64(p.Rate) * sum[j] / wsum
		norm += sum[j] * sum[j]
	}
	scale := 1.0
	if norm = math.Sqrt(norm); norm > float64(p.MaxMove) {
		scale = float64(p.MaxMove) / norm
	}
	for j := range anc {
		anc[j] = float32(float64(anc[j]) + scale*sum[j])
	}
}

func init() {
	device.Register("cpu", device.RankCPU, func() (device.Device, error) { return New(), nil })
	device.RegisterDevices("cpu", OpenDevices)
}

// OpenDevices returns one CPU device per number given, each 0: the CPU is
// device 0, and "0,0,0" splits training over three simulated devices (for
// tests of device.Multi). nil ("all") is the one CPU.
func OpenDevices(ordinals []int) ([]device.Device, error) {
	if ordinals == nil {
		return []device.Device{New()}, nil
	}
	devs := make([]device.Device, len(ordinals))
	for i, o := range ordinals {
		if o != 0 {
			return nil, fmt.Errorf("no CPU device %d: the CPU is device 0 (give 0 more than once, 0,0, to split training over simulated devices)", o)
		}
		devs[i] = New()
	}
	return devs, nil
}
