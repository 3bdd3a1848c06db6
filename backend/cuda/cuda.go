//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/enctrace"
)

// Device is one CUDA GPU (device 0 unless OpenDevices) with its primary context and the
// kernels' module loaded. Every driver call runs on the Device's worker
// thread; a Device and its Datasets may be used from any goroutine, one
// call at a time.
type Device struct {
	drv     *driver
	w       *worker
	ordinal int // the device's number, as the driver counts them
	dev     int32
	ctx     uintptr
	mod     uintptr
	smod    uintptr // the search kernels' module, loaded on first use (search.go)
	cmod    uintptr // the pq and sq8 search kernels' module, likewise (search_codes.go)
	gmod    uintptr // the graph build's kernels' module, likewise (graph_rows.go)
	// smemOptin is the most shared memory a block may have, static and
	// dynamic together, after an opt-in.
	smemOptin int
	smemSM    int // the shared memory of a multiprocessor, all its blocks together
	fn        map[string]uintptr
	info      Info
	variant   assignVariant   // the one Steps use
	variants  []assignVariant // those this device's PTX has
	hopper    bool            // the sm_90a PTX is loaded
	// batchRows, when positive, caps the rows kept on the device (the
	// points then stream through in batches of that many): from
	// VLC_CUDA_BATCH_ROWS, for tests and measurements. Zero: every point
	// resident when they fit, batches sized from free memory when not.
	batchRows int
	// limit caps the device memory this Device uses (SetMemoryLimit; 0:
	// what is free); base is the free memory when the count began, peak
	// the most used since (bytes). On the worker.
	limit, base, peak int64
	// stage is page-locked host memory for large copies, up (in two
	// halves) and back (on the worker; allocated on first use).
	stage []byte
	// pinned is page-locked host memory handed out for queries
	// (HostBuffer, search.go), kept for reuse; under pinMu.
	pinMu  sync.Mutex
	pinned []*pinnedBuf
	// encodePerSM is the number of encoding threads per SM
	// (VLC_CUDA_ENCODE_THREADS, default encodeThreads).
	encodePerSM int
	// encodeRuns is VLC_CUDA_ENCODE_RUNS (0: encodeRuns).
	encodeRuns int
	la         *launchArgs
	jitLog     []byte
	name       [256]byte

	mu     sync.Mutex
	closed bool
}

var _ device.Device = (*Device)(nil)

// launchArgs holds kernel parameters for cuLaunchKernel, which takes an
// array of pointers to the values. It lives on the heap for the Device's
// life (the Go heap does not move), and only the worker touches it.
type launchArgs struct {
	vals [32]uint64
	ptrs [32]uintptr
	// A launch whose first two parameters are tensor maps: mptrs point at
	// the maps (copied into maps, 64-byte aligned as CUtensorMap is), then
	// at vals.
	maps    [2*16 + 8]uint64
	mapBase int // index in maps of the first 64-byte aligned word
	mptrs   [34]uintptr
}

// Open starts the CUDA backend on device 0. Without a driver the error
// starts with "no CUDA driver:", and the registry's "auto" moves on to
// the next backend.
func Open() (device.Device, error) {
	d, err := open()
	if err != nil {
		return nil, err
	}
	return d, nil
}

// OpenDevices opens the devices with these numbers (nil: every device the
// driver sees), one Device each, in order, for device.Multi. A number given
// twice opens a second Device on the same GPU (its own worker thread,
// kernels and buffers, the GPU's primary context shared): two shares on
// one GPU, which tests the split path without a second GPU. A number the
// driver does not have is an error that names it.
func OpenDevices(ordinals []int) ([]device.Device, error) {
	if ordinals == nil {
		_, count, err := loadDevices()
		if err != nil {
			return nil, err
		}
		for o := range count {
			ordinals = append(ordinals, o)
		}
	}
	// Each opens on a goroutine of its own: a context and the module's
	// JIT take a few hundred milliseconds a GPU, and the driver takes
	// them for several GPUs at once.
	opened := make([]*Device, len(ordinals))
	errs := make([]error, len(ordinals))
	var wg sync.WaitGroup
	for i, o := range ordinals {
		wg.Go(func() { opened[i], errs[i] = openOrdinal(o) })
	}
	wg.Wait()
	devs := make([]device.Device, 0, len(opened))
	for i, d := range opened {
		if errs[i] == nil {
			devs = append(devs, d)
		}
	}
	if err := errors.Join(errs...); err != nil {
		closeAll(devs)
		return nil, err
	}
	return devs, nil
}

