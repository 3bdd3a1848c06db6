package webgpu

// Info describes the adapter a Device runs on.
type Info struct {
	Name    string // the adapter's name, or its driver's description when it has none
	Driver  string // driver description
	Backend string // vulkan, metal, d3d12, ...
	Type    string // discrete-gpu, integrated-gpu, cpu, ...
	// MaxBinding is the largest storage binding the device was given (the
	// adapter's maxStorageBufferBindingSize): point sets are split into
	// chunks under it.
	MaxBinding uint64
	MaxBuffer  uint64 // the device's maxBufferSize
	// AdapterMaxBuffer is the adapter's maxBufferSize as reported.
	AdapterMaxBuffer uint64
}

// Profiler is implemented by the Datasets of this backend: test-webgpu uses
// it to time the assign kernel alone.
type Profiler interface {
	// TimeAssign runs the assign kernel over every chunk reps times, one
	// submission each, and returns the wall-clock milliseconds of each
	// (submission and wait included). The assignments it leaves are those
	// of the current anchors; counts are reset, so the next Step is
	// unaffected.
	TimeAssign(reps int) ([]float64, error)
	// Tile names the assign shape Steps use.
	Tile() string
}

// SearchProfiler is implemented by the resident indexes this backend's
// UploadIndex returns (device.Resident): benchmarks use it to time the
// search kernels one by one. (An index.DeviceIndex does not expose its
// Resident; wrap the Device in a device.Searcher that keeps what
// UploadIndex returns, as BenchmarkSearch does.)
type SearchProfiler interface {
	// ProfileSearch runs the first batch of a search of nq prepared
	// queries (as Resident.Search takes them) reps times: once as Search
	// runs it (one submission per round), timed whole, and once with
	// every kernel in a submission of its own, each waited for. It
	// returns the medians, in milliseconds of wall clock (submission and
	// wait included).
	ProfileSearch(queries []float32, nq, nprobe, keep, reps int) (SearchTimes, error)
}

// SearchTimes is what ProfileSearch measured.
type SearchTimes struct {
	Batch  int // queries in the batch timed
	Rounds int // rounds of candidates per query (1 unless they exceed the budget)
	// Stages: upload (the queries), rotate, coarse, probe, score, topk
	// (summed over rounds), read (the copy to the read-back buffer, its
	// map and copy to the host).
	Stages []StageTime
	// Batched is the same batch as Search runs it.
	Batched float64
}

// StageTime is one stage's median time.
type StageTime struct {
	Name string
	Ms   float64
}
