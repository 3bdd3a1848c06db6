package synth

import (
	"runtime"
	"slices"
	"testing"
)

// The points depend on the seed alone: not on the core count that drew
// them in parallel.
func TestClustersDeterministic(t *testing.T) {
	a := Clusters(10000, 7, 4, 9)
	prev := runtime.GOMAXPROCS(1)
	b := Clusters(10000, 7, 4, 9)
	runtime.GOMAXPROCS(prev)
	c := Clusters(10000, 7, 4, 10)
	if !slices.Equal(a.Data, b.Data) {
		t.Error("same seed, other points on one core")
	}
	if slices.Equal(a.Data, c.Data) {
		t.Error("different seeds, same points")
	}
	if a.N != 10000 || a.Dim != 7 || len(a.Data) != 70000 {
		t.Errorf("%d points of dimension %d in %d values", a.N, a.Dim, len(a.Data))
	}
}
