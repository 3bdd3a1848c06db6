//go:build webgpu

package webgpu

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cogentcore/webgpu/wgpu"

	"github.com/vlc-embed/vlc/backend/webgpu/shaders"
	"github.com/vlc-embed/vlc/device"
)

// Device is the WebGPU backend on one adapter. It and its Datasets may be
// used from any goroutine; a mutex serialises their calls.
//
// Every Device of a process shares one wgpu device, made by the first
// Open and kept until the process ends; Close ends only the handle. With
// this binding a released wgpu device is not freed (about 9 MiB and its
// staging memory stay behind on lavapipe per open and close), and
// releasing its queue made submissions to devices opened later fail.
type Device struct {
	*core
	closed atomic.Bool
}

var _ device.Device = (*Device)(nil)

// core is the process's wgpu device with the kernels compiled.
type core struct {
	mu      sync.Mutex
	adapter *wgpu.Adapter
	dev     *wgpu.Device
	queue   *wgpu.Queue
	info    Info
	pipes   map[string]*pipe
	tiles   []shaders.AssignTile // the assign shapes this adapter runs
	timeout time.Duration        // the longest wait for one submission
}

type pipe struct {
	p      *wgpu.ComputePipeline
	layout *wgpu.BindGroupLayout
}

// The instance is created once per process with a nil descriptor (a
// non-nil one leaves C fields of wgpu's instance extras uninitialised in
// this binding, and a second such instance can abort the process) and never
// released.
var (
	instOnce sync.Once
	inst     *wgpu.Instance

	sharedMu sync.Mutex
	shared   *core // the device every Open returns a handle to
)

func instance() *wgpu.Instance {
	instOnce.Do(func() {
		if os.Getenv("VLC_WEBGPU_LOG") == "" {
			wgpu.SetLogLevel(wgpu.LogLevelError)
		}
		inst = wgpu.CreateInstance(nil)
	})
	return inst
}

// Open starts the backend on the best adapter: a discrete GPU before an
// integrated one before a CPU, Vulkan, Metal or Direct3D 12 before OpenGL.
// VLC_WEBGPU_ADAPTER, when set, picks the first adapter whose name or
// driver contains it (read by the first successful Open of the process).
// Without any adapter the error starts with "no WebGPU adapter", and
// the registry's "auto" moves on.
//
// A software adapter (a CPU one: Mesa's lavapipe, llvmpipe) is refused
// unless VLC_WEBGPU_SOFTWARE=1 or VLC_WEBGPU_ADAPTER asks for it: it trains
// several times slower than the cpu backend (deep2k: 1.6 s against 0.3 s),
// so "auto" should take the CPU there. Open is what the registry calls, for
// "-backend webgpu" and for "auto" alike; OpenAny takes any adapter.
func Open() (device.Device, error) {
	d, err := open(os.Getenv("VLC_WEBGPU_SOFTWARE") != "" || os.Getenv("VLC_WEBGPU_ADAPTER") != "")
	if err != nil {
		return nil, err
	}
	return d, nil
}

// OpenAny is Open without the refusal of software adapters (test-webgpu
// uses it: it checks whatever adapter there is).
func OpenAny() (device.Device, error) {
	d, err := open(true)
	if err != nil {
		return nil, err
	}
	return d, nil
}

func open(software bool) (*Device, error) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		c, err := openCore()
		if err != nil {
			return nil, err
		}
		shared = c
	}
	if !software && shared.info.Type == wgpu.AdapterTypeCPU.String() {
		return nil, fmt.Errorf("the only WebGPU adapter is %s (%s), a software renderer, slower than the cpu backend; set VLC_WEBGPU_SOFTWARE=1 to use it",
			shared.info.Name, shared.info.Backend)
	}
	return &Device{core: shared}, nil
}

