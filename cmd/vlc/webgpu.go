//go:build webgpu

package main

import "os"

// With XDG_RUNTIME_DIR unset (servers, CI), Mesa's window-system code
// prints "XDG_RUNTIME_DIR is invalid or not set" several times when the
// WebGPU backend lists adapters. The command owns its process, so it points
// the variable at the temporary folder before anything else runs; the
// backend, a library, leaves the environment alone.
func init() {
	if _, ok := os.LookupEnv("XDG_RUNTIME_DIR"); !ok {
		os.Setenv("XDG_RUNTIME_DIR", os.TempDir())
	}
}
