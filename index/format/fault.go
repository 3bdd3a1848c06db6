package format

import (
	"fmt"
	"runtime/debug"
)

// CatchFault turns a memory fault while reading a mapped file into an
// error, for the caller to defer around code that reads a mapping:
//
//	defer format.CatchFault(path, &err, debug.SetPanicOnFault(true))
//
// Files are replaced, never rewritten, by this package, but another
// program may truncate or rewrite a file in place while it is mapped;
// reading a page that is no longer there raises SIGBUS, which would
// otherwise end the process. With CatchFault the call returns an error
// wrapping ErrCorrupt instead. Panics other than memory faults go on.
// old is what SetPanicOnFault returned, restored here. A deferred call
// rather than a returned closure, so that a search allocates nothing.
func CatchFault(path string, err *error, old bool) {
	debug.SetPanicOnFault(old)
	if r := recover(); r != nil {
		if _, fault := r.(interface{ Addr() uintptr }); !fault {
			panic(r)
		}
		*err = fmt.Errorf("%s: %w: reading the mapped file failed (truncated or rewritten in place while open?): %v", path, ErrCorrupt, r)
	}
}
