// Kernels of the CUDA backend for a graph build's exact measuring
// (graph_rows.go; device.RowMeter): every row's distances to its
// candidates, and the robust pruning of its lists. PTX for compute_80,
// generated with
//
//	nvcc -ptx -arch=compute_80 -O3 --fmad=false -o graph_rows.ptx graph_rows.cu
//
// (`make ptx`), committed and embedded; graph_rows.cu.sha256 records this
// file's hash, and a Go test fails when the PTX is older.
//
// A distance is the CPU's vec.L2Lanes to the bit: the squared difference
// of value j added into lane j%8 in order of j, each difference, product
// and sum rounded on its own (__fsub_rn, __fmul_rn, __fadd_rn, which nvcc
// never fuses; --fmad=false besides), the eight lanes folded as
// (l0+l4 + l2+l6) + (l1+l5 + l3+l7). Float16 values widen to float32
// exactly (cvt.f32.f16). Eight consecutive threads of a warp compute one
// distance, a thread a lane; a warp takes one list, four entries at once.
//
// Buffers (rows resident for the build; the rest a chunk of lists):
//   rows   n x d     float16 bits (_h) or float32 (_f)
//   of     lists     uint32   list i is row of[i]'s
//   offs   lists+1   uint32   its entries offs[i] .. offs[i+1]-1
//   ids    entries   uint32   rows
//   dists  entries   float32  squared distances to row of[i] (measure
//                             writes them; prune reads them)
//   kept, keptD  lists x r    prune's kept rows and their dists

#define FULL 0xffffffffu
#define NOROW 0xffffffffu // device.NoRow

__device__ __forceinline__ float load(const unsigned short* p, long long j) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(p[j]));
    return f;
}

__device__ __forceinline__ float load(const float* p, long long j) { return p[j]; }

// dist returns |row a - row b|^2 in the first thread of each group of
// eight (lane l = threadIdx.x & 7 sums lane l); every thread of the warp
// must call it, with rows that exist.
template <typename T>
__device__ __forceinline__ float dist(const T* rows, int d, unsigned a, unsigned b, int l) {
    const T* x = rows + (long long)a * d;
    const T* y = rows + (long long)b * d;
    float s = 0.f;
    for (int j = l; j < d; j += 8) {
        float t = __fsub_rn(load(x, j), load(y, j));
        s = __fadd_rn(s, __fmul_rn(t, t));
    }
    float h = __fadd_rn(s, __shfl_down_sync(FULL, s, 4, 8)); // l < 4: l + (l+4)
    float g = __fadd_rn(h, __shfl_down_sync(FULL, h, 2, 8)); // 0: (0+4)+(2+6); 1: (1+5)+(3+7)
    return __fadd_rn(g, __shfl_down_sync(FULL, g, 1, 8));
}

// measure: warp w sets dists of list w's entries.
template <typename T>
__device__ void measure(const T* rows, int d, const unsigned* of, const unsigned* offs, const unsigned* ids,
                        float* dists, int lists) {
    int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (w >= lists) return; // the whole warp
    int lane = threadIdx.x & 31, g = lane >> 3, l = lane & 7;
    unsigned p = of[w], lo = offs[w], hi = offs[w + 1];
    for (unsigned e = lo; e < hi; e += 4) {
        unsigned k = e + g;
        unsigned c = k < hi ? ids[k] : p;
        float v = dist(rows, d, p, c, l);
        if (l == 0 && k < hi) dists[k] = v;
    }
}

// prune: warp w robust-prunes list w (device.DeviceRows.Prune): the
// entries in order, each measured against the kept ones four at a time.
template <typename T>
__device__ void prune(const T* rows, int d, const unsigned* of, const unsigned* offs, const unsigned* ids,
                      const float* dists, int lists, int r, float alpha2, unsigned* kept, float* keptD) {
    int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (w >= lists) return;
    int lane = threadIdx.x & 31, g = lane >> 3, l = lane & 7;
    unsigned p = of[w], lo = offs[w], hi = offs[w + 1];
    unsigned* kk = kept + (long long)w * r;
    float* kd = keptD + (long long)w * r;
    int nk = 0;
    for (unsigned e = lo; e < hi && nk < r; e++) {
        unsigned c = ids[e];
        if (c == p) continue;
        float cd = dists[e];
        bool ok = true;
        for (int base = 0; ok && base < nk; base += 4) {
            int k = base + g;
            unsigned q = k < nk ? kk[k] : c;
            float v = dist(rows, d, c, q, l);
            bool drop = l == 0 && k < nk && (q == c || __fmul_rn(alpha2, v) <= cd);
            ok = !__any_sync(FULL, drop);
        }
        if (ok) {
            if (lane == 0) {
                kk[nk] = c;
                kd[nk] = cd;
            }
            nk++;
            __syncwarp(); // the kept row seen by every lane
        }
    }
    for (int k = nk + lane; k < r; k += 32) {
        kk[k] = NOROW;
        kd[k] = 0.f;
    }
}

extern "C" __global__ void vlc_g_measure_h(const unsigned short* rows, int d, const unsigned* of, const unsigned* offs,
                                           const unsigned* ids, float* dists, int lists) {
    measure(rows, d, of, offs, ids, dists, lists);
}

extern "C" __global__ void vlc_g_measure_f(const float* rows, int d, const unsigned* of, const unsigned* offs,
                                           const unsigned* ids, float* dists, int lists) {
    measure(rows, d, of, offs, ids, dists, lists);
}

extern "C" __global__ void vlc_g_prune_h(const unsigned short* rows, int d, const unsigned* of, const unsigned* offs,
                                         const unsigned* ids, const float* dists, int lists, int r, float alpha2,
                                         unsigned* kept, float* keptD) {
    prune(rows, d, of, offs, ids, dists, lists, r, alpha2, kept, keptD);
}

extern "C" __global__ void vlc_g_prune_f(const float* rows, int d, const unsigned* of, const unsigned* offs,
                                         const unsigned* ids, const float* dists, int lists, int r, float alpha2,
                                         unsigned* kept, float* keptD) {
    prune(rows, d, of, offs, ids, dists, lists, r, alpha2, kept, keptD);
}
