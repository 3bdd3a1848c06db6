package device

import (
	"fmt"
	"github.com/vlc-embed/vlc/internal/errs"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// ErrNoBackend is returned when a named backend is not built in or cannot
// start (no driver, no adapter).
var ErrNoBackend = errs.New(errs.ErrUnavailable, "backend not available")

type backend struct {
	name string
	rank int // auto tries lower ranks first
	open func() (Device, error)
}

var (
	regMu    sync.Mutex
	registry []backend
	unbuilt  = map[string]string{} // backend name -> how to build it in
	// backend name -> how it opens devices by number (RegisterDevices)
	devOpeners = map[string]func(ordinals []int) ([]Device, error){}
)

// The ranks of vlc's backends, by which "auto" orders them: it tries the
// lowest first, so a GPU backend that starts is preferred to the CPU.
const (
	RankCUDA   = 0
	RankWebGPU = 1
	RankCPU    = 2
)

// How to build in a GPU backend a binary was built without: what its
// stub registers (RegisterUnbuilt) and its Open reports (NotBuilt).
const (
	BuildCUDA   = "build with -tags cuda (pure Go: neither cgo nor the CUDA toolkit is needed)"
	BuildWebGPU = "build with -tags webgpu (cgo: needs a C compiler; runs on a Vulkan, Metal or Direct3D 12 driver)"
)

// NotBuilt is the error a GPU backend's stub returns from Open: this
// binary was built without support for what ("CUDA"); how says how to
// build it in.
func NotBuilt(what, how string) error {
	return errs.New(errs.ErrUnavailable, "not built with "+what+" support: "+how)
}

// Register makes a backend available by name. Backends call it from an init
// function under their build tag; rank orders "auto" (RankCUDA and the
// others).
func Register(name string, rank int, open func() (Device, error)) {
	regMu.Lock()
	defer regMu.Unlock()
	registry = append(registry, backend{name, rank, open})
	slices.SortStableFunc(registry, func(a, b backend) int { return a.rank - b.rank })
}

// RegisterUnbuilt names a backend this binary was built without and how
// to build it in (the stubs of the GPU backends call it when their build
// tag is off), so that asking for it by name says how to get it. "auto"
// passes it over in silence.
func RegisterUnbuilt(name, how string) {
	regMu.Lock()
	defer regMu.Unlock()
	unbuilt[name] = how
}

// RegisterDevices lets a registered backend open several devices by
// number (OpenDevices): open gets the numbers as given (a number given
// twice, two devices on one: shares of one device, for tests), or nil
// for every device the backend has, and returns one Device a number.
func RegisterDevices(name string, open func(ordinals []int) ([]Device, error)) {
	regMu.Lock()
	defer regMu.Unlock()
	devOpeners[name] = open
}

// ParseDevices reads a device list: "all" (nil) or device numbers
// separated by commas ("0,1", "0,0").
func ParseDevices(spec string) ([]int, error) {
	if spec == "all" {
		return nil, nil
	}
	var ords []int
	for _, f := range strings.Split(spec, ",") {
		o, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || o < 0 {
			return nil, fmt.Errorf("%w: devices %q: want all, or device numbers separated by commas (0,1)", errs.ErrArgument, spec)
		}
		ords = append(ords, o)
	}
	return ords, nil
}

// OpenDevices is Open on the devices spec names (ParseDevices; "" is
// Open's one device): one device as it is, several as Multi
// over them. A backend that cannot open devices by number takes only "0"
// and "all", as its one device; auto passes over the backends that cannot
// open the devices named.
func OpenDevices(name, spec string) (dev Device, skipped []string, err error) {
	if spec == "" {
		return Open(name)
	}
	ords, err := ParseDevices(spec)
	if err != nil {
		return nil, nil, err
	}
	regMu.Lock()
	list := slices.Clone(registry)
	openers := make(map[string]func([]int) ([]Device, error), len(devOpeners))
	for k, v := range devOpeners {
		openers[k] = v
	}
	regMu.Unlock()
	open := func(b backend) (Device, error) {
		o := openers[b.name]
		if o == nil {
			if ords == nil || slices.Equal(ords, []int{0}) {
				return b.open()
			}
			return nil, fmt.Errorf("%s opens one device only (devices %q)", b.name, spec)
		}
		devs, err := o(ords)
		switch {
		case err != nil:
			return nil, err
		case len(devs) == 1:
			return devs[0], nil
		}
		return Multi(devs...), nil
	}
	if name == "" || name == "auto" {
		for _, b := range list {
			d, err := open(b)
			if err == nil {
				return d, skipped, nil
			}
			skipped = append(skipped, fmt.Sprintf("%s: %v", b.name, err))
		}
		return nil, skipped, fmt.Errorf("%w: no backend could start on devices %q (%s)", ErrNoBackend, spec, strings.Join(skipped, "; "))
	}
	for _, b := range list {
		if b.name == name {
			d, err := open(b)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: %s: %v", ErrNoBackend, name, err)
			}
			return d, nil, nil
		}
	}
	return Open(name) // not built in: its error
}

// Backends lists the registered backend names, in the order auto tries them.
func Backends() []string {
	regMu.Lock()
	defer regMu.Unlock()
	var names []string
	for _, b := range registry {
		names = append(names, b.name)
	}
	return names
}

// Open starts the named backend, or for "auto" (or "") the first one
// that starts, in rank order. skipped describes every backend auto passed
// over and why, so the caller can log it; it is empty for a named backend.
func Open(name string) (dev Device, skipped []string, err error) {
	regMu.Lock()
	list := slices.Clone(registry)
	regMu.Unlock()
	if name == "" || name == "auto" {
		for _, b := range list {
			d, err := b.open()
			if err == nil {
				return d, skipped, nil
			}
			skipped = append(skipped, fmt.Sprintf("%s: %v", b.name, err))
		}
		return nil, skipped, fmt.Errorf("%w: no backend could start (%s)", ErrNoBackend, strings.Join(skipped, "; "))
	}
	for _, b := range list {
		if b.name == name {
			d, err := b.open()
			if err != nil {
				return nil, nil, fmt.Errorf("%w: %s: %v", ErrNoBackend, name, err)
			}
			return d, nil, nil
		}
	}
	regMu.Lock()
	how, known := unbuilt[name]
	regMu.Unlock()
	if known {
		return nil, nil, fmt.Errorf("%w: %q is not built into this binary (have %s): %s", ErrNoBackend, name, strings.Join(Backends(), ", "), how)
	}
	return nil, nil, fmt.Errorf("%w: %q is not built into this binary (have %s)", ErrNoBackend, name, strings.Join(Backends(), ", "))
}
