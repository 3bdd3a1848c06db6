package shaders

import (
	"embed"
	"fmt"
	"strings"
)

//go:embed *.wgsl
var files embed.FS

// Tile sizes and workgroup sizes shared by the kernels and the Go side.
const (
	// RowPad: point rows of every chunk are padded (zero rows) to a
	// multiple of it, the largest assign tile, so tile loads never leave
	// the buffer.
	RowPad = 128
	// AnchorPad: anchor rows are padded (zero rows, never chosen) to it,
	// the largest TN.
	AnchorPad = 256
	// DimPad: the dimension is padded with zeros to a multiple of it (in
	// float16 values), the largest BK of the assign tiles; zeros change no
	// dot product or distance.
	DimPad = 32
	// WG is the workgroup size of every kernel but assign.
	WG = 256
	// MaxGroupsX is the most workgroups one dispatch dimension takes
	// (WebGPU's default maxComputeWorkgroupsPerDimension); larger grids
	// are folded into y.
	MaxGroupsX = 65535
)

// AssignTile is one shape of the assign kernel: TM points x TN anchors per
// workgroup of (TM/RM)*(TN/RN) invocations, each holding RM x RN dot
// products, BK dimensions per step through workgroup memory.
type AssignTile struct {
	Name           string
	TM, TN, RM, RN int
	BK             int
}

// Threads is the workgroup size of the tile.
func (t AssignTile) Threads() int { return (t.TM / t.RM) * (t.TN / t.RN) }

// WorkgroupBytes is the workgroup memory the tile uses: the point and
// anchor tiles (float32), reused for the candidates and the trees of the
// energy and the changed count.
func (t AssignTile) WorkgroupBytes() int {
	return 4 * t.BK * (t.TM + t.TN)
}

// AssignTiles are the shapes compiled. The first is the default for small
// point sets, the second for large ones (backend/webgpu pickTile); the others
// can be chosen with VLC_WEBGPU_TILE, for measurements.
var AssignTiles = []AssignTile{
	{Name: "t64", TM: 64, TN: 64, RM: 4, RN: 4, BK: 16},
	{Name: "t128", TM: 128, TN: 128, RM: 8, RN: 8, BK: 16},
	{Name: "t64x128", TM: 64, TN: 128, RM: 4, RN: 8, BK: 16},
	{Name: "t128k32", TM: 128, TN: 128, RM: 8, RN: 8, BK: 32},
	{Name: "t128x256", TM: 128, TN: 256, RM: 8, RN: 16, BK: 16},
}

// Kernels names the shader files (without .wgsl); each has one entry point,
// main.
var Kernels = []string{"norms", "assign", "scan", "scatter", "reduce", "update", "finish"}

// Source returns the WGSL text of kernel name, with the constants header
// for tile t (t matters to assign only).
func Source(name string, t AssignTile) (string, error) {
	body, err := files.ReadFile(name + ".wgsl")
	if err != nil {
		return "", fmt.Errorf("shaders: no kernel %q", name)
	}
	common, err := files.ReadFile("common.wgsl")
	if err != nil {
		return "", err
	}
	var h strings.Builder
	fmt.Fprintf(&h, "// Constants from backend/webgpu/shaders/shaders.go.\n")
	for _, c := range []struct {
		name string
		v    int
	}{
		{"WG", WG}, {"MAXGX", MaxGroupsX},
		{"TM", t.TM}, {"TN", t.TN}, {"RM", t.RM}, {"RN", t.RN}, {"BK", t.BK},
		{"TX", t.TN / t.RN}, {"TY", t.TM / t.RM}, {"ATHREADS", t.Threads()},
		// Array sizes: this WGSL compiler takes a name or a literal there.
		{"XS_LEN", t.BK * t.TM / 4}, {"AS_LEN", t.BK * t.TN / 4},
	} {
		fmt.Fprintf(&h, "const %s: u32 = %du;\n", c.name, c.v)
	}
	text := string(body)
	if name == "assign" {
		for k, v := range assignParts(t) {
			mark := "//@" + k + "\n"
			i := strings.Index(text, mark)
			if i < 0 {
				return "", fmt.Errorf("shaders: assign.wgsl lacks %s", mark)
			}
			j := strings.LastIndex(text[:i], "\n") + 1 // the marker's indentation goes too
			text = text[:j] + v + text[i+len(mark):]
		}
	}
	return h.String() + "\n" + string(common) + "\n" + text, nil
}
