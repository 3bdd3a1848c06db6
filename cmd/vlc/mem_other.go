//go:build !linux

package main

import "time"

const memorySampleEvery = 50 * time.Millisecond

// sampleMemory reports nothing here: RssAnon is Linux's.
func sampleMemory() func() (int64, bool) { return func() (int64, bool) { return 0, false } }
