package cuda

// codeKernelNames are the entry points of search_codes.ptx
// (search_codes.go), checked by TestPTXFresh in every build.
var codeKernelNames = []string{"vlc_c_rotate", "vlc_c_dots", "vlc_c_probe", "vlc_c_lut", "vlc_c_scan_pq", "vlc_c_scan_sq8", "vlc_c_topk"}

// graphKernelNames are the entry points of graph_rows.ptx
// (graph_rows.go), checked by TestPTXFresh in every build.
var graphKernelNames = []string{"vlc_g_measure_h", "vlc_g_measure_f", "vlc_g_prune_h", "vlc_g_prune_f", "vlc_g_walk_h", "vlc_g_walk_f"}
