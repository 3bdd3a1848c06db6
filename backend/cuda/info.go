package cuda

// Info describes the GPU a Device runs on.
type Info struct {
	Name      string // as the driver names it, e.g. "NVIDIA H100 80GB HBM3"
	TotalMem  int64  // bytes
	FreeMem   int64  // bytes free when the Device opened
	SMs       int    // multiprocessors
	CCMajor   int    // compute capability
	CCMinor   int
	PTXSource string // "embedded", "embedded sm_90a" (Hopper) or the file named by VLC_CUDA_PTX
}

// KernelTimes is where the device time of one Step or Assign went, in
// milliseconds, measured with CUDA events (see Profiler.SetTiming).
type KernelTimes struct {
	Assign   float64 // fused tensor-core assign
	Finalize float64 // keys to assignments, changed count, statistics zeroed
	Reduce   float64 // distances, energy, Huber-weighted sums, counts, squares
	Update   float64 // anchor move and float16 copy (zero for Assign)
}

// Profiler is implemented by the Datasets of this backend: test-cuda and
// benchmarks use it to split the time of a Step and to time the fused
// assign alone.
type Profiler interface {
	// SetTiming records CUDA events around each kernel of the following
	// Steps and Assigns; LastTimes reports the last one.
	SetTiming(on bool)
	LastTimes() KernelTimes
	// TimeAssign runs the assign kernel variant (one of Variants; ""
	// for the default) reps times and returns each run's time in ms. It
	// changes no assignment or statistic.
	TimeAssign(variant string, reps int) ([]float64, error)
	// AssignVariant is the variant Steps use.
	AssignVariant() string
	// Variants names the assign variants this device's PTX has.
	Variants() []string
}
