package anneal

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// ErrNoBackend is returned when a named backend is not built in or cannot
// start (no driver, no adapter).
var ErrNoBackend = errors.New("anneal: backend not available")

type backend struct {
	name string
	rank int // auto tries lower ranks first
	open func() (Device, error)
}

var (
	regMu    sync.Mutex
	registry []backend
	unbuilt  = map[string]string{} // backend name -> how to build it in
)

// Register makes a backend available by name. Backends call it from an init
// function under their build tag; rank orders "auto" (cuda 0, webgpu 1,
// cpu 2).
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

// OpenBackend starts the named backend, or for "auto" (or "") the first one
// that starts, in rank order. skipped describes every backend auto passed
// over and why, so the caller can log it; it is empty for a named backend.
func OpenBackend(name string) (dev Device, skipped []string, err error) {
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
