// Package devicetest is the conformance suite of training backends: what an
// device.Device must do, checked against the reference backend (package
// cpu) and against float64 oracles. A backend's tests get the whole suite
// from one call:
//
//	func TestConformance(t *testing.T) {
//		devicetest.Run(t, dev, devicetest.Options{F16Anchors: true})
//	}
//
// The checks are also exported one by one, for a backend that runs one
// of them again in another configuration (points streamed in batches, say).
//
// Two optional capabilities are held to goldens (testdata): a dataset that
// is a device.PlusPlusDrawer must pick k-means++ centres exactly as
// kmeans.PlusPlusRounds does, and one that is a device.RotatedEncoder must
// write the rotated code's bytes exactly as quant.Rotated does. The
// goldens pin the host's side too (TestGoldens), so a change to the host
// arithmetic that a GPU kernel must follow fails on any machine, not only
// on one with that GPU.
package devicetest

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/vlc-embed/vlc/device"
)

// Options say what a backend promises beyond the common contract, and
// which sizes exercise its blocks.
type Options struct {
	// F16Anchors: the assign multiplies the anchors rounded to float16
	// (tensor cores). Assignments are checked against the nearest float16
	// anchor, and a near-tie with the CPU gets the rounding's slack.
	F16Anchors bool
	// DirectEnergy: the energy sums (x_j - a_j)^2 for each point, not the
	// expanded |a|^2 - 2 x.a + |x|^2 the CPU uses, so it is held closer
	// to the float64 energy of the same assignment.
	DirectEnergy bool
	// Deterministic: the same Steps from the same anchors give the same
	// bits, run after run.
	Deterministic bool

	// Variants, when set, are the assign kernels to check one by one;
	// UseVariant makes a loaded dataset use one, or reports false when
	// this device cannot run it (the case is skipped).
	Variants   []string
	UseVariant func(ds device.Dataset, variant string) bool

	// AssignSizes and StepSizes replace the default sizes: choose them to
	// straddle the backend's tiles and blocks.
	AssignSizes, StepSizes []Size

	// Transfers, when set, are the bytes the backend must move between
	// host and device; a host backend gives all zeros.
	Transfers *Transfers
}

// Size is one problem: N points, M anchors, dimension D.
type Size struct{ N, M, D int }

// Transfers are the bytes a resident backend moves: Load's (up), each
// SetAnchors' (up), and each Step's or Assign's in the steady state.
type Transfers struct {
	Load             func(ds device.Dataset, n, d int) int64
	SetAnchors       func(m, d int) int64
	StepUp, StepDown int64
}

// DefaultAssignSizes sweep n, m and d one at a time across the block sizes
// common to the backends (64, 128 and 256 points, anchors or values).
var DefaultAssignSizes = func() []Size {
	var s []Size
	for _, n := range []int{1, 63, 64, 65, 129, 257, 1000} {
		s = append(s, Size{n, 7, 17})
	}
	for _, m := range []int{1, 63, 64, 65, 129, 300} {
		s = append(s, Size{300, m, 16})
	}
	for _, d := range []int{1, 2, 15, 16, 17, 31, 32, 33, 96, 130} {
		s = append(s, Size{200, 20, d})
	}
	return s
}()

// DefaultStepSizes are the sizes of the Step checks.
var DefaultStepSizes = []Size{{129, 7, 96}, {1000, 64, 17}, {1500, 65, 130}, {700, 300, 16}, {128, 1, 1}}

// Run runs every check of the suite on dev as subtests.
func Run(t *testing.T, dev device.Device, opt Options) {
	t.Run("AssignParity", func(t *testing.T) { AssignParity(t, dev, opt) })
	t.Run("StepParity", func(t *testing.T) { StepParity(t, dev, opt) })
	t.Run("RobustStep", func(t *testing.T) { RobustStep(t, dev) })
	t.Run("EmptyAnchor", func(t *testing.T) { EmptyAnchor(t, dev) })
	t.Run("Transfers", func(t *testing.T) { CheckTransfers(t, dev, opt) })
	t.Run("Train", func(t *testing.T) { Train(t, dev) })
	t.Run("Deterministic", func(t *testing.T) {
		if !opt.Deterministic {
			t.Skip("the backend does not promise the same bits from run to run")
		}
		Deterministic(t, dev, Size{3000, 50, 130})
	})
	t.Run("PlusPlusGolden", func(t *testing.T) { PlusPlusGolden(t, dev) })
	t.Run("EncodeGolden", func(t *testing.T) { EncodeGolden(t, dev) })
}

// Result is everything a Dataset reports after one Step or Assign.
type Result struct {
	Stats    device.StepStats
	Assign   []int32
	Anchors  []float32
	Counts   []int64
	Variance []float32
}