// closeAll closes devs at once, each on a goroutine of its own.
func closeAll(devs []device.Device) {
	var wg sync.WaitGroup
	for _, d := range devs {
		wg.Go(func() { d.Close() })
	}
	wg.Wait()
}

// loadDevices loads the driver and counts the devices it sees.
func loadDevices() (*driver, int, error) {
	dr, err := loadDriver()
	if err != nil {
		return nil, 0, err
	}
	count, err := deviceCount(dr)
	return dr, count, err
}

// deviceCount is the number of devices the driver sees, at least one.
func deviceCount(dr *driver) (int, error) {
	var count int32
	if err := dr.call("cuDeviceGetCount", dr.cuDeviceGetCount, uintptr(unsafe.Pointer(&count))); err != nil {
		return 0, fmt.Errorf("no CUDA device: %w", err)
	}
	if count < 1 {
		return 0, errors.New("no CUDA device: the driver sees none")
	}
	return int(count), nil
}

// defaultVariant is the assign tile shape Steps use unless VLC_CUDA_ASSIGN
// names another: the fastest on 1M x 768 x 4096 in docs/CUDA.md, tma
// where the GPU has it.
const (
	defaultVariant       = "bn256k64s4"
	defaultHopperVariant = "tma"
)

// smem is the dynamic shared memory the variant needs (the Hopper
// variants 1 KiB more, to align their stages to the 1024 bytes the
// 128-byte swizzle needs).
func (v assignVariant) smem() int {
	s := v.stages * (tileM + v.bn) * v.bk * 2
	if v.hopper {
		s += 1024
	}
	return s
}

// variantNames lists the assign variants this device has.
func (d *Device) variantNames() []string {
	var out []string
	for _, v := range d.variants {
		out = append(out, v.name)
	}
	return out
}

// variantNamed finds an assign variant this device has.
func (d *Device) variantNamed(name string) (assignVariant, bool) {
	for _, v := range d.variants {
		if v.name == name {
			return v, true
		}
	}
	return assignVariant{}, false
}

func open() (*Device, error) { return openOrdinal(0) }

