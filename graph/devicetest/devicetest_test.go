package devicetest

import (
	"math"
	"testing"

	"github.com/vlc-embed/vlc/device"
)

// The reference passes its own suite, and its pruning keeps what the
// rule keeps on a case worked by hand.
func TestReference(t *testing.T) {
	Parity(t, Reference{})

	// Rows on a line at 0, 1, 2, -5 (8 dimensions, the first used): from
	// row 0, row 1 is kept; row 2 is 1 from row 1 and 4 from row 0 (squared,
	// 1*alpha2 <= 4): dropped; row 3 is 36 from row 1, 25 from row 0: kept.
	// A repeat of row 1 and row 0 itself are skipped.
	x := make([]float32, 4*8)
	for i, v := range []float32{0, 1, 2, -5} {
		x[i*8] = v
	}
	dr, err := Reference{}.LoadRows(device.HostRows{N: 4, Dim: 8, Float: x})
	if err != nil {
		t.Fatal(err)
	}
	l := device.RowLists{Of: []uint32{0}, Offsets: []uint32{0, 5}, IDs: []uint32{0, 1, 1, 2, 3}, Dists: []float32{0, 1, 1, 4, 25}}
	kept, kd := make([]uint32, 3), make([]float32, 3)
	if err := dr.Prune(l, 3, 1.21, kept, kd); err != nil {
		t.Fatal(err)
	}
	if want := []uint32{1, 3, device.NoRow}; kept[0] != want[0] || kept[1] != want[1] || kept[2] != want[2] || kd[1] != 25 || kd[2] != 0 {
		t.Errorf("kept %v %v, want %v with distances 1, 25, 0", kept, kd, want)
	}
	// At alpha^2 = 5, row 2 (1*5 > 4) stays.
	if err := dr.Prune(l, 3, 5, kept, kd); err != nil {
		t.Fatal(err)
	}
	if kept[1] != 2 || kept[2] != 3 {
		t.Errorf("alpha^2 5: kept %v, want 1, 2, 3", kept)
	}
	l.Dists = make([]float32, 5)
	if err := dr.Measure(l); err != nil {
		t.Fatal(err)
	}
	if l.Dists[4] != 25 || math.Signbit(float64(l.Dists[0])) {
		t.Errorf("measured %v, want 0, 1, 1, 4, 25", l.Dists)
	}
}
