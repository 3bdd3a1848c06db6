//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The CUDA driver API (libcuda.so.1), bound at run time with purego: no
// cgo, no CUDA headers at build time. Versioned entry points are resolved
// by their real names (cuMemAlloc_v2, ...): the unversioned names are the
// CUDA 3.x ABI.

// CUresult values this package names in its own messages.
const (
	cudaSuccess          = 0
	cudaErrOutOfMemory   = 2
	cudaErrPeerEnabled   = 704 // CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
	cuFuncMaxDynSmem     = 8   // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
	cuAttrSMCount        = 16  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
	cuAttrCCMajor        = 75  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
	cuAttrCCMinor        = 76
	cuAttrSmemOptin      = 97 // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
	cuAttrSmemSM         = 81 // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
	cuJitErrorLogBuffer  = 5  // CU_JIT_ERROR_LOG_BUFFER
	cuJitErrorLogBufSize = 6  // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
)

// errOutOfMemory marks allocations the driver refused for want of memory.
var errOutOfMemory = errors.New("out of device memory")

// driver holds the resolved entry points of libcuda.
type driver struct {
	cuInit, cuDeviceGetCount, cuDeviceGet, cuDeviceGetName, cuDeviceTotalMem, cuDeviceGetAttribute uintptr
	cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease, cuCtxSetCurrent, cuCtxSynchronize         uintptr
	cuModuleLoadDataEx, cuModuleUnload, cuModuleGetFunction, cuFuncSetAttribute, cuLaunchKernel    uintptr
	cuMemAlloc, cuMemFree, cuMemcpyHtoD, cuMemcpyDtoH, cuMemsetD8, cuMemGetInfo                    uintptr
	cuGetErrorName, cuEventCreate, cuEventRecord, cuEventSynchronize, cuEventElapsedTime           uintptr
	cuEventDestroy, cuMemAllocHost, cuMemFreeHost                                                  uintptr
	cuStreamCreate, cuStreamDestroy, cuMemcpyHtoDAsync                                             uintptr
	// Peers (a point set split over devices, shard.go).
	cuDeviceCanAccessPeer, cuCtxEnablePeerAccess, cuMemcpyPeerAsync uintptr

	// cuMemHostAlloc is optional: where present, query buffers are
	// page-locked for every context (portable), so that each GPU of a
	// replicated search copies them up directly.
	cuMemHostAlloc uintptr
	// cuTensorMapEncodeTiled (CUDA 12.0 and later) is optional: without it
	// the tma assign variant is not offered.
	cuTensorMapEncodeTiled uintptr
	// Graphs (search replays a small batch's launches as one): optional,
	// all or none.
	cuStreamBeginCapture, cuStreamEndCapture, cuGraphInstantiate, cuGraphLaunch, cuGraphExecDestroy, cuGraphDestroy, cuStreamSynchronize uintptr
	cuMemcpyDtoHAsync                                                                                                                    uintptr
	graphs                                                                                                                               bool
}

var (
	drvOnce sync.Once
	drv     *driver
	drvErr  error
)