// openOrdinal opens device number ordinal.
func openOrdinal(ordinal int) (*Device, error) {
	start := time.Now()
	dr, count, err := loadDevices()
	enctrace.Printf("device trace: device %d: driver loaded in %v\n", ordinal, time.Since(start).Round(time.Millisecond))
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= count {
		return nil, fmt.Errorf("no CUDA device %d: the driver sees %d (0 to %d)", ordinal, count, count-1)
	}
	ptx, src := kernelsPTX, "embedded"
	if p := os.Getenv("VLC_CUDA_PTX"); p != "" {
		if ptx, err = os.ReadFile(p); err != nil {
			return nil, fmt.Errorf("cuda: VLC_CUDA_PTX: %w", err)
		}
		src = p
	}
	d := &Device{drv: dr, w: startWorker(), ordinal: ordinal, la: &launchArgs{}, jitLog: make([]byte, 1<<14), fn: map[string]uintptr{}}
	for i := range d.la.ptrs {
		d.la.ptrs[i] = uintptr(unsafe.Pointer(&d.la.vals[i]))
		d.la.mptrs[2+i] = d.la.ptrs[i]
	}
	d.la.mapBase = int((64 - uintptr(unsafe.Pointer(&d.la.maps[0]))%64) % 64 / 8)
	for i := range 2 {
		d.la.mptrs[i] = uintptr(unsafe.Pointer(&d.la.maps[d.la.mapBase+16*i]))
	}
	if v := os.Getenv("VLC_CUDA_BATCH_ROWS"); v != "" {
		r, err := strconv.Atoi(v)
		if err != nil || r < 1 {
			d.w.stop()
			return nil, fmt.Errorf("cuda: VLC_CUDA_BATCH_ROWS=%q: want a positive number of rows", v)
		}
		d.batchRows = r
	}
	d.encodePerSM = encodeThreads
	if v := os.Getenv("VLC_CUDA_ENCODE_THREADS"); v != "" {
		r, err := strconv.Atoi(v)
		if err != nil || r < 32 || r > 2048 {
			d.w.stop()
			return nil, fmt.Errorf("cuda: VLC_CUDA_ENCODE_THREADS=%q: want 32 to 2048 threads per SM", v)
		}
		d.encodePerSM = r
	}
	if v := os.Getenv("VLC_CUDA_ENCODE_RUNS"); v != "" {
		r, err := strconv.Atoi(v)
		if err != nil || r < 1 || r > 4096 {
			d.w.stop()
			return nil, fmt.Errorf("cuda: VLC_CUDA_ENCODE_RUNS=%q: want 1 to 4096 runs", v)
		}
		d.encodeRuns = r
	}
	err = d.w.do(func() error { return d.init(ptx, src) })
	if err != nil {
		d.w.stop()
		return nil, err
	}
	name := defaultVariant
	if d.hopper {
		name = defaultHopperVariant
		if _, ok := d.variantNamed(name); !ok {
			name = "wgmma" // no cuTensorMapEncodeTiled (unlikely: drivers that load this PTX have it)
		}
	}
	if v := os.Getenv("VLC_CUDA_ASSIGN"); v != "" {
		name = v
	}
	var ok bool
	if d.variant, ok = d.variantNamed(name); !ok {
		d.Close()
		return nil, fmt.Errorf("cuda: VLC_CUDA_ASSIGN=%q: want one of %s", name, strings.Join(d.variantNames(), ", "))
	}
	return d, nil
}

