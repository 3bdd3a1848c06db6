// Package enctrace prints, when VLC_ENCODE_TRACE is set, where a
// compression's time went (the devices' encoding, the file's writing,
// the process around them) to standard error: for measurements, not
// for users, so it has no other switch and no format of its own.
package enctrace

import (
	"fmt"
	"os"
	"sync"
)

// On reports whether VLC_ENCODE_TRACE is set (read once).
var On = sync.OnceValue(func() bool { return os.Getenv("VLC_ENCODE_TRACE") != "" })

// Printf prints a trace line to standard error when On.
func Printf(format string, args ...any) {
	if On() {
		fmt.Fprintf(os.Stderr, format, args...)
	}
}
