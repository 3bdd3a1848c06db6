package main

import "testing"

// vlc serve -backend names the backend it cannot open, and -devices
// without a GPU backend is refused, before any index is opened.
func TestServeBackendErrors(t *testing.T) {
	index := deepIndexPath(t)
	checkFails(t, []string{"serve", "-backend", "nosuch", index}, []string{"-backend nosuch", "not built into this binary"})
	checkFails(t, []string{"serve", "-devices", "0,1", index}, []string{"-backend cpu", `devices "0,1"`})
}
