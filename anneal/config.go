package anneal

import (
	"fmt"
	"github.com/vlc-embed/vlc/internal/errs"
	"math"
)

// Errors of training, for errors.Is.
var (
	// ErrTooFewPoints: there are fewer points than anchors.
	ErrTooFewPoints = errs.New(errs.ErrArgument, "fewer points than anchors")
)

// Config sets the anchors to learn and the annealing schedule. The zero value
// of every field but M means "the default" (the Default* constants).
type Config struct {
	M    int    // anchors to learn
	Seed uint64 // seeds initialisation and maintenance; same seed, same anchors

	MaxIter  int     // iterations at most (DefaultMaxIter)
	Tol      float64 // relative energy change under which an iteration counts as converged (DefaultTol)
	Patience int     // converged iterations in a row that stop the loop (DefaultPatience)

	T0      float64 // starting temperature (DefaultT0)
	Cooling float64 // temperature factor per iteration (DefaultCooling)
	TMin    float64 // below this the temperature is 0 and the loop is Lloyd's (DefaultTMin)

	MaintainEvery int     // iterations between maintenance passes (DefaultMaintainEvery)
	MergeFrac     float64 // merge two anchors closer than MergeFrac * the smaller's mean squared radius (DefaultMergeFrac)

	// InitSample is the number of points k-means++ runs on (default
	// min(n, DefaultInitSamplePerAnchor*M)). It costs InitSample*M*dim
	// multiply-adds: on the device for datasets that are PlusPlusDrawers
	// (CUDA), on the host's cores otherwise.
	InitSample int

	// Progress, when set, is called after every iteration.
	Progress func(Iteration)
}

// The defaults of Config, and why each has its value.
const (
	// DefaultMaxIter bounds a run that does not converge. The annealed
	// phase takes about 11 iterations (DefaultCooling); the runs measured
	// in the docs converged after 13 to 38 in all (1M x 768 with 4096
	// anchors: 32, with five cold maintenance passes; deep2k: 23; pq
	// codebooks: 26 to 38), well inside it.
	DefaultMaxIter = 60
	// DefaultTol: an iteration that moves the energy by less than this
	// fraction (the fourth significant digit) counts as converged.
	DefaultTol = 1e-4
	// DefaultPatience: two converged iterations in a row, so that one
	// quiet iteration between two moves does not stop the loop.
	DefaultPatience = 2
	// DefaultT0: the first Step moves anchors half way (rate 1/(1+T)) to
	// their points' mean (no rms distance is known yet); the hot Steps
	// after it trim beyond twice the rms distance over sqrt(T).
	DefaultT0 = 1
	// DefaultCooling and DefaultTMin: 0.7^11 < 0.02, so about ten
	// annealed Steps (with maintenance every DefaultMaintainEvery) come
	// before the temperature reaches 0 and the Steps become Lloyd's.
	DefaultCooling = 0.7
	DefaultTMin    = 0.02
	// DefaultMaintainEvery: maintenance reads the anchors and their
	// statistics back (m x dim) from the device; every fourth iteration
	// leaves three Steps between passes for the anchors it moved to
	// settle, and two or three passes in the annealed phase.
	DefaultMaintainEvery = 4
	// DefaultMergeFrac: two anchors whose squared distance is under a
	// twentieth of the smaller one's mean squared radius sit inside one
	// cluster of points, and are merged to free a slot.
	DefaultMergeFrac = 0.05
	// DefaultInitSamplePerAnchor: k-means++ draws from 16 points per
	// anchor, at a cost (16 M^2 dim multiply-adds) below one assign of
	// the n points as long as n > 16 M.
	DefaultInitSamplePerAnchor = 16
)

// Iteration is what Progress sees after each step.
type Iteration struct {
	Iter        int
	Temperature float64
	Energy      float64
	Changed     int
	Merged      int // anchors merged by maintenance after this step
	Split       int // anchors split (empty, merged or starved slots refilled)
}

func (c Config) withDefaults(n int) Config {
	set := func(v *float64, def float64) {
		if *v == 0 {
			*v = def
		}
	}
	seti := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	seti(&c.MaxIter, DefaultMaxIter)
	set(&c.Tol, DefaultTol)
	seti(&c.Patience, DefaultPatience)
	set(&c.T0, DefaultT0)
	set(&c.Cooling, DefaultCooling)
	set(&c.TMin, DefaultTMin)
	seti(&c.MaintainEvery, DefaultMaintainEvery)
	set(&c.MergeFrac, DefaultMergeFrac)
	seti(&c.InitSample, DefaultInitSamplePerAnchor*c.M)
	c.InitSample = max(min(c.InitSample, n), c.M)
	return c
}

func (c Config) validate(n int) error {
	switch {
	case c.M < 1:
		return fmt.Errorf("%w: anchors must be at least 1, got %d", errs.ErrArgument, c.M)
	case n < c.M:
		return fmt.Errorf("%w: %d points, %d anchors", ErrTooFewPoints, n, c.M)
	case c.MaxIter < 1, c.Patience < 1, c.MaintainEvery < 1:
		return fmt.Errorf("%w: MaxIter, Patience and MaintainEvery must be positive", errs.ErrArgument)
	case !(c.Cooling > 0 && c.Cooling < 1):
		return fmt.Errorf("%w: Cooling must be in (0, 1), got %v", errs.ErrArgument, c.Cooling)
	case c.T0 < 0 || c.TMin < 0 || math.IsNaN(c.T0) || math.IsNaN(c.TMin):
		return fmt.Errorf("%w: temperatures must be non-negative", errs.ErrArgument)
	}
	return nil
}

// DefaultAnchors is the number of anchors used when the caller names none:
// about sqrt(n), so that lists hold about sqrt(n) vectors each and the anchors
// cost a small fraction of the index.
func DefaultAnchors(n int) int {
	m := int(math.Round(math.Sqrt(float64(n))))
	return max(1, min(m, 65536))
}
