package format

import (
	"runtime/debug"

	"github.com/vlc-embed/vlc/internal/fault"
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
// instead, naming the mapped file that faulted (package internal/fault):
// for an index, wrapping ErrCorrupt; path is named when the address is in
// no registered mapping. Panics other than memory faults go on.
// old is what SetPanicOnFault returned, restored here. A deferred call
// rather than a returned closure, so that a search allocates nothing.
func CatchFault(path string, err *error, old bool) {
	debug.SetPanicOnFault(old)
	if r := recover(); r != nil {
		e := fault.Error(r, path, ErrCorrupt)
		if e == nil {
			panic(r)
		}
		*err = e
	}
}
