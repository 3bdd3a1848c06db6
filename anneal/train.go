package anneal

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/vlc-embed/vlc/device"
)

// rngStream is the second word of the PCG seed of training's random
// numbers ("vlc" in ASCII): with Config.Seed it fixes every draw.
const rngStream = 0x766c63

// Model is what training learned.
type Model struct {
	M, Dim   int
	Anchors  []float32 // M*Dim, row-major
	Counts   []int64   // points per anchor in the final assignment
	Variance []float32 // M*Dim: per anchor, the mean squared residual per dimension
	Assign   []int32   // the final anchor of every point

	Energy     float64 // mean squared distance to the final anchors
	InitEnergy float64 // the same, for the k-means++ anchors
	Iterations int
	Converged  bool // stopped by the tolerance, not by MaxIter
	Merged     int  // anchors merged by maintenance, in total
	Split      int  // anchors split by maintenance, in total

	Times Times // where the training's wall time went
}

// Times are the wall times of training's parts.
type Times struct {
	Load     time.Duration // the points to the device (Device.Load)
	Seed     time.Duration // k-means++ and the first anchors to the device
	Steps    time.Duration // every Step
	Maintain time.Duration // maintenance: statistics, merges and splits, the anchors back up
	Final    time.Duration // the final Assign and bringing the model back
}

// Train learns cfg.M anchors for pts on dev. The same points, configuration
// and seed give the same model on the same backend.
//
// The loop: k-means++ on a sample, then Steps while the temperature T cools
// geometrically from T0; at T < TMin it is 0 and the Steps are Lloyd's.
// Every MaintainEvery iterations, maintenance merges anchors that nearly
// coincide and refills freed, empty or starved slots by splitting the
// anchors with the largest distortion; it runs while T > 0 and for up to
// coldPasses passes after, until a pass changes nothing. The loop stops
// once the relative energy change has stayed under Tol (or no point moved) for Patience
// iterations at T = 0, or after MaxIter iterations.
func Train(ctx context.Context, dev device.Device, pts device.Points, cfg Config) (*Model, error) {
	model, ds, err := TrainResident(ctx, dev, pts, cfg)
	if ds != nil {
		ds.Close()
	}
	return model, err
}