// init runs on the worker: context, device facts, module, functions.
func (d *Device) init(ptx []byte, src string) error {
	dr := d.drv
	start := time.Now()
	if err := dr.call("cuDeviceGet", dr.cuDeviceGet, uintptr(unsafe.Pointer(&d.dev)), uintptr(d.ordinal)); err != nil {
		return err
	}
	if err := dr.call("cuDevicePrimaryCtxRetain", dr.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&d.ctx)), uintptr(d.dev)); err != nil {
		return err
	}
	if err := dr.call("cuCtxSetCurrent", dr.cuCtxSetCurrent, d.ctx); err != nil {
		d.releaseCtx()
		return err
	}
	if err := dr.call("cuDeviceGetName", dr.cuDeviceGetName, uintptr(unsafe.Pointer(&d.name[0])), uintptr(len(d.name)-1), uintptr(d.dev)); err != nil {
		d.releaseCtx()
		return err
	}
	d.info.Name = cString(&d.name[0])
	var total, free uint64
	if err := dr.call("cuDeviceTotalMem", dr.cuDeviceTotalMem, uintptr(unsafe.Pointer(&total)), uintptr(d.dev)); err != nil {
		d.releaseCtx()
		return err
	}
	if err := dr.call("cuMemGetInfo", dr.cuMemGetInfo, uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total))); err != nil {
		d.releaseCtx()
		return err
	}
	d.info.TotalMem, d.info.FreeMem = int64(total), int64(free)
	d.base = int64(free)
	attr := func(a int) (int, error) {
		var v int32
		err := dr.call("cuDeviceGetAttribute", dr.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(d.dev))
		return int(v), err
	}
	var err error
	for _, a := range []struct {
		p    *int
		attr int
	}{{&d.info.SMs, cuAttrSMCount}, {&d.info.CCMajor, cuAttrCCMajor}, {&d.info.CCMinor, cuAttrCCMinor}, {&d.smemOptin, cuAttrSmemOptin}, {&d.smemSM, cuAttrSmemSM}} {
		if *a.p, err = attr(a.attr); err != nil {
			d.releaseCtx()
			return err
		}
	}
	// Hopper (9.0) gets the sm_90a PTX, which adds the wgmma assign,
	// unless VLC_CUDA_PTX named a file (which may be either).
	if src == "embedded" && d.info.CCMajor == 9 && d.info.CCMinor == 0 {
		ptx, src = kernelsSM90PTX, "embedded sm_90a"
	}
	d.hopper = strings.Contains(string(ptx), ".target sm_90a")
	d.info.PTXSource = src
	if d.info.CCMajor < 8 {
		d.releaseCtx()
		return fmt.Errorf("cuda: %s has compute capability %d.%d; the kernels need 8.0 (Ampere) or newer", d.info.Name, d.info.CCMajor, d.info.CCMinor)
	}

	// The PTX is compiled for this GPU here (the driver caches the result).
	ctxDone := time.Now()
	image := append(append([]byte(nil), ptx...), 0)
	opts := []int32{cuJitErrorLogBuffer, cuJitErrorLogBufSize}
	vals := []uintptr{uintptr(unsafe.Pointer(&d.jitLog[0])), uintptr(len(d.jitLog))}
	if err := dr.call("cuModuleLoadDataEx", dr.cuModuleLoadDataEx, uintptr(unsafe.Pointer(&d.mod)), uintptr(unsafe.Pointer(&image[0])),
		uintptr(len(opts)), uintptr(unsafe.Pointer(&opts[0])), uintptr(unsafe.Pointer(&vals[0]))); err != nil {
		d.releaseCtx()
		if log := strings.TrimSpace(cString(&d.jitLog[0])); log != "" {
			return fmt.Errorf("%w; JIT log: %s", err, log)
		}
		return err
	}
	modDone := time.Now()
	defer func() {
		enctrace.Printf("device trace: device %d: context %v, module (%s) %v, functions %v\n", d.ordinal,
			ctxDone.Sub(start).Round(time.Millisecond), src, modDone.Sub(ctxDone).Round(time.Millisecond), time.Since(modDone).Round(time.Millisecond))
	}()
	d.variants = d.variants[:0]
	names := kernelNames
	for _, v := range assignVariants {
		if v.tma && dr.cuTensorMapEncodeTiled == 0 {
			continue
		}
		if v.hopper && d.hopper {
			names = append(names[:len(names):len(names)], "vlc_assign_"+v.name)
		}
		if !v.hopper || d.hopper {
			d.variants = append(d.variants, v)
		}
	}
	for _, name := range names {
		var f uintptr
		cname := append([]byte(name), 0)
		if err := dr.call("cuModuleGetFunction", dr.cuModuleGetFunction, uintptr(unsafe.Pointer(&f)), d.mod, uintptr(unsafe.Pointer(&cname[0]))); err != nil {
			d.unload()
			return fmt.Errorf("%w (kernel %s: is the PTX stale? run make ptx)", err, name)
		}
		d.fn[name] = f
	}
	for _, v := range d.variants {
		// Static shared memory (1 KiB of row keys, 64 bytes of mbarriers)
		// comes on top.
		if need := v.smem() + 1024 + 64; need > d.smemOptin {
			d.unload()
			return fmt.Errorf("cuda: assign variant %s needs %d bytes of shared memory, %s allows %d", v.name, need, d.info.Name, d.smemOptin)
		}
		if err := dr.call("cuFuncSetAttribute", dr.cuFuncSetAttribute, d.fn["vlc_assign_"+v.name], cuFuncMaxDynSmem, uintptr(v.smem())); err != nil {
			d.unload()
			return err
		}
	}
	return nil
}

