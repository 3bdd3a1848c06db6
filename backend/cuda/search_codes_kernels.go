package cuda

// codeKernelNames are the entry points of search_codes.ptx
// (search_codes.go), checked by TestPTXFresh in every build.
var codeKernelNames = []string{"vlc_c_rotate", "vlc_c_dots", "vlc_c_probe", "vlc_c_lut", "vlc_c_scan_pq", "vlc_c_scan_sq8", "vlc_c_topk"}
