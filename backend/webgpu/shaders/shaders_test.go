package shaders

import (
	"slices"
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

// Every search kernel assembles with its constants; bad constants and
// unknown names are refused; struct SP and struct Part have the sizes
// the Go side writes.
func TestSearchSource(t *testing.T) {
	c := SearchConsts{DimLen: 128, Bits: 4, QLen: 128, SortLen: 256}
	for _, k := range append(slices.Clip(SearchKernels), CodeKernels...) {
		src, err := SearchSource(k, c)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(src, "const WG: u32 = 256u;") || !strings.Contains(src, "fn main(") || !strings.Contains(src, "struct SP {") {
			t.Errorf("%s: header, common part or entry point missing", k)
		}
		if (k == "probe" || k == "topk") != strings.Contains(src, "fn threshold(") {
			t.Errorf("%s: the selection is included where it should not be, or missing", k)
		}
		if (k != "lut" && c.WorkgroupBytes(k) <= 0) || c.WorkgroupBytes(k) > 16384 {
			t.Errorf("%s: %d bytes of workgroup memory at %+v", k, c.WorkgroupBytes(k), c)
		}
	}
	for _, tc := range []struct {
		name string
		c    SearchConsts
		want string
	}{
		{"common", c, `shaders: no search kernel "common"`},
		{"rotate", SearchConsts{}, "shaders: rotate needs DimLen, got 0"},
		{"score", SearchConsts{Bits: 3, QLen: 64}, "shaders: score needs Bits 1, 2, 4 or 8, got 3"},
		{"score", SearchConsts{Bits: 1, QLen: 16}, "shaders: score needs QLen >= 32, got 16"},
		{"topk", SearchConsts{SortLen: 96}, "shaders: topk needs SortLen a power of two, got 96"},
	} {
		if _, err := SearchSource(tc.name, tc.c); err == nil || err.Error() != tc.want {
			t.Errorf("%s %+v: %v, want %q", tc.name, tc.c, err, tc.want)
		}
	}
	if SearchWG != 256 {
		t.Errorf("SearchWG %d: the selection's histogram has 256 bins, one per invocation", SearchWG)
	}
	common, err := files.ReadFile("search_common.wgsl")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		name string
		size int
	}{{"SP", SearchParamsSize}, {"Part", PartSize}} {
		body := string(common)
		i := strings.Index(body, "struct "+s.name+" {")
		j := strings.Index(body[i:], "}")
		if i < 0 || j < 0 {
			t.Fatalf("struct %s not found", s.name)
		}
		if fields := strings.Count(body[i:i+j], ": u32,") + strings.Count(body[i:i+j], ": f32,"); fields*4 != s.size {
			t.Errorf("struct %s has %d four-byte fields, the Go side writes %d bytes", s.name, fields, s.size)
		}
	}
}
