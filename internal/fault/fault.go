// Package fault names the file behind a memory fault.
//
// vlc maps its files (indexes, vector files) into memory rather than
// reading them. Another program that truncates or rewrites a file in place
// while it is mapped makes a later read of it fault (SIGBUS), which would
// end the process; debug.SetPanicOnFault turns the fault into a panic in
// the goroutine that read, which Catch turns into an error. Every mapping
// is registered with its file's path and what a fault there means (an
// index: corrupt; a vector file: changed while in use), so that the error
// names the file that changed, not whichever file the code was busy with.
package fault

import (
	"fmt"
	"runtime/debug"
	"sync"
	"unsafe"
)

type region struct {
	lo, hi uintptr
	path   string
	kind   error
}

var (
	mu      sync.RWMutex
	regions []region
	// closed holds the last mappings unregistered, newest last: a fault
	// unwinds through deferred Closes before a Catch further up looks its
	// address up.
	closed []region
)

// keepClosed is how many unregistered mappings lookup still knows.
const keepClosed = 64

// Register records that b maps the file at path, and the error a fault
// while reading it wraps. Unregister it before unmapping.
func Register(b []byte, path string, kind error) {
	if len(b) == 0 {
		return
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	mu.Lock()
	regions = append(regions, region{lo, lo + uintptr(len(b)), path, kind})
	mu.Unlock()
}

// Unregister forgets the mapping b (as given to Register).
func Unregister(b []byte) {
	if len(b) == 0 {
		return
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	mu.Lock()
	for i, r := range regions {
		if r.lo == lo {
			regions = append(regions[:i], regions[i+1:]...)
			if len(closed) == keepClosed {
				closed = append(closed[:0], closed[1:]...)
			}
			closed = append(closed, r)
			break
		}
	}
	mu.Unlock()
}

// lookup returns the registered mapping holding addr: an open one, else
// the one unregistered last.
func lookup(addr uintptr) (region, bool) {
	mu.RLock()
	defer mu.RUnlock()
	for _, r := range regions {
		if r.lo <= addr && addr < r.hi {
			return r, true
		}
	}
	for i := len(closed) - 1; i >= 0; i-- {
		if r := closed[i]; r.lo <= addr && addr < r.hi {
			return r, true
		}
	}
	return region{}, false
}

// Error returns the error for a recovered panic value r when r is a
// memory fault, naming the registered file that holds the faulting
// address (else path, with kind), and nil when r is not a memory fault.
func Error(r any, path string, kind error) error {
	f, ok := r.(interface{ Addr() uintptr })
	if !ok {
		return nil
	}
	if reg, ok := lookup(f.Addr()); ok {
		path, kind = reg.path, reg.kind
	}
	return fmt.Errorf("%s: %w: reading the mapped file failed (truncated or rewritten in place while in use?): %v", path, kind, r)
}

// Catch, deferred after debug.SetPanicOnFault(true) (whose result is old),
// turns a memory fault in the calling goroutine into *err (see Error);
// other panics go on. path and kind name the file when the faulting
// address is in no registered mapping. A deferred call rather than a
// returned closure, so that the hot paths calling it allocate nothing:
//
//	defer fault.Catch(&err, debug.SetPanicOnFault(true), path, ErrCorrupt)
func Catch(err *error, old bool, path string, kind error) {
	debug.SetPanicOnFault(old)
	if r := recover(); r != nil {
		e := Error(r, path, kind)
		if e == nil {
			panic(r)
		}
		*err = e
	}
}

// Enabled reports whether the calling goroutine turns memory faults into
// panics (debug.SetPanicOnFault), so that goroutines started for it can
// do the same.
func Enabled() bool {
	on := debug.SetPanicOnFault(true)
	debug.SetPanicOnFault(on)
	return on
}
