//go:build !linux

package main

import "time"

// availableMemory is unknown here: bench then checks only that the sizes
// can be represented, not that they fit in memory.
func availableMemory() (uint64, bool) { return 0, false }

const memorySampleEvery = 50 * time.Millisecond

// sampleMemory reports nothing here: RssAnon is Linux's.
func sampleMemory() func() (int64, bool) { return func() (int64, bool) { return 0, false } }
