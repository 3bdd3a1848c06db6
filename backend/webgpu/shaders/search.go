package shaders

import (
	"fmt"
	"slices"
	"strings"
)

// The search kernels (device.IndexData's search; backend/webgpu search.go
// runs them). Their constants live here, once; SearchSource writes them
// into each kernel's header.
const (
	// SearchWG is the workgroup size of rotate, probe and topk (one
	// workgroup per query each). The selection's histogram has 256 bins,
	// one per invocation, so it must stay 256.
	SearchWG = 256
	// ScoreWG is the workgroup size of score: one workgroup (or Slices of
	// them) per query and probed list, an invocation per entry.
	ScoreWG = 64
	// The coarse tile: CoarseQ queries x CoarseA lists per workgroup of
	// 256 invocations (2 x 4 dot products each), CoarseK dimensions per
	// step through workgroup memory.
	CoarseQ = 32
	CoarseA = 64
	CoarseK = 16
	// EntryTile is device.Tile: the entries whose level words are
	// interleaved (word w of entry e at (e/32)*Words*32 + w*32 + e%32).
	EntryTile = 32
	// SearchParamsSize is the size in bytes of struct SP
	// (search_common.wgsl), the uniform of every search kernel.
	SearchParamsSize = 80
	// PartSize is the size in bytes of struct Part, the uniform of one
	// part of the index (a storage binding's worth of tiles).
	PartSize = 16
)

// Flags of SP.flags.
const (
	FlagIP      = 1 // metric ip: probe by -qa, the dot form
	FlagIPCodes = 2 // ip with IPCodes: the L2 form where it is nearer
	FlagFront   = 4 // a later round: the candidate region's first keep slots hold the last round's best
	FlagMore    = 8 // another round follows: topk keeps its best in the region's first slots
)

// SearchKernels names the search shader files (search_NAME.wgsl); each
// has one entry point, main.
var SearchKernels = []string{"rotate", "coarse", "probe", "score", "topk"}

// CodeKernels are the kernels the pq and sq8 codes use beside
// SearchKernels (device.CodeData): pq's lookup tables, and the score of
// each code in place of score.
var CodeKernels = []string{"lut", "score_pq", "score_sq8"}

// SearchConsts are the per-pipeline sizes of the search kernels.
type SearchConsts struct {
	DimLen  int // rotate: floats of workgroup memory for a query (>= Dim)
	Bits    int // score: bits per level (1, 2, 4 or 8)
	QLen    int // score: floats of workgroup memory for q' (>= Words*32/Bits)
	SortLen int // topk: (key, entry) pairs sorted in workgroup memory (a power of two)
}

// WorkgroupBytes is the workgroup memory kernel name uses with c.
func (c SearchConsts) WorkgroupBytes(name string) int {
	sel := 4 * (SearchWG + SearchWG + 8) // histogram, scan, broadcasts
	switch name {
	case "rotate":
		return 4 * (c.DimLen + SearchWG)
	case "coarse":
		return 4 * CoarseK * (CoarseQ + CoarseA)
	case "probe":
		return sel
	case "score":
		return 4 * (c.QLen + 2*ScoreWG + 8)
	case "score_pq":
		return 4 * (ScoreWG + 4)
	case "score_sq8":
		return 4 * (2*c.QLen + ScoreWG + 4)
	case "topk":
		return sel + 8*c.SortLen
	}
	return 0
}

// SearchSource returns the WGSL text of search kernel name with the
// constants of c.
func SearchSource(name string, c SearchConsts) (string, error) {
	if !slices.Contains(SearchKernels, name) && !slices.Contains(CodeKernels, name) {
		return "", fmt.Errorf("shaders: no search kernel %q", name)
	}
	body, err := files.ReadFile("search_" + name + ".wgsl")
	if err != nil {
		return "", err
	}
	common, err := files.ReadFile("search_common.wgsl")
	if err != nil {
		return "", err
	}
	consts := []struct {
		name string
		v    int
	}{
		{"WG", SearchWG}, {"SWG", ScoreWG}, {"MAXGX", MaxGroupsX}, {"TILE", EntryTile},
		{"CQ", CoarseQ}, {"CA", CoarseA}, {"CK", CoarseK},
		{"F_IP", FlagIP}, {"F_IPCODES", FlagIPCodes}, {"F_FRONT", FlagFront}, {"F_MORE", FlagMore},
	}
	switch name {
	case "rotate":
		if c.DimLen < 1 {
			return "", fmt.Errorf("shaders: rotate needs DimLen, got %d", c.DimLen)
		}
		consts = append(consts, struct {
			name string
			v    int
		}{"DLEN", c.DimLen})
	case "score_sq8":
		if c.QLen < 4 {
			return "", fmt.Errorf("shaders: score_sq8 needs QLen >= 4, got %d", c.QLen)
		}
		consts = append(consts, struct {
			name string
			v    int
		}{"QLEN", c.QLen})
	case "score":
		if c.Bits != 1 && c.Bits != 2 && c.Bits != 4 && c.Bits != 8 {
			return "", fmt.Errorf("shaders: score needs Bits 1, 2, 4 or 8, got %d", c.Bits)
		}
		if c.QLen < 32/c.Bits {
			return "", fmt.Errorf("shaders: score needs QLen >= %d, got %d", 32/c.Bits, c.QLen)
		}
		consts = append(consts, []struct {
			name string
			v    int
		}{{"BITS", c.Bits}, {"PER", 32 / c.Bits}, {"MASK", 1<<c.Bits - 1}, {"QLEN", c.QLen}}...)
	case "topk":
		if c.SortLen < 2 || c.SortLen&(c.SortLen-1) != 0 {
			return "", fmt.Errorf("shaders: topk needs SortLen a power of two, got %d", c.SortLen)
		}
		consts = append(consts, struct {
			name string
			v    int
		}{"SORTLEN", c.SortLen})
	}
	var h strings.Builder
	fmt.Fprintf(&h, "// Constants from backend/webgpu/shaders/search.go.\n")
	for _, k := range consts {
		fmt.Fprintf(&h, "const %s: u32 = %du;\n", k.name, k.v)
	}
	h.WriteString("\n")
	h.Write(common)
	if name == "probe" || name == "topk" {
		sel, err := files.ReadFile("search_select.wgsl")
		if err != nil {
			return "", err
		}
		h.WriteString("\n")
		h.Write(sel)
	}
	h.WriteString("\n")
	h.Write(body)
	return h.String(), nil
}
