// Package crosscheck runs a training backend beside a reference backend
// (the CPU's, which the caller passes) on the same synthetic points,
// times both, and says whether they agree: the work behind `vlc
// test-cuda` and `vlc test-webgpu`, and the timing loop of `vlc bench`.
// The backends' test suites hold them to the reference exactly
// (anneal/devicetest); this is the same comparison at the sizes and
// speeds a user runs.
package crosscheck

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/parity"
	"github.com/vlc-embed/vlc/internal/synth"
)

// Limits of Check: the largest relative difference of the energies, and
// the largest fraction of points assigned differently beyond a near-tie.
const (
	EnergyTol   = 1e-3
	MismatchTol = 1e-3
)

// Config sizes a check of a backend against the CPU reference: N x Dim
// float16 points in Anchors/4 clusters (synth.Clusters), Anchors anchors
// drawn from them, Steps timed Steps on the device and RefSteps on the
// CPU. The CPU runs on the first Sub points (Sub < N: a subsample, for
// sizes the CPU would take minutes over; its time is then extrapolated,
// and the energies after the Steps are not compared).
type Config struct {
	N, Dim, Anchors, Sub int
	Steps, RefSteps      int
	Seed                 uint64
	// F16Anchors: the backend rounds anchors to float16 in its assign
	// (the near-tie slack of parity.NearTie).
	F16Anchors bool
	// Profile, when set, runs after the device's timed Steps with its
	// dataset still loaded, for backend-specific timings; step runs one
	// more Step of the schedule's end.
	Profile func(ds device.Dataset, step func() error) error
	// DeviceDone, when set, is called with the report so far (the data,
	// the load, the device's Steps and transfers) before the CPU runs,
	// which can take minutes: a caller can show that part at once.
	DeviceDone func(*Report)
}

// Report is what Check measured and found.
type Report struct {
	Config
	Device, Reference  string        // the backends' names
	DataTime, LoadTime time.Duration // making the points; loading them on the device
	Uploaded           int64         // bytes Load moved to the device
	DeviceMs, RefMs    []float64     // wall-clock milliseconds of each timed Step
	// StepUp and StepDown are the bytes a steady-state Step moves to and
	// from the device.
	StepUp, StepDown int64
	// DeviceEnergy and RefEnergy are the energies after the timed Steps
	// (comparable when Sub == N: the same schedule on the same points).
	DeviceEnergy, RefEnergy float64
	// Agreement compares one assign of the reference's points to the
	// device's final anchors on both; AssignEnergy is that assign's
	// energy on each (the device's over the same points).
	Agreement                           parity.Agreement
	DeviceAssignEnergy, RefAssignEnergy float64
	// Failures lists what exceeded a limit; empty means the backends agree.
	Failures []string
}

// EnergyDiff is the relative difference of the energies after the Steps.
func (r *Report) EnergyDiff() float64 { return parity.RelDiff(r.DeviceEnergy, r.RefEnergy) }

// AssignEnergyDiff is the relative difference of the same-anchor assign's
// energies.
func (r *Report) AssignEnergyDiff() float64 {
	return parity.RelDiff(r.DeviceAssignEnergy, r.RefAssignEnergy)
}

// Subsample reports whether the reference ran on fewer points than the
// device.
func (r *Report) Subsample() bool { return r.Sub < r.N }