func (d *Device) unload() {
	if d.gmod != 0 {
		d.drv.call("cuModuleUnload", d.drv.cuModuleUnload, d.gmod)
		d.gmod = 0
	}
	if d.cmod != 0 {
		d.drv.call("cuModuleUnload", d.drv.cuModuleUnload, d.cmod)
		d.cmod = 0
	}
	if d.smod != 0 {
		d.drv.call("cuModuleUnload", d.drv.cuModuleUnload, d.smod)
		d.smod = 0
	}
	if d.mod != 0 {
		d.drv.call("cuModuleUnload", d.drv.cuModuleUnload, d.mod)
		d.mod = 0
	}
	d.releaseCtx()
}

func (d *Device) releaseCtx() {
	if d.ctx != 0 {
		d.drv.call("cuDevicePrimaryCtxRelease", d.drv.cuDevicePrimaryCtxRelease, uintptr(d.dev))
		d.ctx = 0
	}
}

// Name reports the backend and the GPU ("cuda:N (...)" for a device
// other than 0).
func (d *Device) Name() string {
	name := "cuda"
	if d.ordinal != 0 {
		name = fmt.Sprintf("cuda:%d", d.ordinal)
	}
	return fmt.Sprintf("%s (%s, %d SMs, %.0f GiB)", name, d.info.Name, d.info.SMs, float64(d.info.TotalMem)/(1<<30))
}

// Info describes the GPU.
func (d *Device) Info() Info { return d.info }

// Close unloads the kernels and releases the primary context. Datasets
// must be closed first.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	d.w.do(func() error {
		if d.stage != nil {
			d.drv.call("cuMemFreeHost", d.drv.cuMemFreeHost, uintptr(unsafe.Pointer(&d.stage[0])))
			d.stage = nil
		}
		d.pinMu.Lock()
		for _, b := range d.pinned {
			if !b.inUse { // one still lent is left to leak rather than be written after it is freed
				portableBufs.remove(b)
				d.drv.call("cuMemFreeHost", d.drv.cuMemFreeHost, uintptr(unsafe.Pointer(&b.buf[0])))
			}
		}
		d.pinned = nil
		d.pinMu.Unlock()
		d.unload()
		return nil
	})
	d.w.stop()
	return nil
}

// run executes f on the worker unless the Device is closed.
func (d *Device) run(f func() error) error {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return errors.New("cuda: device closed")
	}
	return d.w.do(f)
}

// The helpers below run on the worker.

// stageBytes is the size of the page-locked staging buffer.
const stageBytes = 64 << 20

// staging returns the page-locked staging buffer, allocating it once.
func (d *Device) staging() ([]byte, error) {
	if d.stage == nil {
		var p unsafe.Pointer
		if err := d.drv.call("cuMemAllocHost", d.drv.cuMemAllocHost, uintptr(unsafe.Pointer(&p)), stageBytes); err != nil {
			return nil, err
		}
		d.stage = unsafe.Slice((*byte)(p), stageBytes)
	}
	return d.stage, nil
}

func (d *Device) alloc(bytes int64) (uint64, error) {
	var p uint64
	if bytes < 1 {
		bytes = 1
	}
	if err := d.drv.call("cuMemAlloc", d.drv.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(bytes)); err != nil {
		if errors.Is(err, errOutOfMemory) {
			return 0, fmt.Errorf("cuda: allocating %.1f MiB on %s: %w", float64(bytes)/(1<<20), d.info.Name, err)
		}
		return 0, err
	}
	d.usage() // the peak
	return p, nil
}

func (d *Device) free(p uint64) {
	if p != 0 {
		d.drv.call("cuMemFree", d.drv.cuMemFree, uintptr(p))
	}
}

func (d *Device) htod(dst uint64, src unsafe.Pointer, bytes int64) error {
	if bytes == 0 {
		return nil
	}
	return d.drv.call("cuMemcpyHtoD", d.drv.cuMemcpyHtoD, uintptr(dst), uintptr(src), uintptr(bytes))
}