// openCore starts the instance and the device on the best adapter. With
// XDG_RUNTIME_DIR unset (servers, CI), Mesa's window-system code, probed
// while the instance starts and adapters are listed, prints
// "XDG_RUNTIME_DIR is invalid or not set" on stderr: harmless, and left to
// the program to prevent (the vlc command sets the variable at start-up;
// a library must not change its process's environment).
func openCore() (*core, error) {
	in := instance()
	// Vulkan, Metal and D3D12 first; OpenGL only where none of them has an
	// adapter.
	adapters := in.EnumerateAdapters(&wgpu.InstanceEnumerateAdapterOptons{Backends: wgpu.InstanceBackendPrimary})
	if len(adapters) == 0 {
		adapters = in.EnumerateAdapters(nil)
	}
	if len(adapters) == 0 {
		return nil, errors.New("no WebGPU adapter: no Vulkan, Metal or D3D12 driver found (on Linux: install mesa-vulkan-drivers for lavapipe, or a GPU's Vulkan driver)")
	}
	want := os.Getenv("VLC_WEBGPU_ADAPTER")
	best, bestScore := -1, -1
	var seen []string
	for i, a := range adapters {
		inf := a.GetInfo()
		label := adapterName(inf)
		seen = append(seen, fmt.Sprintf("%s (%s, %s)", label, inf.BackendType, inf.AdapterType))
		if want != "" {
			if best < 0 && (strings.Contains(label, want) || strings.Contains(inf.DriverDescription, want)) {
				best = i
			}
			continue
		}
		if s := score(inf); s > bestScore {
			best, bestScore = i, s
		}
	}
	if best < 0 {
		for _, a := range adapters {
			a.Release()
		}
		return nil, fmt.Errorf("no WebGPU adapter matches VLC_WEBGPU_ADAPTER=%q (have %s)", want, strings.Join(seen, "; "))
	}
	for i, a := range adapters {
		if i != best {
			a.Release()
		}
	}
	d := &core{adapter: adapters[best], pipes: map[string]*pipe{}, timeout: 10 * time.Minute}
	if err := d.init(); err != nil {
		d.release()
		return nil, err
	}
	return d, nil
}

// adapterName is the adapter's name, or its driver's description where the
// name is empty or a bare device id (as lavapipe's reads through this
// binding: "0x0").
func adapterName(inf wgpu.AdapterInfo) string {
	if inf.Name != "" && !strings.HasPrefix(inf.Name, "0x") {
		return inf.Name
	}
	if inf.DriverDescription != "" {
		return inf.DriverDescription
	}
	return inf.Name
}

// score ranks adapters for Open: the type first, then the backend.
func score(inf wgpu.AdapterInfo) int {
	s := 0
	switch inf.AdapterType {
	case wgpu.AdapterTypeDiscreteGPU:
		s = 40
	case wgpu.AdapterTypeIntegratedGPU:
		s = 30
	case wgpu.AdapterTypeCPU:
		s = 20
	default:
		s = 10
	}
	switch inf.BackendType {
	case wgpu.BackendTypeVulkan, wgpu.BackendTypeMetal, wgpu.BackendTypeD3D12:
		s += 2
	case wgpu.BackendTypeOpenGL, wgpu.BackendTypeOpenGLES:
		s += 1
	}
	return s
}

// init requests the device with WebGPU's default limits, raised only where
// the kernels need it: the storage binding and buffer sizes (to the
// adapter's, so that few chunks are needed) and the workgroup memory of the
// assign tiles the adapter can hold. Asking for the adapter's limits
// verbatim fails with this binding.
func (d *core) init() error {
	inf := d.adapter.GetInfo()
	al := d.adapter.GetLimits().Limits
	d.info = Info{Name: adapterName(inf), Driver: inf.DriverDescription, Backend: inf.BackendType.String(), Type: inf.AdapterType.String(),
		AdapterMaxBuffer: al.MaxBufferSize}

	const defaultWorkgroupStorage = 16384
	need := 0
	for _, t := range shaders.AssignTiles {
		if t.Threads() <= int(al.MaxComputeInvocationsPerWorkgroup) && t.WorkgroupBytes() <= int(al.MaxComputeWorkgroupStorageSize) {
			d.tiles = append(d.tiles, t)
			need = max(need, t.WorkgroupBytes())
		}
	}
	if len(d.tiles) == 0 {
		return fmt.Errorf("webgpu: %s allows %d bytes of workgroup memory and %d invocations per workgroup; the assign kernel needs %d and %d",
			d.info.Name, al.MaxComputeWorkgroupStorageSize, al.MaxComputeInvocationsPerWorkgroup, shaders.AssignTiles[0].WorkgroupBytes(), shaders.AssignTiles[0].Threads())
	}
	lim := wgpu.DefaultLimits()
	lim.MaxStorageBufferBindingSize = al.MaxStorageBufferBindingSize
	// An adapter may report maxBufferSize as 2^64-1, which this binding
	// passes on as "undefined", that is WebGPU's default of 256 MiB (an H200
	// through Vulkan got 256 MiB when asked for its adapter's value): ask
	// for at most 2^62 bytes.
	lim.MaxBufferSize = min(al.MaxBufferSize, 1<<62)
	if need > defaultWorkgroupStorage {
		lim.MaxComputeWorkgroupStorageSize = uint32(need)
	}
	dev, err := d.adapter.RequestDevice(&wgpu.DeviceDescriptor{
		Label:          "vlc",
		RequiredLimits: &wgpu.RequiredLimits{Limits: lim},
	})
	if err != nil {
		return fmt.Errorf("webgpu: %s (%s): %w", d.info.Name, d.info.Backend, err)
	}
	d.dev = dev
	d.queue = dev.GetQueue()
	got := dev.GetLimits().Limits
	d.info.MaxBinding = got.MaxStorageBufferBindingSize
	d.info.MaxBuffer = got.MaxBufferSize
	for _, name := range shaders.Kernels {
		if name == "assign" {
			for _, t := range d.tiles {
				if err := d.compile("assign_"+t.Name, name, t); err != nil {
					return err
				}
			}
			continue
		}
		if err := d.compile(name, name, shaders.AssignTiles[0]); err != nil {
			return err
		}
	}
	return nil
}