// Check runs dev's Steps and those of ref (the CPU backend) from the same
// anchors on the same clustered points, times both, and compares their energies and, from the
// same anchors, their assignments. The schedule: the first half of the
// Steps robust (Huber threshold, half rate, capped moves), the second half
// Lloyd's, as annealing ends. An error is returned when a backend fails;
// disagreement is in Report.Failures.
func Check(ctx context.Context, dev, ref device.Device, cfg Config) (*Report, error) {
	if cfg.Sub <= 0 || cfg.Sub > cfg.N {
		cfg.Sub = cfg.N
	}
	if cfg.Sub == cfg.N {
		cfg.RefSteps = cfg.Steps // the same schedule on the same points
	}
	if cfg.N < 1 || cfg.Dim < 1 || cfg.Anchors < 1 || cfg.Anchors > cfg.Sub || cfg.Steps < 1 || cfg.RefSteps < 1 {
		return nil, fmt.Errorf("crosscheck: %d x %d points (%d on the CPU), %d anchors, %d and %d steps: want at least one of each, no more anchors than points", cfg.N, cfg.Dim, cfg.Sub, cfg.Anchors, cfg.Steps, cfg.RefSteps)
	}
	n, d, m, sub := cfg.N, cfg.Dim, cfg.Anchors, cfg.Sub
	r := &Report{Config: cfg, Device: dev.Name()}
	t0 := time.Now()
	pts := synth.Clusters(n, d, max(1, m/4), cfg.Seed)
	anchors0 := synth.PickAnchors(pts, m, cfg.Seed)
	r.DataTime = time.Since(t0)
	rd := float32(math.Sqrt(float64(d)))
	params := func(it int) device.StepParams {
		if it < cfg.Steps/2 {
			return device.StepParams{Tau: 2 * rd, Rate: 0.5, MaxMove: rd}
		}
		return device.StepParams{Tau: inf, Rate: 1, MaxMove: inf}
	}

	// The device: upload, one warm-up Step, then the timed Steps from
	// anchors0.
	t0 = time.Now()
	gds, err := dev.Load(pts)
	if err != nil {
		return nil, err
	}
	defer gds.Close()
	r.LoadTime = time.Since(t0)
	r.Uploaded, _ = gds.Transfer()
	if err := gds.SetAnchors(anchors0, m); err != nil {
		return nil, err
	}
	if _, err := gds.Step(params(0)); err != nil {
		return nil, err
	}
	if err := gds.SetAnchors(anchors0, m); err != nil {
		return nil, err
	}
	upA, downA := gds.Transfer()
	if r.DeviceMs, r.DeviceEnergy, err = TimeSteps(ctx, gds, cfg.Steps, params); err != nil {
		return nil, err
	}
	upB, downB := gds.Transfer()
	r.StepUp, r.StepDown = (upB-upA)/int64(cfg.Steps), (downB-downA)/int64(cfg.Steps)
	final := make([]float32, m*d)
	if err := gds.Anchors(final); err != nil {
		return nil, err
	}
	if cfg.Profile != nil {
		step := func() error {
			_, err := gds.Step(params(cfg.Steps - 1))
			return err
		}
		if err := cfg.Profile(gds, step); err != nil {
			return nil, err
		}
	}
	if cfg.DeviceDone != nil {
		cfg.DeviceDone(r)
	}

	// The CPU: the same schedule from the same anchors, on the first sub
	// points.
	cpts := device.Points{Data: pts.Data[:sub*d], N: sub, Dim: d}
	r.Reference = ref.Name()
	cds, err := ref.Load(cpts)
	if err != nil {
		return nil, err
	}
	defer cds.Close()
	if err := cds.SetAnchors(anchors0, m); err != nil {
		return nil, err
	}
	if r.RefMs, r.RefEnergy, err = TimeSteps(ctx, cds, cfg.RefSteps, params); err != nil {
		return nil, err
	}
	if !r.Subsample() {
		if rel := r.EnergyDiff(); rel > EnergyTol {
			r.Failures = append(r.Failures, fmt.Sprintf("energy after the steps differs by %.2g", rel))
		}
	}

	// Both assign the reference's points to the device's final anchors.
	ga, ca := make([]int32, n), make([]int32, sub)
	for _, c := range []struct {
		ds     device.Dataset
		assign []int32
		energy *float64
	}{{gds, ga, &r.DeviceAssignEnergy}, {cds, ca, &r.RefAssignEnergy}} {
		if err := c.ds.SetAnchors(final, m); err != nil {
			return nil, err
		}
		st, err := c.ds.Assign()
		if err != nil {
			return nil, err
		}
		if err := c.ds.Assignments(c.assign); err != nil {
			return nil, err
		}
		*c.energy = st.Energy
	}
	if r.Subsample() {
		r.DeviceAssignEnergy = energy(cpts, final, ga[:sub])
	}
	r.Agreement = parity.Compare(pts.Data, d, final, ga, ca, cfg.F16Anchors)
	if rel := r.AssignEnergyDiff(); rel > EnergyTol {
		r.Failures = append(r.Failures, fmt.Sprintf("energy of the same-anchor assign differs by %.2g", rel))
	}
	if f := r.Agreement.NonTieFraction(); f > MismatchTol {
		r.Failures = append(r.Failures, fmt.Sprintf("%.3f%% of the assignments differ beyond near-ties", 100*f))
	}
	return r, nil
}

// TimeSteps runs iters Steps with params(it) and returns the wall-clock
// milliseconds of each (the scalar read-back included) and the energy the
// last reported.
func TimeSteps(ctx context.Context, ds device.Dataset, iters int, params func(it int) device.StepParams) ([]float64, float64, error) {
	ms := make([]float64, iters)
	var st device.StepStats
	for it := range iters {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		t := time.Now()
		var err error
		if st, err = ds.Step(params(it)); err != nil {
			return nil, 0, err
		}
		ms[it] = float64(time.Since(t).Nanoseconds()) / 1e6
	}
	return ms, st.Energy, nil
}

// energy is the mean squared distance (float64) of the points to their
// assigned anchors.
func energy(pts device.Points, anchors []float32, assign []int32) float64 {
	d := pts.Dim
	var e float64
	for i, a := range assign {
		for j := range d {
			r := float64(f16.ToFloat32(pts.Data[i*d+j])) - float64(anchors[int(a)*d+j])
			e += r * r
		}
	}
	return e / float64(len(assign))
}

// Median of v (the upper one for an even count); NaN for none.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	c := slices.Clone(v)
	slices.Sort(c)
	return c[len(c)/2]
}

// Mean of v.
func Mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

var inf = float32(math.Inf(1))