func (d *Device) dtoh(dst unsafe.Pointer, src uint64, bytes int64) error {
	if bytes == 0 {
		return nil
	}
	return d.drv.call("cuMemcpyDtoH", d.drv.cuMemcpyDtoH, uintptr(dst), uintptr(src), uintptr(bytes))
}

func (d *Device) memset8(dst uint64, v byte, bytes int64) error {
	if bytes == 0 {
		return nil
	}
	return d.drv.call("cuMemsetD8", d.drv.cuMemsetD8, uintptr(dst), uintptr(v), uintptr(bytes))
}

// SetMemoryLimit sizes this Device's datasets and search batches to fit
// in bytes of device memory, counted from the free memory now (the CUDA
// context's own memory is outside it): points beyond it stream through in
// batches, search batches shrink. It sizes; allocations are not refused
// at the cap, so a dataset's anchors and scratch can pass it (the caller
// leaves room for them: vlc's pointMemory). 0 lifts the cap. It also
// restarts PeakMemory's count.
func (d *Device) SetMemoryLimit(bytes int64) error {
	if bytes < 0 {
		return fmt.Errorf("cuda: memory limit %d: want 0 (none) or more bytes", bytes)
	}
	return d.run(func() error {
		free, _, err := d.memInfo()
		d.limit, d.base, d.peak = bytes, free, 0
		return err
	})
}

// FreeMemory reports what a new dataset may take now: the GPU's free
// memory, within SetMemoryLimit's cap.
func (d *Device) FreeMemory() (int64, bool) {
	var free int64
	err := d.run(func() (err error) { free, err = d.usage(); return err })
	return free, err == nil
}

// PeakMemory reports the most device memory in use since the Device
// opened (after its context and kernels) or SetMemoryLimit, measured as
// the GPU's free memory then less its free memory after each allocation:
// other processes', and other Devices' on the same GPU, count too.
func (d *Device) PeakMemory() int64 {
	var peak int64
	d.run(func() error { d.usage(); peak = d.peak; return nil })
	return peak
}

// usage updates the peak and returns the memory a new allocation may
// take: what is free, within the limit (on the worker).
func (d *Device) usage() (avail int64, err error) {
	free, _, err := d.memInfo()
	if err != nil {
		return 0, err
	}
	used := d.base - free
	d.peak = max(d.peak, used)
	if d.limit > 0 {
		return max(0, min(free, d.limit-used)), nil
	}
	return free, nil
}

func (d *Device) memInfo() (free, total int64, err error) {
	var f, t uint64
	err = d.drv.call("cuMemGetInfo", d.drv.cuMemGetInfo, uintptr(unsafe.Pointer(&f)), uintptr(unsafe.Pointer(&t)))
	return int64(f), int64(t), err
}

// launch starts kernel name on the default stream with 32- and 64-bit
// arguments packed by the helpers i32, i64, f32 and device pointers as they
// are.
func (d *Device) launch(name string, gx, gy, block, smem int, args ...uint64) error {
	return d.launchOn(0, name, gx, gy, block, smem, args...)
}

// launchOn is launch on stream (0: the default stream).
func (d *Device) launchOn(stream uintptr, name string, gx, gy, block, smem int, args ...uint64) error {
	if len(args) > len(d.la.vals) {
		return fmt.Errorf("cuda: %s: %d parameters, a launch takes at most %d", name, len(args), len(d.la.vals))
	}
	copy(d.la.vals[:], args)
	return d.drv.call(name, d.drv.cuLaunchKernel, d.fn[name], uintptr(gx), uintptr(gy), 1, uintptr(block), 1, 1,
		uintptr(smem), stream, uintptr(unsafe.Pointer(&d.la.ptrs[0])), 0)
}

// Streams and events for work that overlaps the default stream's (on
// the worker). A stream made by newStream does not wait for the default
// stream, nor it for it: what it reads must be complete (a synchronous
// copy since, say), and the host waits for it by an event.
const (
	cuStreamNonBlocking  = 1 // CU_STREAM_NON_BLOCKING
	cuEventDisableTiming = 2 // CU_EVENT_DISABLE_TIMING
)

