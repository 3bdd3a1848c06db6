package device

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/vlc-embed/vlc/internal/kmeans"
)

// Training on several devices (Multi) splits the points by rows: each
// device holds one contiguous share, assigns it and reduces it to
// per-anchor partial sums; the partial sums are folded into one total, in
// share order, and the anchors move once, from the total, on every device.
// A backend that can hold a share implements ShardDevice; the arithmetic
// of the fold is its own, and it must make the result the bits of its
// one-device Dataset, for any number of shares and any split:
//
//   - cpu folds exactly by carrying its float64 sums from share to share:
//     each share adds its points' terms, in ascending point order, to the
//     sums the shares before it left, as its one-device reduce does.
//   - cuda sums in 64-bit fixed point, whose integer sums combine in any
//     order; every share uses the scales of the whole set (its n and a
//     bound over all shares, agreed in Link). Its Fold adds the scalars
//     alone: the sums are combined between the devices in Apply (the
//     shares' Applies wait for each other there), never on the host.

// ShardDevice is a Device whose point sets can be split over several
// devices (Multi).
type ShardDevice interface {
	Device
	// LoadShard places rows lo to hi-1 of p on the device: one share of
	// a point set split over devices. p is the whole set: the share
	// counts its N where the whole set's size matters (scales, the
	// energy), and may read other rows for k-means++. lo < hi.
	LoadShard(p Points, lo, hi int) (Shard, error)
}

// Shard is one device's share of a split point set. Multi's Dataset
// drives its shards through every pass (Step or Assign) in this order:
//
//	every shard, concurrently:  Reduce(p, move, nil)      assign and reduce the share
//	every shard, in share order: acc = Fold(acc)           (acc nil at the first)
//	while acc.Again():           Reduce(p, move, acc) concurrently, then Fold again
//	every shard, concurrently:  Apply(p, move, acc)       move the anchors from the total
//
// The total acc answers for the pass (StepStats, Stats) until the next
// pass begins. SetAnchors, Anchors, Assignments, Transfer and Close are
// the Dataset's methods, for the share (Assignments: its rows; Anchors:
// every shard has the same).
type Shard interface {
	// Link is called once on every shard after all have loaded, with
	// all the shards in share order, before any other method: for what
	// the shards must agree on (the bound of cuda's fixed point).
	Link(all []Shard) error
	SetAnchors(anchors []float32, m int) error
	// Reduce assigns the share's points to the anchors (when again is
	// nil) and reduces them as Step (move) or Assign does, keeping what
	// Fold and Apply need: its partial sums (cuda), or only the
	// assignment when the sums must be carried in order (cpu, whose Fold
	// reduces). With
	// again, the total of the last round whose Again was true, it
	// reduces the same assignment once more.
	Reduce(p StepParams, move bool, again ShardSums) error
	// Fold adds the share's part of the pass (its partial sums, or only
	// its scalars where Apply combines the sums on the devices) to acc,
	// or begins a total with it when acc is nil, and returns the total.
	Fold(acc ShardSums) (ShardSums, error)
	// Apply ends the pass: with move it moves the share's copy of the
	// anchors as Step does, from the total's sums. Every shard's Apply of
	// a pass is called at once: a backend may have them wait for each
	// other (cuda combines the sums between its devices there).
	Apply(p StepParams, move bool, total ShardSums) error
	Anchors(dst []float32) error
	Assignments(dst []int32) error
	Transfer() (toDevice, toHost int64)
	Close() error
}

// ShardSums is the total of one pass, folded from every share's partial
// sums (Shard.Fold). It stays valid until the next pass begins.
type ShardSums interface {
	// Again reports that every shard must reduce once more (Shard.Reduce
	// with this total) before the anchors move: cuda's, when a point was
	// farther than its fixed-point scales allow.
	Again() bool
	// StepStats are the pass's energy and changed count, as one device
	// would report them.
	StepStats() StepStats
	// Stats are the pass's counts and variances (Dataset.Stats).
	Stats(counts []int64, variance []float32) error
}

