package fault

import (
	"errors"
	"strings"
	"testing"
	"unsafe"
)

type fakeFault uintptr

func (f fakeFault) Addr() uintptr { return uintptr(f) }

var errIndex, errInput = errors.New("index"), errors.New("input")

// Error names the mapping holding the faulting address, open or recently
// closed, and falls back to the caller's path; other panics are not faults.
func TestErrorNamesMapping(t *testing.T) {
	a, b := make([]byte, 1<<17), make([]byte, 1<<17) // on the heap: a stack may move
	Register(a, "a.vlc", errIndex)
	Register(b, "b.f16", errInput)
	addr := func(x []byte, i int) fakeFault { return fakeFault(uintptr(unsafe.Pointer(&x[0])) + uintptr(i)) }
	check := func(r any, path string, kind error) {
		t.Helper()
		err := Error(r, "fallback", errIndex)
		if !errors.Is(err, kind) || !strings.HasPrefix(err.Error(), path+": ") {
			t.Errorf("%v: want %s, %v", err, path, kind)
		}
	}
	check(addr(a, 1<<17-1), "a.vlc", errIndex)
	check(addr(b, 0), "b.f16", errInput)
	check(fakeFault(1), "fallback", errIndex)
	Unregister(b) // closed while the fault unwinds: still named
	check(addr(b, 50), "b.f16", errInput)
	Unregister(a)
	if Error("not a fault", "x", errIndex) != nil {
		t.Error("a panic that is not a memory fault was taken for one")
	}
}