func (d *Device) newStream() (uintptr, error) {
	var st uintptr
	err := d.drv.call("cuStreamCreate", d.drv.cuStreamCreate, uintptr(unsafe.Pointer(&st)), cuStreamNonBlocking)
	return st, err
}

func (d *Device) destroyStream(st uintptr) {
	d.drv.call("cuStreamDestroy", d.drv.cuStreamDestroy, st)
}

func (d *Device) newEvent() (uintptr, error) {
	var ev uintptr
	err := d.drv.call("cuEventCreate", d.drv.cuEventCreate, uintptr(unsafe.Pointer(&ev)), cuEventDisableTiming)
	return ev, err
}

func (d *Device) destroyEvent(ev uintptr) {
	d.drv.call("cuEventDestroy", d.drv.cuEventDestroy, ev)
}

func (d *Device) record(ev, stream uintptr) error {
	return d.drv.call("cuEventRecord", d.drv.cuEventRecord, ev, stream)
}

func (d *Device) wait(ev uintptr) error {
	return d.drv.call("cuEventSynchronize", d.drv.cuEventSynchronize, ev)
}

// launchMapped is launch for kernels whose first two parameters are
// tensor maps.
func (d *Device) launchMapped(name string, gx, gy, block, smem int, a, b *tensorMap, args ...uint64) error {
	for i, m := range []*tensorMap{a, b} {
		*(*tensorMap)(unsafe.Pointer(&d.la.maps[d.la.mapBase+16*i])) = *m
	}
	copy(d.la.vals[:], args)
	return d.drv.call(name, d.drv.cuLaunchKernel, d.fn[name], uintptr(gx), uintptr(gy), 1, uintptr(block), 1, 1,
		uintptr(smem), 0, uintptr(unsafe.Pointer(&d.la.mptrs[0])), 0)
}

// tensorMap is a CUtensorMap: 128 bytes the driver fills, opaque here.
type tensorMap [16]uint64

// Arguments of cuTensorMapEncodeTiled (cuda.h's enum values).
const (
	tmapFloat16    = 6 // CU_TENSOR_MAP_DATA_TYPE_FLOAT16
	tmapSwizzle128 = 3 // CU_TENSOR_MAP_SWIZZLE_128B
	tmapL2Promo256 = 3 // CU_TENSOR_MAP_L2_PROMOTION_L2_256B
)

// encodeMap describes a rows x cols float16 matrix at ptr (row-major,
// cols a multiple of 64) to the copy engine in boxes of 64 columns (128
// bytes, swizzled as wgmma reads them) by boxRows rows.
func (d *Device) encodeMap(ptr uint64, cols, rows, boxRows int) (tensorMap, error) {
	var m tensorMap
	dims := [2]uint64{uint64(cols), uint64(rows)}
	strides := [1]uint64{uint64(cols) * 2}
	box := [2]uint32{64, uint32(boxRows)}
	elem := [2]uint32{1, 1}
	err := d.drv.call("cuTensorMapEncodeTiled", d.drv.cuTensorMapEncodeTiled, uintptr(unsafe.Pointer(&m)), tmapFloat16, 2, uintptr(ptr),
		uintptr(unsafe.Pointer(&dims[0])), uintptr(unsafe.Pointer(&strides[0])), uintptr(unsafe.Pointer(&box[0])),
		uintptr(unsafe.Pointer(&elem[0])), 0, tmapSwizzle128, tmapL2Promo256, 0)
	return m, err
}

func i32(v int) uint64     { return uint64(uint32(int32(v))) }
func i64(v int64) uint64   { return uint64(v) }
func f32(v float32) uint64 { return uint64(math.Float32bits(v)) }
func b32(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

func init() {
	device.Register("cuda", device.RankCUDA, func() (device.Device, error) { return Open() })
	device.RegisterDevices("cuda", OpenDevices)
}