// Exchanger is a Shard whose backend combines the shares' partial sums
// between the devices itself (cuda), for reports (SplitReport).
type Exchanger interface {
	// Exchanged returns the bytes copied between devices for the whole
	// set since it was loaded, this share's wall time in the exchange,
	// and how the bytes travel.
	Exchanged() (bytes int64, wall time.Duration, path string)
}

// SplitReporter is a Dataset split over several devices (Multi's).
type SplitReporter interface {
	SplitReport() SplitReport
}

// SplitReport is what a split point set did since it was loaded.
type SplitReport struct {
	Passes int // Steps and Assigns, each counted once however often it reduced
	Shares []ShareReport
	// Combine is the wall time from the end of every share's Reduce to
	// the end of every share's Apply, summed over the passes: the fold,
	// the exchange of sums and the update of the anchors.
	Combine time.Duration
	// ExchangeBytes were copied between devices, ExchangePath says how
	// ("" where the host folds the sums).
	ExchangeBytes int64
	ExchangePath  string
}

// ShareReport is one share's part of a SplitReport.
type ShareReport struct {
	Device string // its device's name
	Rows   int
	// Reduce is the wall time of its Reduce calls (the assign and reduce
	// on its device), Exchange its own wall time in the exchange.
	Reduce, Exchange time.Duration
}

// MultiDevice trains on several devices at once (Multi).
type MultiDevice struct {
	devs  []Device
	split func(n, k int) []int
}

var _ Device = (*MultiDevice)(nil)

// Multi returns a Device that splits every point set it loads over devs,
// by rows (EvenSplit unless WithSplit says otherwise), and runs each pass
// on all of them at once: anneal.Train uses it as any Device. Every device
// must be a ShardDevice of one backend; the result of every Step and
// Assign is the bits that backend gives on one device. Close closes devs.
func Multi(devs ...Device) *MultiDevice {
	return &MultiDevice{devs: devs, split: EvenSplit}
}

// WithSplit makes Load split n points over the k devices by sizes(n, k):
// k row counts, in device order, that add up to n (a device given 0 rows
// holds no share).
func (md *MultiDevice) WithSplit(sizes func(n, k int) []int) *MultiDevice {
	md.split = sizes
	return md
}

// EvenSplit gives device i of k the rows i*n/k to (i+1)*n/k - 1.
func EvenSplit(n, k int) []int {
	sizes := make([]int, k)
	for i := range k {
		sizes[i] = (i+1)*n/k - i*n/k
	}
	return sizes
}

// Devices returns the devices, in share order.
func (md *MultiDevice) Devices() []Device { return md.devs }

// Name lists the devices: "2 x NAME" when they are alike.
func (md *MultiDevice) Name() string {
	names := make([]string, len(md.devs))
	same := true
	for i, d := range md.devs {
		names[i] = d.Name()
		same = same && names[i] == names[0]
	}
	if same && len(names) > 0 {
		return fmt.Sprintf("%d x %s", len(names), names[0])
	}
	return strings.Join(names, " + ")
}

