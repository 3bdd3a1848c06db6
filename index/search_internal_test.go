package index

import (
	"math"
	"testing"
)

// TestMayEnterRefinesNaN: an entry whose first estimate is NaN (a float16
// scalar overflowed to infinity, times zero) is refined, not dropped, once
// the results are full; a finite estimate beyond the worst kept is not.
func TestMayEnterRefinesNaN(t *testing.T) {
	var top topK
	top.reset(1)
	top.push(Hit{ID: 0, Distance: 1})
	if !mayEnter(top.limit(), float32(math.NaN())) {
		t.Error("a NaN lower bound was ruled out")
	}
	if mayEnter(top.limit(), 2) {
		t.Error("a lower bound beyond the worst kept hit was not ruled out")
	}
	if !mayEnter(top.limit(), 0.5) {
		t.Error("a lower bound below the worst kept hit was ruled out")
	}
}
