//go:build !unix

package testenv

import "testing"

// MakeFIFO: no named pipes among files here.
func MakeFIFO(t testing.TB) (path string, ok bool) { return "", false }