// Read copies the dataset's assignments, anchors and statistics.
func Read(t testing.TB, ds device.Dataset, st device.StepStats, n, m, d int) Result {
	t.Helper()
	r := Result{Stats: st, Assign: make([]int32, n), Anchors: make([]float32, m*d), Counts: make([]int64, m), Variance: make([]float32, m*d)}
	for _, err := range []error{ds.Assignments(r.Assign), ds.Anchors(r.Anchors), ds.Stats(r.Counts, r.Variance)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// Load loads pts on dev, failing t on an error, and closes the dataset
// when t ends.
func Load(t testing.TB, dev device.Device, pts device.Points) device.Dataset {
	t.Helper()
	ds, err := dev.Load(pts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ds.Close() })
	return ds
}

// Once loads pts on dev, sets the anchors and runs one Step with p
// (Assign when p is nil), after use (when set) has configured the
// dataset. It returns what the dataset reports.
func Once(t testing.TB, dev device.Device, pts device.Points, anchors []float32, m int, p *device.StepParams, use func(device.Dataset)) Result {
	t.Helper()
	ds := Load(t, dev, pts)
	if use != nil {
		use(ds)
	}
	if err := ds.SetAnchors(anchors, m); err != nil {
		t.Fatal(err)
	}
	var st device.StepStats
	var err error
	if p == nil {
		st, err = ds.Assign()
	} else {
		st, err = ds.Step(*p)
	}
	if err != nil {
		t.Fatal(err)
	}
	return Read(t, ds, st, pts.N, m, pts.Dim)
}

// Passes runs steps robust Steps (Huber threshold tau, half rate) and a
// final Assign on ds, and returns what the dataset reports after each.
func Passes(t testing.TB, ds device.Dataset, n, m, d, steps int, tau float32) []Result {
	t.Helper()
	var res []Result
	for k := range steps + 1 {
		var st device.StepStats
		var err error
		if k < steps {
			st, err = ds.Step(device.StepParams{Tau: tau, Rate: 0.5, MaxMove: inf})
		} else {
			st, err = ds.Assign()
		}
		if err != nil {
			t.Fatal(err)
		}
		res = append(res, Read(t, ds, st, n, m, d))
	}
	return res
}

// SameBits checks that two runs of Passes agree to the bit: statistics,
// assignments, counts, anchors and variances.
func SameBits(t testing.TB, label string, a, b []Result) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d passes / %d", label, len(a), len(b))
	}
	for k := range a {
		x, y := a[k], b[k]
		if x.Stats != y.Stats {
			t.Errorf("%s, pass %d: %+v / %+v", label, k, x.Stats, y.Stats)
		}
		if !slices.Equal(x.Assign, y.Assign) || !slices.Equal(x.Counts, y.Counts) {
			t.Fatalf("%s, pass %d: assignments or counts differ", label, k)
		}
		for i := range x.Anchors {
			if math.Float32bits(x.Anchors[i]) != math.Float32bits(y.Anchors[i]) || math.Float32bits(x.Variance[i]) != math.Float32bits(y.Variance[i]) {
				t.Fatalf("%s, pass %d, value %d: anchors %v / %v, variance %v / %v", label, k, i, x.Anchors[i], y.Anchors[i], x.Variance[i], y.Variance[i])
			}
		}
	}
}

// variants returns the variants to check ("" alone: the default).
func (o Options) variants() []string {
	if len(o.Variants) == 0 {
		return []string{""}
	}
	return o.Variants
}

// use returns the configuration of a dataset for variant v (nil for the
// default), skipping t when the device cannot run it.
func (o Options) use(t *testing.T, v string) func(device.Dataset) {
	if v == "" || o.UseVariant == nil {
		return nil
	}
	return func(ds device.Dataset) {
		if !o.UseVariant(ds, v) {
			t.Skipf("this device cannot run variant %s", v)
		}
	}
}

func sizeName(prefix string, s Size) string {
	if prefix != "" {
		prefix += "/"
	}
	return fmt.Sprintf("%sn=%d/m=%d/d=%d", prefix, s.N, s.M, s.D)
}

var inf = float32(math.Inf(1))

// Shared opens a backend's device once for a whole test binary (a GPU
// context is costly to make) and hands it to every test that asks.
type Shared[D device.Device] struct {
	// Open opens the device.
	Open func() (D, error)
	// Unavailable reports whether an error of Open means this machine
	// lacks the hardware or driver: the tests then skip, with the error
	// as the reason. Any other error fails them (every error, when nil).
	Unavailable func(error) bool
	// Describe, when set, is logged once the device opens.
	Describe func(D) string

	once sync.Once
	dev  D
	err  error
}

// Get returns the device, opening it on the first call.
func (s *Shared[D]) Get(t *testing.T) D {
	t.Helper()
	s.once.Do(func() {
		s.dev, s.err = s.Open()
		if s.err == nil {
			desc := s.dev.Name()
			if s.Describe != nil {
				desc = s.Describe(s.dev)
			}
			t.Logf("device: %s", desc)
		}
	})
	if s.err != nil {
		if s.Unavailable != nil && s.Unavailable(s.err) {
			t.Skip(s.err)
		}
		t.Fatal(s.err)
	}
	return s.dev
}