// TrainResident is Train that leaves the points on the device: it returns
// the dataset, with the model's anchors and assignments, for work that
// uses the points there (encoding them); the caller closes it.
func TrainResident(ctx context.Context, dev device.Device, pts device.Points, cfg Config) (_ *Model, _ device.Dataset, err error) {
	if pts.Dim < 1 || len(pts.Data) != pts.N*pts.Dim {
		return nil, nil, fmt.Errorf("anneal: %d values do not make %d points of dimension %d", len(pts.Data), pts.N, pts.Dim)
	}
	cfg = cfg.withDefaults(pts.N)
	if err := cfg.validate(pts.N); err != nil {
		return nil, nil, err
	}
	m, d := cfg.M, pts.Dim
	rng := rand.New(rand.NewPCG(cfg.Seed, rngStream))

	var times Times
	clock := time.Now()
	lap := func(d *time.Duration) {
		now := time.Now()
		*d += now.Sub(clock)
		clock = now
	}
	ds, err := dev.Load(pts)
	if err != nil {
		return nil, nil, err
	}
	lap(&times.Load)
	defer func() {
		if err != nil {
			ds.Close()
		}
	}()
	anchors, err := initPlusPlus(pts, cfg.M, cfg.InitSample, rng, ds)
	if err != nil {
		return nil, nil, err
	}
	if err := ds.SetAnchors(anchors, m); err != nil {
		return nil, nil, err
	}
	lap(&times.Seed)

	model := &Model{M: m, Dim: d}
	counts := make([]int64, m)
	variance := make([]float32, m*d)
	temp := cfg.T0
	rms := math.Inf(1)
	prev := math.NaN()
	streak := 0
	cold := 0 // maintenance passes at T = 0
	for it := 1; it <= cfg.MaxIter; it++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		st, err := ds.Step(schedule(temp, rms))
		if err != nil {
			return nil, nil, err
		}
		lap(&times.Steps)
		if it == 1 {
			model.InitEnergy = st.Energy
		}
		model.Iterations = it
		rms = math.Sqrt(st.Energy)

		var merged, split int
		if (temp > 0 || cold < coldPasses) && it%cfg.MaintainEvery == 0 && it < cfg.MaxIter {
			if err := ds.Anchors(anchors); err != nil {
				return nil, nil, err
			}
			if err := ds.Stats(counts, variance); err != nil {
				return nil, nil, err
			}
			merged, split = maintain(anchors, counts, variance, d, pts.N, cfg.MergeFrac, rng)
			if merged+split > 0 {
				if err := ds.SetAnchors(anchors, m); err != nil {
					return nil, nil, err
				}
			}
			model.Merged += merged
			model.Split += split
			lap(&times.Maintain)
			if temp == 0 {
				cold++
				if merged+split == 0 {
					cold = coldPasses // balanced: no more passes
				}
			}
		}
		if cfg.Progress != nil {
			cfg.Progress(Iteration{Iter: it, Temperature: temp, Energy: st.Energy, Changed: st.Changed, Merged: merged, Split: split})
		}
		if merged+split > 0 {
			streak = 0 // the Steps after a pass decide convergence
		} else if temp == 0 {
			if st.Changed == 0 || math.Abs(prev-st.Energy) <= cfg.Tol*st.Energy {
				streak++
			} else {
				streak = 0
			}
			if streak >= cfg.Patience {
				model.Converged = true
				break
			}
		}
		prev = st.Energy
		if temp *= cfg.Cooling; temp < cfg.TMin {
			temp = 0
		}
	}

	st, err := ds.Assign()
	if err != nil {
		return nil, nil, err
	}
	model.Energy = st.Energy
	model.Anchors = anchors
	model.Counts = counts
	model.Variance = variance
	model.Assign = make([]int32, pts.N)
	if err := ds.Anchors(model.Anchors); err != nil {
		return nil, nil, err
	}
	if err := ds.Stats(model.Counts, model.Variance); err != nil {
		return nil, nil, err
	}
	if err := ds.Assignments(model.Assign); err != nil {
		return nil, nil, err
	}
	lap(&times.Final)
	model.Times = times
	return model, ds, nil
}

// The schedule's shape. At temperature T a Step gives a point at distance
// r from its anchor the Huber weight min(1, tau/r) with tau =
// huberWidth x rms / sqrt(T), moves each anchor 1/(1+T) of the way to its
// robust mean, and at most rms/T far.
const (
	// huberWidth: while hot, points beyond huberWidth x the root mean
	// squared distance count less in the mean, so far outliers cannot
	// drag an anchor across before the anchors have settled; most points
	// of a cluster (within twice its rms) keep full weight.
	huberWidth = 2
)

// schedule turns the temperature into step parameters. rms is the root mean
// squared distance of the last assign (+Inf before the first). Hot: anchors
// move part of the way to a robust mean and no farther than rms/T. As T -> 0
// the threshold and the cap go to infinity and the rate to 1: a Lloyd step.
func schedule(temp, rms float64) device.StepParams {
	if temp <= 0 || math.IsInf(rms, 1) {
		return device.StepParams{Tau: inf32, Rate: float32(1 / (1 + temp)), MaxMove: inf32}
	}
	return device.StepParams{
		Tau:     float32(huberWidth * rms / math.Sqrt(temp)),
		Rate:    float32(1 / (1 + temp)),
		MaxMove: float32(rms / temp),
	}
}

// coldPasses bounds the maintenance passes at T = 0. In high dimensions
// Lloyd's Steps starve anchors gradually: one anchor near a cluster's
// centre wins the whole cluster from anchors that k-means++ seeded on its
// points (measured: 128,000 x 768 in 128 Gaussian clusters, 512 anchors,
// median list 1 after the annealed passes alone). Each cold pass hands the
// slots starved since the last to crowded lists. Lloyd's Steps starve a
// few anchors again after each, so on such data the cap, not a quiet pass,
// usually ends them; five took that set to a median of 248. On deep10k
// the first cold pass changes nothing.
const coldPasses = 5

var inf32 = float32(math.Inf(1))
