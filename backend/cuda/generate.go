package cuda

// The kernels' PTX is generated on a machine with nvcc (CUDA 13.0 was used;
// `make ptx` at the repository root runs the same commands), then
// committed: building needs no CUDA toolkit. consts.cuh comes first, from
// kernels.go. The .sha256 files record which sources the PTX came from;
// TestPTXFresh fails when one changed since.
//
//go:generate go test -run TestConstsHeader -update .
//go:generate nvcc -ptx -arch=compute_80 -O3 -o kernels.ptx kernels.cu
//go:generate sh -c "sha256sum consts.cuh kernels.cu > kernels.cu.sha256"
//go:generate nvcc -ptx -arch=compute_90a -O3 -o kernels_sm90.ptx kernels_sm90.cu
//go:generate sh -c "sha256sum consts.cuh kernels.cu kernels_sm90.cu > kernels_sm90.cu.sha256"
//go:generate nvcc -ptx -arch=compute_80 -O3 -o search.ptx search.cu
//go:generate sh -c "sha256sum search.cu > search.cu.sha256"
//go:generate nvcc -ptx -arch=compute_80 -O3 --fmad=false -o search_codes.ptx search_codes.cu
//go:generate sh -c "sha256sum search_codes.cu > search_codes.cu.sha256"
//go:generate nvcc -ptx -arch=compute_80 -O3 --fmad=false -o graph_rows.ptx graph_rows.cu
//go:generate sh -c "sha256sum graph_rows.cu > graph_rows.cu.sha256"