func (d *core) compile(key, name string, t shaders.AssignTile) error {
	src, err := shaders.Source(name, t)
	if err != nil {
		return err
	}
	return d.compileSource(key, name, src)
}

// compileSource compiles WGSL src (file name.wgsl) into pipeline key.
func (d *core) compileSource(key, name, src string) error {
	mod, err := d.dev.CreateShaderModule(&wgpu.ShaderModuleDescriptor{Label: key, WGSLDescriptor: &wgpu.ShaderModuleWGSLDescriptor{Code: src}})
	if err != nil {
		return fmt.Errorf("webgpu: compiling %s.wgsl: %w", name, err)
	}
	defer mod.Release()
	p, err := d.dev.CreateComputePipeline(&wgpu.ComputePipelineDescriptor{
		Label:   key,
		Compute: wgpu.ProgrammableStageDescriptor{Module: mod, EntryPoint: "main"},
	})
	if err != nil {
		return fmt.Errorf("webgpu: pipeline %s: %w", key, err)
	}
	d.pipes[key] = &pipe{p: p, layout: p.GetBindGroupLayout(0)}
	return nil
}

// Name reports the backend and the adapter.
func (d *core) Name() string {
	return fmt.Sprintf("webgpu (%s, %s, %s)", d.info.Name, d.info.Backend, d.info.Type)
}

// Info describes the adapter.
func (d *core) Info() Info { return d.info }

// Close ends this handle: Load fails after it. The shared wgpu device and
// Datasets already loaded stay usable (close them as usual).
func (d *Device) Close() error {
	d.closed.Store(true)
	return nil
}

// release frees what openCore made, when it fails half way.
func (d *core) release() {
	for k, p := range d.pipes {
		p.layout.Release()
		p.p.Release()
		delete(d.pipes, k)
	}
	if d.queue != nil {
		// GetQueue took a reference to the device; drop it, but leave the
		// queue handle alone: releasing it (wgpuQueueRelease) made every
		// submission to a device opened later in the process fail with
		// "Attempt to use a resource with a different device" (TestReopen).
		d.dev.Release()
		d.queue = nil
	}
	if d.dev != nil {
		d.dev.Release()
		d.dev = nil
	}
	if d.adapter != nil {
		d.adapter.Release()
		d.adapter = nil
	}
}

// lock takes the device for one call of a Dataset.
func (d *core) lock() { d.mu.Lock() }

func (d *core) unlock() { d.mu.Unlock() }

// The helpers below run with the Device locked.

func (d *core) buffer(label string, size uint64, usage wgpu.BufferUsage) (*wgpu.Buffer, error) {
	size = max(4, (size+3)/4*4)
	if size > d.info.MaxBuffer {
		return nil, fmt.Errorf("webgpu: buffer %s of %d bytes exceeds the device's maxBufferSize %d", label, size, d.info.MaxBuffer)
	}
	b, err := d.dev.CreateBuffer(&wgpu.BufferDescriptor{Label: label, Size: size, Usage: usage})
	if err != nil {
		return nil, fmt.Errorf("webgpu: allocating %s (%.1f MiB) on %s: %w", label, float64(size)/(1<<20), d.info.Name, err)
	}
	return b, nil
}