// loadDriver opens libcuda.so.1 and resolves every entry point, once per
// process. The error says "no CUDA driver: ..." when the library or a
// symbol is missing.
func loadDriver() (*driver, error) {
	drvOnce.Do(func() {
		lib, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			drvErr = fmt.Errorf("no CUDA driver: %v", err)
			return
		}
		d := &driver{}
		for _, s := range []struct {
			p    *uintptr
			name string
		}{
			{&d.cuInit, "cuInit"},
			{&d.cuDeviceGetCount, "cuDeviceGetCount"},
			{&d.cuDeviceGet, "cuDeviceGet"},
			{&d.cuDeviceGetName, "cuDeviceGetName"},
			{&d.cuDeviceTotalMem, "cuDeviceTotalMem_v2"},
			{&d.cuDeviceGetAttribute, "cuDeviceGetAttribute"},
			{&d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
			{&d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"},
			{&d.cuCtxSetCurrent, "cuCtxSetCurrent"},
			{&d.cuCtxSynchronize, "cuCtxSynchronize"},
			{&d.cuModuleLoadDataEx, "cuModuleLoadDataEx"},
			{&d.cuModuleUnload, "cuModuleUnload"},
			{&d.cuModuleGetFunction, "cuModuleGetFunction"},
			{&d.cuFuncSetAttribute, "cuFuncSetAttribute"},
			{&d.cuLaunchKernel, "cuLaunchKernel"},
			{&d.cuMemAlloc, "cuMemAlloc_v2"},
			{&d.cuMemFree, "cuMemFree_v2"},
			{&d.cuMemcpyHtoD, "cuMemcpyHtoD_v2"},
			{&d.cuMemcpyDtoH, "cuMemcpyDtoH_v2"},
			{&d.cuMemsetD8, "cuMemsetD8_v2"},
			{&d.cuMemGetInfo, "cuMemGetInfo_v2"},
			{&d.cuGetErrorName, "cuGetErrorName"},
			{&d.cuEventCreate, "cuEventCreate"},
			{&d.cuEventRecord, "cuEventRecord"},
			{&d.cuEventSynchronize, "cuEventSynchronize"},
			{&d.cuEventElapsedTime, "cuEventElapsedTime"},
			{&d.cuEventDestroy, "cuEventDestroy_v2"},
			{&d.cuMemAllocHost, "cuMemAllocHost_v2"},
			{&d.cuMemFreeHost, "cuMemFreeHost"},
			{&d.cuStreamCreate, "cuStreamCreate"},
			{&d.cuStreamDestroy, "cuStreamDestroy_v2"},
			{&d.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"},
			{&d.cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer"},
			{&d.cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess"},
			{&d.cuMemcpyPeerAsync, "cuMemcpyPeerAsync"},
		} {
			p, err := purego.Dlsym(lib, s.name)
			if err != nil {
				drvErr = fmt.Errorf("no CUDA driver: libcuda.so.1 lacks %s: %v", s.name, err)
				return
			}
			*s.p = p
		}
		if p, err := purego.Dlsym(lib, "cuTensorMapEncodeTiled"); err == nil {
			d.cuTensorMapEncodeTiled = p
		}
		if p, err := purego.Dlsym(lib, "cuMemHostAlloc"); err == nil {
			d.cuMemHostAlloc = p
		}
		d.graphs = true
		for _, s := range []struct {
			p    *uintptr
			name string
		}{
			{&d.cuStreamBeginCapture, "cuStreamBeginCapture_v2"},
			{&d.cuStreamEndCapture, "cuStreamEndCapture"},
			{&d.cuGraphInstantiate, "cuGraphInstantiateWithFlags"},
			{&d.cuGraphLaunch, "cuGraphLaunch"},
			{&d.cuGraphExecDestroy, "cuGraphExecDestroy"},
			{&d.cuGraphDestroy, "cuGraphDestroy"},
			{&d.cuStreamSynchronize, "cuStreamSynchronize"},
			{&d.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"},
		} {
			p, err := purego.Dlsym(lib, s.name)
			d.graphs = d.graphs && err == nil
			*s.p = p
		}
		if err := d.call("cuInit", d.cuInit, 0); err != nil {
			drvErr = fmt.Errorf("no CUDA driver: %w", err)
			return
		}
		drv = d
	})
	return drv, drvErr
}

// call invokes one driver entry point and turns a CUresult other than
// CUDA_SUCCESS into an error that names the call and the result.
// Pointers converted to uintptr in the argument list stay valid for the
// call (go:uintptrescapes moves their targets to the heap).
//
//go:uintptrescapes
func (d *driver) call(name string, fn uintptr, args ...uintptr) error {
	r, _, _ := purego.SyscallN(fn, args...)
	if res := int32(r); res != cudaSuccess {
		return d.resultError(name, res)
	}
	return nil
}

// enablePeer gives the current context access to ctx's memory (already
// given counts as given).
func (d *driver) enablePeer(ctx uintptr) error {
	r, _, _ := purego.SyscallN(d.cuCtxEnablePeerAccess, ctx, 0)
	if res := int32(r); res != cudaSuccess && res != cudaErrPeerEnabled {
		return d.resultError("cuCtxEnablePeerAccess", res)
	}
	return nil
}

// resultError names a CUresult, e.g. "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (2)".
func (d *driver) resultError(name string, res int32) error {
	var s *byte
	msg := "unknown CUresult"
	if r, _, _ := purego.SyscallN(d.cuGetErrorName, uintptr(res), uintptr(unsafe.Pointer(&s))); int32(r) == cudaSuccess && s != nil {
		msg = cString(s)
	}
	err := fmt.Errorf("%s: %s (%d)", name, msg, res)
	if res == cudaErrOutOfMemory {
		err = fmt.Errorf("%w: %w", errOutOfMemory, err)
	}
	return err
}

// cString copies a NUL-terminated C string that the driver owns.
func cString(p *byte) string {
	var b []byte
	for i := 0; i < 4096; i++ {
		c := *(*byte)(unsafe.Add(unsafe.Pointer(p), i))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

// worker runs closures on one goroutine locked to its OS thread: a CUDA
// context is current per thread, and Go moves goroutines between threads
// (without the lock the first allocation after cuCtxSetCurrent failed with
// CUDA_ERROR_INVALID_CONTEXT). Every driver call of a Device runs here.
//
// Both sides poll for spinWait before they park: calls often come
// microseconds apart (Step after Step), and waking a parked goroutine on
// another thread cost tens of microseconds a call on the H100 machine
// (vlc test-cuda: 0.062 -> 0.054 ms a Step).
type worker struct {
	jobs chan func()
	once sync.Once
}

const spinWait = 200 * time.Microsecond

func startWorker() *worker {
	w := &worker{jobs: make(chan func(), 1)}
	go func() {
		runtime.LockOSThread()
		// The thread is not unlocked: it ends with the goroutine, and with
		// it whatever context was current on it.
		for {
			f, ok := poll(w.jobs)
			if !ok {
				return
			}
			f()
		}
	}()
	return w
}

// poll receives from c, polling for spinWait before it blocks.
func poll[T any](c chan T) (T, bool) {
	start := time.Now()
	for i := 0; ; i++ {
		select {
		case v, ok := <-c:
			return v, ok
		default:
		}
		if i%64 == 63 {
			if time.Since(start) > spinWait {
				v, ok := <-c
				return v, ok
			}
			runtime.Gosched()
		}
	}
}

// do runs f on the worker and returns its error.
func (w *worker) do(f func() error) error {
	done := make(chan error, 1)
	w.jobs <- func() { done <- f() }
	err, _ := poll(done)
	return err
}

func (w *worker) stop() { w.once.Do(func() { close(w.jobs) }) }