// Close closes every device (a device given twice, once).
func (md *MultiDevice) Close() error {
	// At once, each on a goroutine of its own: releasing a GPU's
	// context takes a while, and the driver does several at once.
	var (
		errs []error
		mu   sync.Mutex
		wg   sync.WaitGroup
	)
	seen := map[Device]bool{}
	for _, d := range md.devs {
		if seen[d] {
			continue
		}
		seen[d] = true
		wg.Go(func() {
			err := d.Close()
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

var _ MemoryLimiter = (*MultiDevice)(nil)

// SetMemoryLimit caps every device that can be capped (MemoryLimiter) at
// bytes: the cap is per device.
func (md *MultiDevice) SetMemoryLimit(bytes int64) error {
	return md.limiters(func(l MemoryLimiter) error { return l.SetMemoryLimit(bytes) })
}

// PeakMemory is the largest PeakMemory of the devices.
func (md *MultiDevice) PeakMemory() int64 {
	var peak int64
	md.limiters(func(l MemoryLimiter) error { peak = max(peak, l.PeakMemory()); return nil })
	return peak
}

// FreeMemory is the sum of the devices' FreeMemory: what a point set
// split over them may take (two shares on one GPU count it twice).
func (md *MultiDevice) FreeMemory() (int64, bool) {
	var free int64
	known := false
	md.limiters(func(l MemoryLimiter) error {
		if f, ok := l.FreeMemory(); ok {
			free, known = free+f, true
		}
		return nil
	})
	return free, known
}

// limiters calls f on every distinct device that is a MemoryLimiter.
func (md *MultiDevice) limiters(f func(MemoryLimiter) error) error {
	seen := map[Device]bool{}
	for _, d := range md.devs {
		if l, ok := d.(MemoryLimiter); ok && !seen[d] {
			seen[d] = true
			if err := f(l); err != nil {
				return err
			}
		}
	}
	return nil
}

// Load splits p over the devices and loads every share, at once.
func (md *MultiDevice) Load(p Points) (Dataset, error) {
	if p.Dim < 1 || p.N < 1 || len(p.Data) != p.N*p.Dim {
		return nil, fmt.Errorf("device: %d values do not make %d points of dimension %d", len(p.Data), p.N, p.Dim)
	}
	if len(md.devs) == 0 {
		return nil, errors.New("device: Multi with no devices")
	}
	sizes := md.split(p.N, len(md.devs))
	total := 0
	for _, s := range sizes {
		if s < 0 {
			total = -1
			break
		}
		total += s
	}
	if len(sizes) != len(md.devs) || total != p.N {
		return nil, fmt.Errorf("device: split %v of %d points over %d devices", sizes, p.N, len(md.devs))
	}
	s := &multiSet{pts: p}
	var devs []ShardDevice
	var names []string
	lo := 0
	for i, d := range md.devs {
		if sizes[i] == 0 {
			continue
		}
		sd, ok := d.(ShardDevice)
		if !ok {
			return nil, fmt.Errorf("device: %s cannot hold a share of a split point set", d.Name())
		}
		devs = append(devs, sd)
		names = append(names, d.Name())
		s.devs = append(s.devs, i)
		s.lo = append(s.lo, lo)
		lo += sizes[i]
	}
	s.lo = append(s.lo, p.N)
	s.shards = make([]Shard, len(devs))
	s.names, s.reduced = names, make([]time.Duration, len(devs))
	err := s.each(func(i int, _ Shard) error {
		var err error
		s.shards[i], err = devs[i].LoadShard(p, s.lo[i], s.lo[i+1])
		return err
	})
	if err == nil {
		for _, sh := range s.shards {
			if err = sh.Link(s.shards); err != nil {
				break
			}
		}
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	if s.encoders() {
		return &encodingSet{s}, nil
	}
	return s, nil
}

// multiSet is a point set split over shards: shard i holds rows lo[i] to
// lo[i+1]-1.
type multiSet struct {
	pts    Points
	shards []Shard
	lo     []int
	m      int
	last   ShardSums // the total of the last pass
	// For SplitReport: device names, the passes, each shard's time in
	// Reduce, and the time from the Reduces' end to the Applies' end.
	names   []string
	passes  int
	reduced []time.Duration
	combine time.Duration
	devs    []int // the device of each shard: its place in Multi's list
	// encoded is each share's part of the last encode (multiencode.go).
	encoded []ShareTime
}

// SplitReport says what the set did since it was loaded.
func (s *multiSet) SplitReport() SplitReport {
	r := SplitReport{Passes: s.passes, Combine: s.combine}
	for i, sh := range s.shards {
		sr := ShareReport{Device: s.names[i], Rows: s.lo[i+1] - s.lo[i], Reduce: s.reduced[i]}
		if ex, ok := sh.(Exchanger); ok {
			r.ExchangeBytes, sr.Exchange, r.ExchangePath = ex.Exchanged()
		}
		r.Shares = append(r.Shares, sr)
	}
	return r
}

var (
	_ Dataset        = (*multiSet)(nil)
	_ PlusPlusDrawer = (*multiSet)(nil)
)

// Shards returns the shards, in share order: for tests and tools that
// look at one backend's shares.
func (s *multiSet) Shards() []Shard { return s.shards }

// each runs f on every shard, at once when there are several, and
// returns the error of the first shard that failed.
func (s *multiSet) each(f func(i int, sh Shard) error) error {
	errs := make([]error, len(s.shards))
	if len(s.shards) == 1 {
		errs[0] = f(0, s.shards[0])
	} else {
		var wg sync.WaitGroup
		for i, sh := range s.shards {
			wg.Go(func() { errs[i] = f(i, sh) })
		}
		wg.Wait()
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *multiSet) SetAnchors(anchors []float32, m int) error {
	if m != s.m {
		s.last = nil
	}
	if err := s.each(func(_ int, sh Shard) error { return sh.SetAnchors(anchors, m) }); err != nil {
		return err
	}
	s.m = m
	return nil
}

// maxRounds bounds the rounds of one pass: cuda reduces at most twice.
const maxRounds = 4

func (s *multiSet) pass(p StepParams, move bool) (StepStats, error) {
	if s.m == 0 {
		return StepStats{}, errors.New("device: Step before SetAnchors")
	}
	s.last = nil
	var total ShardSums
	var combine time.Time // the end of the last round's Reduces
	for round := 0; ; round++ {
		if round == maxRounds {
			return StepStats{}, fmt.Errorf("device: the shards asked to reduce again %d times", round)
		}
		again := total
		if err := s.each(func(i int, sh Shard) error {
			start := time.Now()
			err := sh.Reduce(p, move, again)
			s.reduced[i] += time.Since(start)
			return err
		}); err != nil {
			return StepStats{}, err
		}
		combine = time.Now()
		total = nil
		for _, sh := range s.shards {
			var err error
			if total, err = sh.Fold(total); err != nil {
				return StepStats{}, err
			}
		}
		if !total.Again() {
			break
		}
	}
	if err := s.each(func(_ int, sh Shard) error { return sh.Apply(p, move, total) }); err != nil {
		return StepStats{}, err
	}
	s.last = total
	s.passes++
	s.combine += time.Since(combine)
	return total.StepStats(), nil
}

func (s *multiSet) Step(p StepParams) (StepStats, error) { return s.pass(p, true) }

func (s *multiSet) Assign() (StepStats, error) { return s.pass(StepParams{}, false) }

// Anchors reads them from the first shard: every shard has the same.
func (s *multiSet) Anchors(dst []float32) error { return s.shards[0].Anchors(dst) }

func (s *multiSet) Stats(counts []int64, variance []float32) error {
	if s.m == 0 {
		return errors.New("device: Stats before SetAnchors")
	}
	if s.last == nil { // no pass since the anchors (and their number) changed
		clear(counts)
		clear(variance)
		return nil
	}
	return s.last.Stats(counts, variance)
}

func (s *multiSet) Assignments(dst []int32) error {
	if len(dst) < s.pts.N {
		return fmt.Errorf("device: %d assignments for %d points", len(dst), s.pts.N)
	}
	return s.each(func(i int, sh Shard) error { return sh.Assignments(dst[s.lo[i]:s.lo[i+1]]) })
}

func (s *multiSet) Transfer() (toDevice, toHost int64) {
	for _, sh := range s.shards {
		up, down := sh.Transfer()
		toDevice += up
		toHost += down
	}
	return toDevice, toHost
}

func (s *multiSet) Close() error {
	errs := make([]error, len(s.shards))
	var wg sync.WaitGroup
	for i, sh := range s.shards {
		if sh != nil {
			wg.Go(func() { errs[i] = sh.Close() })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// DrawPlusPlus runs k-means++ on the first shard when it can
// (PlusPlusDrawer; it reads the sample's rows from the whole set), else on
// the host: the same picks either way.
func (s *multiSet) DrawPlusPlus(rows []int, first int, u []float64, fallback []int) ([]int, error) {
	if dr, ok := s.shards[0].(PlusPlusDrawer); ok {
		return dr.DrawPlusPlus(rows, first, u, fallback)
	}
	dist := make([]float32, len(rows))
	return kmeans.PlusPlusRounds(first, u, fallback, dist, kmeans.HostDistances(s.pts.Data, s.pts.Dim, rows, dist))
}
