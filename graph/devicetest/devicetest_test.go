package devicetest

import (
	"math"
	"slices"
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
	// A walk along a line of rows at 0 to 5, each linked to the next (row
	// 1 back to row 0 too), for row 5 from row 0 with a pool of 2: every
	// row expanded in turn, the pool's farther row dropping out.
	line := make([]float32, 6*8)
	for i := range 6 {
		line[i*8] = float32(i)
	}
	lr, _ := Reference{}.LoadRows(device.HostRows{N: 6, Dim: 8, Float: line})
	none := device.NoRow
	if err := lr.LoadAdjacency([]uint32{1, none, 2, 0, 3, none, 4, none, 5, none, none, none}, 2); err != nil {
		t.Fatal(err)
	}
	for _, most := range []int{8, 3} {
		w := device.RowWalks{Of: []uint32{5}, Starts: []uint32{0}, Ef: 2, Cap: most, IDs: make([]uint32, most), Dists: make([]float32, most), Counts: make([]int32, 1)}
		if err := lr.Walk(w); err != nil {
			t.Fatal(err)
		}
		want, wantD, count := []uint32{0, 1, 2, 3, 4, 5}, []float32{25, 16, 9, 4, 1, 0}, int32(6)
		if most == 3 {
			want, wantD, count = want[:3], wantD[:3], -1
		}
		if w.Counts[0] != count || !slices.Equal(w.IDs[:len(want)], want) || !slices.Equal(w.Dists[:len(want)], wantD) {
			t.Errorf("cap %d: walked %d: %v %v, want %d: %v %v", most, w.Counts[0], w.IDs, w.Dists, count, want, wantD)
		}
	}
	l.Dists = make([]float32, 5)
	if err := dr.Measure(l); err != nil {
		t.Fatal(err)
	}
	if l.Dists[4] != 25 || math.Signbit(float64(l.Dists[0])) {
		t.Errorf("measured %v, want 0, 1, 1, 4, 25", l.Dists)
	}
}
