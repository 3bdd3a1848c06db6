// Package device is the seam between vlc and its compute backends (cpu,
// cuda, webgpu): what a backend does to learn anchors with the points
// resident on it (Device, Dataset, and the optional PlusPlusDrawer and
// MemoryLimiter), to write the rotated code there (RotatedEncoder), and to
// search an index in its own memory (Searcher); the registry through which
// the library and the command pick one by name; and Multi and
// SplitSearch, which split training and search over several devices. It imports no other vlc package but
// internal helpers, so that anneal, quant, index and every backend import
// it and none of them imports another.
package device

import "github.com/vlc-embed/vlc/internal/errs"

// ErrNonFinite: a point or anchor value is an Inf or NaN.
var ErrNonFinite = errs.New(errs.ErrArgument, "value not finite")

// Points is a row-major set of n float16 vectors (IEEE binary16 bit
// patterns). The values must be finite: a backend may refuse others with
// ErrNonFinite (CUDA does, as its fixed-point sums need a bound), and
// training on them is undefined on any backend.
type Points struct {
	Data []uint16
	N    int
	Dim  int
}

// Device is what every backend provides: training's steps, with the
// points resident. Points go to it once; each iteration of anneal's loop
// moves only a few scalars back, and maintenance moves anchors and their
// statistics (m x dim, small) every few iterations. A backend may offer
// more through the optional interfaces (MemoryLimiter, Searcher on the
// Device; PlusPlusDrawer, RotatedEncoder on its Datasets).
type Device interface {
	// Name says which backend and hardware this is, for logs and summaries.
	Name() string
	// Load places the points on the device for the life of the Dataset.
	Load(p Points) (Dataset, error)
	Close() error
}

// Dataset is a point set resident on a device, with the anchors, the
// assignments and the per-anchor statistics kept beside it.
type Dataset interface {
	// SetAnchors replaces the m anchors (m*dim float32, row-major), which
	// must be finite, as the points (ErrNonFinite).
	SetAnchors(anchors []float32, m int) error
	// Step assigns every point to its nearest anchor, reduces each anchor's
	// points to a robust mean, count and per-dimension variance, and moves
	// the anchors as p says. The returned statistics describe the assign.
	Step(p StepParams) (StepStats, error)
	// Assign assigns and gathers the statistics Stats reports, without
	// moving the anchors: the final pass after training, whose assignments
	// the encoder uses.
	Assign() (StepStats, error)
	// Anchors copies the current anchors into dst (m*dim).
	Anchors(dst []float32) error
	// Stats copies the statistics of the last Step or Assign into counts (m) and
	// variance (m*dim): the number of points assigned to each anchor and
	// the mean of (x_j - a_j)^2 over them, a being the anchor they were
	// assigned to. Anchors without points have zero variance.
	Stats(counts []int64, variance []float32) error
	// Assignments copies the anchor of every point, from the last Step or
	// Assign, into dst (n).
	Assignments(dst []int32) error
	// Transfer reports the bytes moved between host and device so far;
	// host-only backends report zeros.
	Transfer() (toDevice, toHost int64)
	Close() error
}

// PlusPlusDrawer is implemented by datasets that run all of k-means++'s
// rounds where the points are (backend/cuda): each round's distances, block
// sums and D^2 draw in the host's arithmetic (kmeans.PlusPlusRounds), so the
// picks are the host's, without a round trip a round.
type PlusPlusDrawer interface {
	// DrawPlusPlus returns the positions in rows picked by rounds 1 to
	// len(u) from the first centre rows[first], as kmeans.PlusPlusRounds does.
	DrawPlusPlus(rows []int, first int, u []float64, fallback []int) ([]int, error)
}

// StepParams sets how far one Step moves the anchors. With Tau, Rate and
// MaxMove all at their limits (+Inf, 1, +Inf) a Step is one Lloyd iteration.
type StepParams struct {
	// Tau is the Huber threshold: a point at Euclidean distance r from its
	// anchor has weight min(1, Tau/r) in the anchor's mean. +Inf gives the
	// plain mean.
	Tau float32
	// Rate is the fraction of the way each anchor moves toward its robust
	// mean, in (0, 1].
	Rate float32
	// MaxMove caps the Euclidean length of each anchor's move. +Inf: no cap.
	MaxMove float32
}

// StepStats are the scalars a Step or Assign brings back from the device.
type StepStats struct {
	// Energy is the mean squared Euclidean distance of the points to the
	// anchors they were assigned to (before the update).
	Energy float64
	// Changed counts the points whose anchor differs from the previous
	// assignment (all points on the first assign).
	Changed int
}

// MemoryLimiter is implemented by devices whose memory use can be capped
// (backend/cuda): datasets are sized to fit within the cap, points beyond it
// streaming through in batches, as they do when they outgrow the device.
type MemoryLimiter interface {
	// SetMemoryLimit caps the memory the device's datasets use, in
	// bytes (0: none), and restarts PeakMemory's count.
	SetMemoryLimit(bytes int64) error
	// PeakMemory is the most memory in use since the device opened or
	// the last SetMemoryLimit, in bytes.
	PeakMemory() int64
	// FreeMemory is what a dataset may take now (free, within the cap),
	// in bytes; false where no device underneath reports it.
	FreeMemory() (int64, bool)
}