// bind makes a bind group for pipeline key from buffers by binding number.
func (d *core) bind(key string, bufs map[uint32]*wgpu.Buffer) (*wgpu.BindGroup, error) {
	p := d.pipes[key]
	entries := make([]wgpu.BindGroupEntry, 0, len(bufs))
	for i, b := range bufs {
		entries = append(entries, wgpu.BindGroupEntry{Binding: i, Buffer: b, Size: wgpu.WholeSize})
	}
	g, err := d.dev.CreateBindGroup(&wgpu.BindGroupDescriptor{Label: key, Layout: p.layout, Entries: entries})
	if err != nil {
		return nil, fmt.Errorf("webgpu: bind group %s: %w", key, err)
	}
	return g, nil
}

// dispatch records one kernel launch of groups workgroups (folded into y
// beyond shaders.MaxGroupsX).
func dispatch(pass *wgpu.ComputePassEncoder, p *pipe, g *wgpu.BindGroup, groups int) {
	if groups < 1 {
		return
	}
	pass.SetPipeline(p.p)
	pass.SetBindGroup(0, g, nil)
	x := min(groups, shaders.MaxGroupsX)
	y := (groups + x - 1) / x
	pass.DispatchWorkgroups(uint32(x), uint32(y), 1)
}

// submit finishes enc and submits it. The caller has ended and released
// every compute pass of enc.
func (d *core) submit(enc *wgpu.CommandEncoder) error {
	cmd, err := enc.Finish(nil)
	enc.Release()
	if err != nil {
		return err
	}
	d.queue.Submit(cmd)
	cmd.Release()
	return nil
}

// wait spins on Poll(false) until done reports true. Poll(true) is not
// used: in this binding it gives up after about 5 s yet reports success.
// The spin yields the thread after the first millisecond.
func (d *core) wait(done *atomic.Bool, what string) error {
	t0 := time.Now()
	for spins := 0; !done.Load(); spins++ {
		d.dev.Poll(false, nil)
		if done.Load() {
			break
		}
		if spins&63 == 63 {
			el := time.Since(t0)
			if el > d.timeout {
				return fmt.Errorf("webgpu: %s: no answer from %s after %v", what, d.info.Name, el.Round(time.Second))
			}
			if el > time.Millisecond {
				if el > 50*time.Millisecond {
					time.Sleep(50 * time.Microsecond)
				} else {
					runtime.Gosched()
				}
			}
		}
	}
	return nil
}

// idle waits until the queue has run everything submitted so far.
func (d *core) idle() error {
	var done atomic.Bool
	d.queue.Submit()
	d.queue.OnSubmittedWorkDone(func(wgpu.QueueWorkDoneStatus) { done.Store(true) })
	return d.wait(&done, "waiting for the queue")
}

// read copies size bytes at offset of src into dst through a mappable
// staging buffer (src needs CopySrc usage). It submits the copy and waits.
func (d *core) read(dst []byte, src *wgpu.Buffer, offset uint64) error {
	size := uint64(len(dst))
	if size == 0 {
		return nil
	}
	padded := (size + 3) / 4 * 4
	st, err := d.buffer("staging", padded, wgpu.BufferUsageMapRead|wgpu.BufferUsageCopyDst)
	if err != nil {
		return err
	}
	defer st.Release()
	enc, err := d.dev.CreateCommandEncoder(nil)
	if err != nil {
		return err
	}
	if err := enc.CopyBufferToBuffer(src, offset, st, 0, padded); err != nil {
		enc.Release()
		return err
	}
	if err := d.submit(enc); err != nil {
		return err
	}
	return d.mapCopy(dst, st)
}

// mapCopy maps staging (already filled by a submitted copy), copies its
// first len(dst) bytes and unmaps it.
func (d *core) mapCopy(dst []byte, st *wgpu.Buffer) error {
	var done atomic.Bool
	var status atomic.Int32
	padded := (uint64(len(dst)) + 3) / 4 * 4
	if err := st.MapAsync(wgpu.MapModeRead, 0, padded, func(s wgpu.BufferMapAsyncStatus) {
		status.Store(int32(s))
		done.Store(true)
	}); err != nil {
		return err
	}
	if err := d.wait(&done, "reading back"); err != nil {
		return err
	}
	if s := wgpu.BufferMapAsyncStatus(status.Load()); s != wgpu.BufferMapAsyncStatusSuccess {
		return fmt.Errorf("webgpu: mapping a read-back buffer: %s", s)
	}
	copy(dst, st.GetMappedRange(0, uint(padded)))
	return st.Unmap()
}

func init() {
	device.Register("webgpu", device.RankWebGPU, func() (device.Device, error) { return Open() })
}
