package cuda

// The kernels' PTX is generated on a machine with nvcc (CUDA 13.0 was used;
// `make ptx` at the repository root runs the same two commands), then
// committed: building needs no CUDA toolkit. kernels.cu.sha256 records which
// source the PTX came from; TestPTXFresh fails when kernels.cu changed since.
//
//go:generate nvcc -ptx -arch=compute_80 -O3 -o kernels.ptx kernels.cu
//go:generate sh -c "sha256sum kernels.cu > kernels.cu.sha256"
//go:generate nvcc -ptx -arch=compute_90a -O3 -o kernels_sm90.ptx kernels_sm90.cu
//go:generate sh -c "sha256sum kernels.cu kernels_sm90.cu > kernels_sm90.cu.sha256"
