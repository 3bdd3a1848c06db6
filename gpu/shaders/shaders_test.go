package shaders

import (
	"strings"
	"testing"
)

// Every kernel assembles, with the constants of each tile and no marker
// left for the generator.
func TestSource(t *testing.T) {
	for _, tile := range AssignTiles {
		if tile.Threads() > 256 || tile.TN/tile.RN > tile.BK || tile.TM > tile.TN || tile.RM%4 != 0 || tile.RN%4 != 0 {
			t.Errorf("tile %+v breaks an assumption of assign.wgsl (threads <= 256, TX <= BK, TM <= TN, RM and RN multiples of 4)", tile)
		}
		if RowPad%tile.TM != 0 || AnchorPad%tile.TN != 0 || DimPad%tile.BK != 0 || tile.BK%8 != 0 {
			t.Errorf("tile %+v does not divide the padding", tile)
		}
		for _, k := range Kernels {
			src, err := Source(k, tile)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(src, "//@") {
				t.Errorf("%s/%s: a generator marker is left", tile.Name, k)
			}
			if !strings.Contains(src, "const TM: u32 = ") || !strings.Contains(src, "fn main(") {
				t.Errorf("%s/%s: header or entry point missing", tile.Name, k)
			}
		}
	}
	if _, err := Source("nope", AssignTiles[0]); err == nil {
		t.Error("unknown kernel: no error")
	}
}
