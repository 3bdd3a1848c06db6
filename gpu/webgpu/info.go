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
