// Package testenv holds what the tests of several packages share about the
// way they are run.
package testenv

import "testing"

// SkipLong skips, with -short, a test whose work is long under the race
// detector: recall on real data, training, golden hashes of large cases.
// make test runs every package twice, with -race -short and without the
// race detector, so such a test runs once, where it is fast, and the code
// it covers still runs under the race detector in the shorter tests.
func SkipLong(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("long under the race detector: runs without -short (make test's pass without -race)")
	}
}
