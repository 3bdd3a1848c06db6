//go:build !linux

package sysmem

// Available is unknown here.
func Available() (uint64, bool) { return 0, false }
