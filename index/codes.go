package index

import (
	"fmt"
	"runtime/debug"

	"github.com/vlc-embed/vlc/index/format"
)

// Codes calls fn with every row, the list it lies in (its anchor) and its
// entry code (CodeBytes, unpacked from the blocked layout where the file
// has it), list by list; code is reused between calls. It is what a
// structure built over the index's codes (package graph) reads.
func (ix *Index) Codes(fn func(row, list int, code []byte) error) (err error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.file == nil {
		return ErrClosed
	}
	defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
	buf := make([]byte, ix.code.CodeBytes())
	for a := range ix.m {
		if err := ix.listCodes(a, buf, func(row int, code []byte) error { return fn(row, a, code) }); err != nil {
			return err
		}
	}
	return nil
}

// listCodes calls fn with list a's rows and codes, unpacked into buf (the
// caller holds the lock and catches faults).
func (ix *Index) listCodes(a int, buf []byte, fn func(row int, code []byte) error) error {
	for e := int(ix.lists[a]); e < int(ix.lists[a+1]); e++ {
		ix.entryCode(e, buf)
		if err := fn(ix.ids.at(e), buf); err != nil {
			return err
		}
	}
	return nil
}

// ListCodes is Codes for list a alone, on the calling goroutine: calls for
// different lists may run at once (package graph reads every list on
// all cores). An a outside the lists is ErrArgument.
func (ix *Index) ListCodes(a int, fn func(row int, code []byte) error) (err error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.file == nil {
		return ErrClosed
	}
	if a < 0 || a >= ix.m {
		return fmt.Errorf("%w: list %d of %d", ErrArgument, a, ix.m)
	}
	defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
	return ix.listCodes(a, make([]byte, ix.code.CodeBytes()), fn)
}
