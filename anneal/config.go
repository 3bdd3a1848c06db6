package anneal

import (
	"errors"
	"fmt"
	"math"
)

// ErrTooFewPoints is returned when there are fewer points than anchors.
var ErrTooFewPoints = errors.New("anneal: fewer points than anchors")

// Config sets the anchors to learn and the annealing schedule. The zero value
// of every field but M means "the default".
type Config struct {
	M    int    // anchors to learn
	Seed uint64 // seeds initialisation and maintenance; same seed, same anchors

	MaxIter  int     // iterations at most (default 60)
	Tol      float64 // relative energy change under which an iteration counts as converged (default 1e-4)
	Patience int     // converged iterations in a row that stop the loop (default 2)

	T0      float64 // starting temperature (default 1)
	Cooling float64 // temperature factor per iteration (default 0.7)
	TMin    float64 // below this the temperature is 0 and the loop is Lloyd's (default 0.02)

	MaintainEvery int     // iterations between maintenance passes while T > 0 (default 4)
	MergeFrac     float64 // merge two anchors closer than MergeFrac * the smaller's mean squared radius (default 0.05)

	InitSample int // points k-means++ runs on (default min(n, 16*M)); costs InitSample*M*dim multiply-adds on the host

	// Progress, when set, is called after every iteration.
	Progress func(Iteration)
	// Finish, when set, is called once training is done, with the model
	// and the dataset still resident, before the dataset is closed: for
	// work that uses the points on the device (encoding them there). Its
	// error is Train's.
	Finish func(*Model, Dataset) error
}

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
	if c.MaxIter == 0 {
		c.MaxIter = 60
	}
	if c.Tol == 0 {
		c.Tol = 1e-4
	}
	if c.Patience == 0 {
		c.Patience = 2
	}
	if c.T0 == 0 {
		c.T0 = 1
	}
	if c.Cooling == 0 {
		c.Cooling = 0.7
	}
	if c.TMin == 0 {
		c.TMin = 0.02
	}
	if c.MaintainEvery == 0 {
		c.MaintainEvery = 4
	}
	if c.MergeFrac == 0 {
		c.MergeFrac = 0.05
	}
	if c.InitSample == 0 {
		c.InitSample = 16 * c.M
	}
	c.InitSample = max(min(c.InitSample, n), c.M)
	return c
}

func (c Config) validate(n int) error {
	switch {
	case c.M < 1:
		return fmt.Errorf("anneal: anchors must be at least 1, got %d", c.M)
	case n < c.M:
		return fmt.Errorf("%w: %d points, %d anchors", ErrTooFewPoints, n, c.M)
	case c.MaxIter < 1, c.Patience < 1, c.MaintainEvery < 1:
		return fmt.Errorf("anneal: MaxIter, Patience and MaintainEvery must be positive")
	case !(c.Cooling > 0 && c.Cooling < 1):
		return fmt.Errorf("anneal: Cooling must be in (0, 1), got %v", c.Cooling)
	case c.T0 < 0 || c.TMin < 0 || math.IsNaN(c.T0) || math.IsNaN(c.TMin):
		return fmt.Errorf("anneal: temperatures must be non-negative")
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
