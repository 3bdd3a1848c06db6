// Package cuda is the NVIDIA backend (build tag cuda): the driver API
// (libcuda.so.1) bound at run time with purego, so that neither cgo nor the
// CUDA headers are needed to build; float16 points resident on the device;
// a fused tensor-core assign whose n x m distance matrix never reaches
// memory. Built without the tag, Open says so and nothing registers.
//
// Semantics against the reference backend (package cpu), per point:
// the argmin runs on |a16|^2 - 2 x.a16 with a16 the anchor rounded to
// float16 (the tensor cores multiply float16 by float16, accumulating in
// float32), ties to the lowest anchor index; so an assignment can differ
// from the CPU's where two anchors are within the float16 rounding of the
// anchors of each other (a near-tie, see internal/parity.NearTie). Distances, energy and the
// Huber weights are then recomputed against the float32 anchor as
// sum (x_j - a_j)^2 in float32. Per-anchor sums are 64-bit fixed point
// (fixed.go), so the anchors, statistics and energies are the same bits
// from run to run.
//
// docs/CUDA.md describes the buffers, the kernels and what crosses the bus,
// with measured numbers.
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
	// TimeAssign runs the assign kernel variant (one of AssignVariants; ""
	// for the default) reps times and returns each run's time in ms. It
	// changes no assignment or statistic.
	TimeAssign(variant string, reps int) ([]float64, error)
	// AssignVariant is the variant Steps use.
	AssignVariant() string
	// Variants names the assign variants this device's PTX has.
	Variants() []string
}

// kernelNames are the entry points the Go side launches; the PTX test
// checks that the committed PTX defines each.
var kernelNames = []string{"vlc_finalize", "vlc_reduce", "vlc_update", "vlc_rot_sumsq", "vlc_rot_encode", "vlc_pp_gather", "vlc_pp_dist",
	"vlc_pp_blocksums", "vlc_pp_draw", "vlc_hist", "vlc_scan", "vlc_scatter", "vlc_reduce_runs1", "vlc_reduce_runs2", "vlc_reduce_runs3", "vlc_reduce_runs4"}

func init() {
	for _, v := range assignVariants {
		if !v.hopper {
			kernelNames = append(kernelNames, "vlc_assign_"+v.name)
		}
	}
}

// assignVariant is one tile shape of the fused assign: 128 points x bn
// anchors per block (8 warps, warp tile 64 x bn/4), bk float16 values of
// the dimension per pipeline stage, stages stages (cp.async).
type assignVariant struct {
	name             string
	bn, bk, stages   int
	blocksPerSMGuess int  // for choosing how to split small problems
	hopper           bool // wgmma: only in the sm_90a PTX (kernels_sm90.cu)
	// tma: stages come by the bulk tensor copy engine, described by two
	// tensor maps (points, anchors) that lead the kernel's parameters; a
	// producer warpgroup beside the 8 consuming warps.
	tma bool
}

// smem is the dynamic shared memory the variant needs (the Hopper
// variants 1 KiB more, to align their stages to the 1024 bytes the
// 128-byte swizzle needs).
func (v assignVariant) smem() int {
	s := v.stages * (128 + v.bn) * v.bk * 2
	if v.hopper {
		s += 1024
	}
	return s
}

// threads is the block size: 8 warps, and a producer warpgroup with tma.
func (v assignVariant) threads() int {
	if v.tma {
		return 384
	}
	return 256
}

// assignVariants must match the ASSIGN_VARIANT lines of kernels.cu and
// the wgmma kernels of kernels_sm90.cu.
var assignVariants = []assignVariant{
	{"bn128", 128, 32, 4, 2, false, false},
	{"bn256", 256, 32, 3, 1, false, false},
	{"bn128k64", 128, 64, 3, 2, false, false},
	{"bn256k64", 256, 64, 3, 1, false, false},
	{"bn256k64s4", 256, 64, 4, 1, false, false},
	{"wgmma", 256, 64, 3, 1, true, false},
	{"tma", 256, 64, 4, 1, true, true},
}

// AssignVariants names the fused-assign tile shapes of both PTX files
// (wgmma and tma only on Hopper: Profiler.Variants says what a device has).
func AssignVariants() []string {
	var names []string
	for _, v := range assignVariants {
		names = append(names, v.name)
	}
	return names
}
