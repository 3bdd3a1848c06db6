// Search kernels of the CUDA backend: an index of the rotated code resident
// on the device, searched for batches of queries (Go: search.go; the search
// itself is defined by device.IndexData). PTX for compute_80, generated with
//
//	nvcc -ptx -arch=compute_80 -O3 -o search.ptx search.cu
//
// (`make ptx`), committed and embedded; search.cu.sha256 records this
// file's hash, and a Go test fails when the PTX is older.
//
// Buffers (device-resident while the index is open):
//   rotA   m x d     float32  rotated anchors P a
//   norms  m         float32  |a|^2
//   offs   m+1       uint64   list a is entries offs[a] .. offs[a+1]-1
//   scale  m         float32  each list's s; sqrtS: float32(sqrt(s))
//   words  tiles x W x 32 u32 levels, word w of entry e at
//                             (e/32)*W*32 + w*32 + e%32
//   scal   tiles x 32 u32     per entry: float16 N16 (low), B16 (high)
//   signs  3 x d     float32  the rotation's sign rounds
// and per batch of nq queries:
//   q      nq x d    float32  prepared queries; rq the rotated ones, qq |q|^2
//   dots   nq x m    float32  <P q, P a>
//   probe  nq x nprobe int32  the probed lists; coff nq x (nprobe+1) each
//                             one's first candidate, and the total
//   cnt, cursor m     int32   queries probing each list; where its pairs go
//   order  nq x nprobe int32  the (query, rank) pairs, q*nprobe + r, by list
//   tiles  <= nq*nprobe/16 + m  int2  the tensor-core scan's tiles: (list,
//                             first pair in order), ntiles their count
//   frag   the levels again in the tensor-core scan's fragment layout (see
//          vlc_s_frag), for an index that scan can take
//   cand   nq x cap  float    the distance of every scored entry, in the
//                             order of the query's probed lists (coff)
//   outE, outD nq x keep      the keep best, nearest first
//   allow  (n+63)/64 u64      optional: entry e is searched when bit e%64 of
//                             allow[e/64] is set; a masked entry scores +Inf
//                             and comes back as entry -1

#include <cuda_fp16.h>

#define FULL 0xffffffffu
#define SBLOCK 256      // threads of every search kernel but dots
#define MAX_KEEP 4096   // device.MaxKeep

__device__ __forceinline__ float h2f(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

// okey maps a float to a uint32 of the same order (negative below
// positive, -0 below +0).
__device__ __forceinline__ unsigned okey(float f) {
    unsigned u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float ofloat(unsigned k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// scan_block returns the exclusive prefix sum of v over the block (SBLOCK
// threads) and sets *total to the sum; every thread must call it.
__device__ int scan_block(int v, int* total) {
    __shared__ int warps[SBLOCK / 32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int x = v;
    for (int o = 1; o < 32; o <<= 1) {
        int y = __shfl_up_sync(FULL, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) warps[warp] = x;
    __syncthreads();
    if (warp == 0) {
        int s = lane < SBLOCK / 32 ? warps[lane] : 0;
        for (int o = 1; o < 32; o <<= 1) {
            int y = __shfl_up_sync(FULL, s, o);
            if (lane >= o) s += y;
        }
        if (lane < SBLOCK / 32) warps[lane] = s;
    }
    __syncthreads();
    int before = warp ? warps[warp - 1] : 0;
    *total = warps[SBLOCK / 32 - 1];
    __syncthreads();
    return before + x - v;
}

// block_min_max sets *lo and *hi to the least lo and the greatest hi of
// the block's threads; every thread must call it.
__device__ void block_min_max(unsigned lo, unsigned hi, unsigned* blo, unsigned* bhi) {
    __shared__ unsigned s_min[SBLOCK / 32], s_max[SBLOCK / 32];
    for (int o = 16; o; o >>= 1) {
        lo = min(lo, __shfl_xor_sync(FULL, lo, o));
        hi = max(hi, __shfl_xor_sync(FULL, hi, o));
    }
    if ((threadIdx.x & 31) == 0) s_min[threadIdx.x >> 5] = lo, s_max[threadIdx.x >> 5] = hi;
    __syncthreads();
    *blo = s_min[0], *bhi = s_max[0];
    for (int w = 1; w < SBLOCK / 32; w++) *blo = min(*blo, s_min[w]), *bhi = max(*bhi, s_max[w]);
    __syncthreads();
}

// select_key finds the want-th smallest (1-based) of the n keys key(i):
// a radix select, 8 bits a pass, over the keys less the least of them
// from the top bit in which they differ (the keys of one query's
// distances share their top bits: starting there spreads the first pass
// over the bins instead of piling it on one). It returns that key and
// sets *ties to how many keys equal to it are among the want smallest.
template <typename Key>
__device__ unsigned select_key(Key key, int n, int want, int* ties, unsigned lo = ~0u, unsigned hi = 0, bool bounds = false) {
    __shared__ unsigned hist[256];
    __shared__ unsigned s_prefix;
    __shared__ int s_want;
    if (!bounds)  // the caller may pass each thread's least and greatest key
        for (int i = threadIdx.x; i < n; i += SBLOCK) {
            unsigned k = key(i);
            lo = min(lo, k);
            hi = max(hi, k);
        }
    unsigned base, top;
    block_min_max(lo, hi, &base, &top);
    int bits = 32 - __clz(top - base);  // the keys less base fit in bits bits
    unsigned prefix = 0, mask = 0;
    if (threadIdx.x == 0) s_want = want;
    for (int shift = max(bits - 8, 0); shift >= 0; shift -= 8) {
        hist[threadIdx.x] = 0;
        __syncthreads();
        for (int i = threadIdx.x; i < n; i += SBLOCK) {
            unsigned k = key(i) - base;
            if ((k & mask) == prefix) atomicAdd(&hist[(k >> shift) & 255], 1u);
        }
        __syncthreads();
        int c = hist[threadIdx.x], total;
        int w = s_want;  // read by all before scan_block's barriers, written after them
        int before = scan_block(c, &total);
        if (before < w && w <= before + c) {
            s_prefix = prefix | ((unsigned)threadIdx.x << shift);
            s_want = w - before;
        }
        __syncthreads();
        prefix = s_prefix;
        mask |= 255u << shift;
        if (shift > 0 && shift < 8) shift = 8;  // the last pass takes the lowest bits
    }
    *ties = s_want;
    __syncthreads();
    return prefix + base;
}

// take_smallest calls out(at, i), at = 0 .. min(want, n)-1 in no set
// order, with the index i of each of the want smallest keys of key(0..n-1),
// ties at the boundary to the lowest tie(i) (up to TIES of them; beyond,
// to the lowest indexes), and returns how many.
#define TIES 256
template <typename Key, typename Tie, typename Out>
__device__ int take_smallest(Key key, Tie tie, int n, int want, Out out, unsigned lo = ~0u, unsigned hi = 0, bool bounds = false) {
    if (want >= n) {
        for (int i = threadIdx.x; i < n; i += SBLOCK) out(i, i);
        return n;
    }
    int ties;
    unsigned t = select_key(key, n, want, &ties, lo, hi, bounds);
    __shared__ int s_less, s_eq, s_tie[TIES];
    if (threadIdx.x == 0) s_less = s_eq = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += SBLOCK) {
        unsigned k = key(i);
        if (k < t) {
            out(atomicAdd(&s_less, 1), i);
        } else if (k == t) {
            int e = atomicAdd(&s_eq, 1);
            if (e < TIES) s_tie[e] = i;
        }
    }
    __syncthreads();
    int less = want - ties;
    if (s_eq <= TIES) {  // the ties' lowest indexes, by rank among them
        for (int e = threadIdx.x; e < s_eq; e += SBLOCK) {
            int rank = 0, i = s_tie[e];
            unsigned ti = tie(i);
            for (int f = 0; f < s_eq; f++) {
                unsigned tf = tie(s_tie[f]);
                rank += tf < ti || (tf == ti && s_tie[f] < i);
            }
            if (rank < ties) out(less + rank, i);
        }
    } else {  // many equal keys: an ordered pass
        int tied = 0;
        for (int base = 0; base < n; base += SBLOCK) {
            int i = base + threadIdx.x;
            int eq = i < n && key(i) == t, eqTotal;
            int before = scan_block(eq, &eqTotal);
            if (eq && tied + before < ties) out(less + tied + before, i);
            tied += eqTotal;
        }
    }
    __syncthreads();
    return want;
}

// select_few calls out(at, i), at = 0 .. want-1 in no set order, with
// the index i of each of the want least keys of keys[0..n-1] (shared
// memory), ties to the lower index, as take_smallest does, without its
// radix passes: a threshold from a sample of SBLOCK keys (each ranked
// by a thread) leaves about want + 4 n/SBLOCK keys at or under it, and
// each of those is placed by its rank among them, (key, index) being
// distinct. It returns false, having called out for none, where the
// threshold leaves fewer than want or more than SBLOCK keys, or n is too
// small for a sample to pay: the caller then selects over every key.
template <typename Out>
__device__ bool select_few(const unsigned* keys, int n, int want, Out out) {
    __shared__ unsigned long long s_k[SBLOCK], s_t;
    __shared__ int s_c;
    if (n < 2 * SBLOCK || 8 * want > n) return false;
    const int stride = n / SBLOCK, r = (int)(((long long)want * SBLOCK + n - 1) / n) + 4;
    const int i0 = threadIdx.x * stride;
    unsigned long long mine = ((unsigned long long)keys[i0] << 32) | (unsigned)i0;
    s_k[threadIdx.x] = mine;
    if (threadIdx.x == 0) s_c = 0;
    __syncthreads();
    int rank = 0;
    for (int f = 0; f < SBLOCK; f++) rank += s_k[f] < mine;
    if (rank == r - 1) s_t = mine;
    __syncthreads();
    const unsigned long long t = s_t;
    __syncthreads();  // the sample's room takes the few
    for (int base = 0; base < n; base += SBLOCK) {
        int i = base + threadIdx.x;
        unsigned long long k = i < n ? ((unsigned long long)keys[i] << 32) | (unsigned)i : ~0ull;
        bool in = i < n && k <= t;
        unsigned ball = __ballot_sync(FULL, in);
        int first = 0;
        if ((threadIdx.x & 31) == 0 && ball) first = atomicAdd(&s_c, __popc(ball));
        first = __shfl_sync(FULL, first, 0);
        int at = first + __popc(ball & ((1u << (threadIdx.x & 31)) - 1));
        if (in && at < SBLOCK) s_k[at] = k;
    }
    __syncthreads();
    const int c = s_c;
    if (c < want || c > SBLOCK) {
        __syncthreads();
        return false;
    }
    if ((int)threadIdx.x < c) {
        unsigned long long k = s_k[threadIdx.x];
        int rk = 0;
        for (int f = 0; f < c; f++) rk += s_k[f] < k;
        if (rk < want) out(rk, (int)(unsigned)k);
    }
    __syncthreads();
    return true;
}

// vlc_s_rotate: one block per query: qq = |q|^2 and rq = P q, the
// rotation's steps in quant.Rotation's order (each output of a butterfly
// is the same float32 sum as on the host).
extern "C" __global__ void vlc_s_rotate(const float* __restrict__ q, const float* __restrict__ signs, int d, int p, float pscale,
                                        float* __restrict__ rq, float* __restrict__ qq, __half* __restrict__ rqh, __half* __restrict__ rql,
                                        float* __restrict__ qinv, int dp) {
    extern __shared__ float x[];
    const float* src = q + (size_t)blockIdx.x * d;
    float s = 0;
    for (int j = threadIdx.x; j < d; j += SBLOCK) {
        float v = src[j];
        x[j] = v;
        s += v * v;
    }
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
    __shared__ float part[SBLOCK / 32];
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0;
        for (int w = 0; w < SBLOCK / 32; w++) t += part[w];
        qq[blockIdx.x] = t;
    }
    for (int round = 0; round < 3; round++) {
        for (int j = threadIdx.x; j < d; j += SBLOCK) x[j] *= signs[round * d + j];
        __syncthreads();
        for (int start = 0;; start = d - p) {
            float* y = x + start;
            for (int h = 1; h < p; h <<= 1) {
                for (int k = threadIdx.x; k < p / 2; k += SBLOCK) {
                    int i = (k / h) * 2 * h + k % h;
                    float a = y[i], b = y[i + h];
                    y[i] = a + b;
                    y[i + h] = a - b;
                }
                __syncthreads();
            }
            for (int j = threadIdx.x; j < p; j += SBLOCK) y[j] *= pscale;
            __syncthreads();
            if (start == d - p) break;
        }
    }
    float* dst = rq + (size_t)blockIdx.x * d;
    float mx = 0.f;
    for (int j = threadIdx.x; j < d; j += SBLOCK) {
        dst[j] = x[j];
        mx = fmaxf(mx, fabsf(x[j]));
    }
    if (!rqh) return;
    // For vlc_s_dots_mma: P q scaled by a power of two (its largest
    // magnitude below 2^14) as two float16 halves, zero from d to dp.
    for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(FULL, mx, o));
    __shared__ float s_mx[SBLOCK / 32];
    if ((threadIdx.x & 31) == 0) s_mx[threadIdx.x >> 5] = mx;
    __syncthreads();
    mx = s_mx[0];
    for (int w = 1; w < SBLOCK / 32; w++) mx = fmaxf(mx, s_mx[w]);
    int ex = 0;
    frexpf(mx, &ex);
    int sh = min(max(14 - ex, -100), 100);
    float sc = ldexpf(1.f, sh);
    if (threadIdx.x == 0) qinv[blockIdx.x] = ldexpf(1.f, -sh);
    __half* h = rqh + (size_t)blockIdx.x * dp;
    __half* l = rql + (size_t)blockIdx.x * dp;
    for (int j = threadIdx.x; j < dp; j += SBLOCK) {
        float v = j < d ? x[j] * sc : 0.f;
        __half hv = __float2half_rn(v);
        h[j] = hv;
        l[j] = __float2half_rn(v - __half2float(hv));
    }
}

// vlc_s_rotateE: vlc_s_rotate's outputs, a warp per query (SBLOCK/32
// queries a block, each in d floats of shared memory), for p = 32 E: the
// window's values in registers, value r*32 + lane in v[r], so that the
// butterflies of span h < 32 are shuffles and the rest register pairs.
// P q is vlc_s_rotate's to the bit (the same butterflies, the spans in
// the same order), without a block barrier between them: one query took
// 10.0 us against vlc_s_rotate's 17.9 (ncu, NVIDIA H200). |q|^2 is
// summed in another order (a lane's values, then across the warp), so
// its last bits may differ from vlc_s_rotate's. The caller keeps it to
// RotP = p with p <= d < 2p: the values a lane loads.
template <int E>
__device__ void rotate_warp(const float* __restrict__ q, const float* __restrict__ signs, int d, int p, float pscale, float* __restrict__ rq,
                            float* __restrict__ qq, __half* __restrict__ rqh, __half* __restrict__ rql, float* __restrict__ qinv, int dp, int nq) {
    extern __shared__ float xs[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int qi = blockIdx.x * (SBLOCK / 32) + warp;
    if (qi >= nq) return;  // no block barrier below
    float* x = xs + (size_t)warp * d;
    const float* src = q + (size_t)qi * d;
    // d < 2p = 64 E: a lane's values are at most 2E, and the loops over
    // them unrolled put all their loads in flight at once (a loop of
    // dependent round trips made one query cost 12 us).
    float s = 0;
#pragma unroll
    for (int r = 0; r < 2 * E; r++) {
        int j = lane + 32 * r;
        if (j < d) {
            float v = src[j];
            x[j] = v;
            s += v * v;
        }
    }
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
    if (lane == 0) qq[qi] = s;
    for (int round = 0; round < 3; round++) {
        const float* sg = signs + (size_t)round * d;
#pragma unroll
        for (int r = 0; r < 2 * E; r++) {
            int j = lane + 32 * r;
            if (j < d) x[j] *= sg[j];
        }
        __syncwarp();
        for (int start = 0;; start = d - p) {
            float* y = x + start;
            float v[E];
#pragma unroll
            for (int r = 0; r < E; r++) v[r] = y[r * 32 + lane];
#pragma unroll
            for (int h = 1; h < 32; h <<= 1) {
#pragma unroll
                for (int r = 0; r < E; r++) {
                    float o = __shfl_xor_sync(FULL, v[r], h);
                    v[r] = (lane & h) ? o - v[r] : v[r] + o;
                }
            }
#pragma unroll
            for (int h = 1; h < E; h <<= 1) {
#pragma unroll
                for (int r = 0; r < E; r++) {
                    if (r & h) continue;
                    float a = v[r], b = v[r + h];
                    v[r] = a + b;
                    v[r + h] = a - b;
                }
            }
            __syncwarp();
#pragma unroll
            for (int r = 0; r < E; r++) y[r * 32 + lane] = v[r] * pscale;
            __syncwarp();
            if (start == d - p) break;
        }
    }
    float* dst = rq + (size_t)qi * d;
    float mx = 0.f;
#pragma unroll
    for (int r = 0; r < 2 * E; r++) {
        int j = lane + 32 * r;
        if (j < d) {
            dst[j] = x[j];
            mx = fmaxf(mx, fabsf(x[j]));
        }
    }
    if (!rqh) return;
    for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(FULL, mx, o));
    int ex = 0;
    frexpf(mx, &ex);
    int sh = min(max(14 - ex, -100), 100);
    float sc = ldexpf(1.f, sh);
    if (lane == 0) qinv[qi] = ldexpf(1.f, -sh);
    __half* h = rqh + (size_t)qi * dp;
    __half* l = rql + (size_t)qi * dp;
    for (int j = lane; j < dp; j += 32) {
        float v = j < d ? x[j] * sc : 0.f;
        __half hv = __float2half_rn(v);
        h[j] = hv;
        l[j] = __float2half_rn(v - __half2float(hv));
    }
}
#define ROTW_ARGS                                                                                                                   \
    const float *__restrict__ q, const float *__restrict__ signs, int d, int p, float pscale, float *__restrict__ rq, float *__restrict__ qq, \
        __half *__restrict__ rqh, __half *__restrict__ rql, float *__restrict__ qinv, int dp, int nq
#define ROTW_PASS q, signs, d, p, pscale, rq, qq, rqh, rql, qinv, dp, nq
extern "C" __global__ void __launch_bounds__(SBLOCK) vlc_s_rotate1(ROTW_ARGS) { rotate_warp<1>(ROTW_PASS); }
extern "C" __global__ void __launch_bounds__(SBLOCK) vlc_s_rotate2(ROTW_ARGS) { rotate_warp<2>(ROTW_PASS); }
extern "C" __global__ void __launch_bounds__(SBLOCK) vlc_s_rotate4(ROTW_ARGS) { rotate_warp<4>(ROTW_PASS); }
extern "C" __global__ void __launch_bounds__(SBLOCK) vlc_s_rotate8(ROTW_ARGS) { rotate_warp<8>(ROTW_PASS); }
extern "C" __global__ void __launch_bounds__(SBLOCK) vlc_s_rotate16(ROTW_ARGS) { rotate_warp<16>(ROTW_PASS); }
extern "C" __global__ void __launch_bounds__(SBLOCK) vlc_s_rotate32(ROTW_ARGS) { rotate_warp<32>(ROTW_PASS); }

// vlc_s_dots: dots (nq x m) = rq (nq x d) . rotA (m x d)^T, float32, a
// 128 x 128 tile a block of 256 threads, 8 x 8 a thread, 8 dimensions a
// step through shared memory.
#define DT 128
#define DK 8
extern "C" __global__ void __launch_bounds__(256) vlc_s_dots(const float* __restrict__ rq, const float* __restrict__ rotA, int nq, int m,
                                                             int d, float* __restrict__ dots) {
    __shared__ float as[DK][DT + 4], bs[DK][DT + 4];
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    int q0 = blockIdx.y * DT, a0 = blockIdx.x * DT;
    float acc[8][8] = {};
    // Each thread loads 4 values of each tile: rows lr and lr+64, dimensions lk, lk+4.
    int lr = threadIdx.x / 4, lk = threadIdx.x % 4;
    for (int k0 = 0; k0 < d; k0 += DK) {
        for (int h = 0; h < 2; h++) {
            int r = lr + 64 * h;
            for (int c = 0; c < 2; c++) {
                int k = lk + 4 * c;
                as[k][r] = (q0 + r < nq && k0 + k < d) ? rq[(size_t)(q0 + r) * d + k0 + k] : 0.f;
                bs[k][r] = (a0 + r < m && k0 + k < d) ? rotA[(size_t)(a0 + r) * d + k0 + k] : 0.f;
            }
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < DK; k++) {
            float a[8], b[8];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                a[i] = as[k][ty * 4 + i];
                a[i + 4] = as[k][64 + ty * 4 + i];
                b[i] = bs[k][tx * 4 + i];
                b[i + 4] = bs[k][64 + tx * 4 + i];
            }
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
                for (int j = 0; j < 8; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; i++) {
        int qi = q0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
        if (qi >= nq) continue;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            int aj = a0 + (j < 4 ? tx * 4 + j : 64 + tx * 4 + j - 4);
            if (aj < m) dots[(size_t)qi * m + aj] = acc[i][j];
        }
    }
}

// vlc_s_dots_few: dots for a few queries (a warp per anchor, the
// anchor's row read once from memory for all of them): where the tiled
// product would compute 128 query rows for one.
extern "C" __global__ void vlc_s_dots_few(const float* __restrict__ rq, const float* __restrict__ rotA, int nq, int m, int d,
                                          float* __restrict__ dots) {
    int a = blockIdx.x * (SBLOCK / 32) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (a >= m) return;
    const float* ar = rotA + (size_t)a * d;
    for (int i = 0; i < nq; i++) {
        const float* qr = rq + (size_t)i * d;
        float s = 0.f;
        for (int j = lane; j < d; j += 32) s = fmaf(qr[j], ar[j], s);
        for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
        if (lane == 0) dots[(size_t)i * m + a] = s;
    }
}

// vlc_s_probe: one block per query: the nprobe lists of least distance
// (norms - 2 qa, or -qa for ip), ties to the lower list, in no set order;
// coff their candidates' offsets, exclusive, and the total; cnt[a], when
// cnt is not null, counts the batch's queries probing list a (zeroed
// beforehand). When cached (the keys dynamic shared memory holds) is at
// least m, the keys are computed once into shared memory and the
// select's passes read them there (each pass over memory cost a round
// trip per 256 lists: 14.6 us for one query of 4,096 lists on an H200);
// with sample set, the select is select_few's where it applies (9.2 us
// then; but 35 us instead of 25 for a batch of 1,000, whose blocks
// overlap the radix passes' waits).
extern "C" __global__ void vlc_s_probe(const float* __restrict__ dots, const float* __restrict__ norms,
                                       const unsigned long long* __restrict__ offs, int m, int ip, int nprobe,
                                       int* __restrict__ probe, int* __restrict__ coff, int* __restrict__ cnt, int cached, int sample) {
    extern __shared__ unsigned pkeys[];
    const float* qa = dots + (size_t)blockIdx.x * m;
    int* pr = probe + (size_t)blockIdx.x * nprobe;
    auto key = [&](int a) { return okey(ip ? -qa[a] : norms[a] - 2.f * qa[a]); };
    auto tie = [](int a) { return (unsigned)a; };
    if (m <= cached) {
        unsigned lo = ~0u, hi = 0;
#pragma unroll 8
        for (int a = threadIdx.x; a < m; a += SBLOCK) {
            unsigned k = key(a);
            pkeys[a] = k;
            lo = min(lo, k);
            hi = max(hi, k);
        }
        __syncthreads();
        if (!sample || !select_few(pkeys, m, nprobe, [&](int at, int a) { pr[at] = a; }))
            take_smallest([&](int a) { return pkeys[a]; }, tie, m, nprobe, [&](int at, int a) { pr[at] = a; }, lo, hi, true);
    } else {
        take_smallest(key, tie, m, nprobe, [&](int at, int a) { pr[at] = a; });
    }
    __syncthreads();
    int* co = coff + (size_t)blockIdx.x * (nprobe + 1);
    int run = 0;
    for (int base = 0; base < nprobe; base += SBLOCK) {
        int r = base + threadIdx.x, size = 0, total;
        if (r < nprobe) size = (int)(offs[pr[r] + 1] - offs[pr[r]]);
        int at = scan_block(size, &total);
        if (r < nprobe) co[r] = run + at;
        run += total;
    }
    if (threadIdx.x == 0) co[nprobe] = run;
    if (cnt)
        for (int r = threadIdx.x; r < nprobe; r += SBLOCK) atomicAdd(&cnt[pr[r]], 1);
}

// vlc_s_starts: one block: cursor[a] = the exclusive prefix sum of cnt,
// where list a's pairs start in the batch's list order. Each thread sums
// a run of consecutive lists, so the block scans once (a scan per 256
// lists cost a round trip to memory each: 13 us for 4,096 lists).
extern "C" __global__ void vlc_s_starts(const int* __restrict__ cnt, int m, int* __restrict__ cursor) {
    int per = (m + SBLOCK - 1) / SBLOCK, a0 = min(m, (int)threadIdx.x * per), a1 = min(a0 + per, m);
    int sum = 0, total;
#pragma unroll 4
    for (int a = a0; a < a1; a++) sum += cnt[a];
    int run = scan_block(sum, &total);
    for (int a = a0; a < a1; a++) {
        cursor[a] = run;
        run += cnt[a];
    }
}

// vlc_s_order: one block per query: its (query, rank) pairs, q*nprobe +
// r, placed in order[] by list (the order inside a list varies from run to
// run; no result depends on it).
extern "C" __global__ void vlc_s_order(const int* __restrict__ probe, int nprobe, int* __restrict__ cursor, int* __restrict__ order) {
    for (int r = threadIdx.x; r < nprobe; r += SBLOCK) {
        int pair = blockIdx.x * nprobe + r;
        order[atomicAdd(&cursor[probe[pair]], 1)] = pair;
    }
}

// level_f is the float of a level (an integer below 2^23) without a
// conversion instruction: 2^23 + l as float bits, less 2^23, exactly.
__device__ __forceinline__ float level_f(unsigned bits23) { return __uint_as_float(bits23 | 0x4B000000u) - 8388608.f; }

// levels sets f to the floats of the 32/B levels of word x.
template <int B>
__device__ __forceinline__ void levels(unsigned x, float* f) {
    if (B == 4) {
        unsigned lo = x & 0x0F0F0F0Fu, hi = (x >> 4) & 0x0F0F0F0Fu;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            f[2 * i] = __uint_as_float(__byte_perm(lo, 0x4B000000u, 0x7650 + i)) - 8388608.f;
            f[2 * i + 1] = __uint_as_float(__byte_perm(hi, 0x4B000000u, 0x7650 + i)) - 8388608.f;
        }
    } else if (B == 8) {
#pragma unroll
        for (int i = 0; i < 4; i++) f[i] = __uint_as_float(__byte_perm(x, 0x4B000000u, 0x7650 + i)) - 8388608.f;
    } else {
#pragma unroll
        for (int i = 0; i < 32 / B; i++) f[i] = level_f((x >> (i * B)) & ((1u << B) - 1));
    }
}

#define GQ 8
#define TSAMPLE 1024  // vlc_s_topk's sample of a query's keys
#define TCAND 1536    // the most keys at or below its threshold it selects from
#define INF __int_as_float(0x7f800000)

// allowed is 1 when entry e may be returned (allow null: every entry).
__device__ __forceinline__ unsigned allowed(const unsigned long long* __restrict__ allow, int e) {
    return allow ? (unsigned)(__ldg(allow + (e >> 6)) >> (e & 63)) & 1u : 1u;
}

// score writes the estimates of entries lo..hi-1 for the gq queries whose
// residuals are in qp (pad values each) and constants in the s_ arrays.
// LANES threads take an entry (4 or 8 when the batch is too small to fill the
// GPU otherwise, each summing every 4th word, the sums then added across
// them), and the blocks of grid y share a list's entries.
template <int B, int LANES>
__device__ __forceinline__ void score(const unsigned* __restrict__ words, const unsigned* __restrict__ scal, float sa, float sb, int lo,
                                      int hi, int W, int pad, int gq, const float* qp, const float* s_qsum, const float* s_sq,
                                      const float* s_mul, const float* s_bias, const int* s_dot, const long long* s_out,
                                      float* __restrict__ cand, const unsigned long long* __restrict__ allow) {
    const int P = 32 / B, per = SBLOCK / LANES;
    int sub = threadIdx.x % LANES;
    for (int base = (lo & ~31) + blockIdx.y * per; base < hi; base += per * gridDim.y) {
        int e = base + threadIdx.x / LANES;
        bool live = e >= lo && e < hi;
        int ec = live ? e : lo;  // a dead slot reads a live entry's words and writes nothing
        const unsigned* wp = words + (size_t)(ec >> 5) * W * 32 + (ec & 31);
        float t[GQ];
#pragma unroll
        for (int k = 0; k < GQ; k++) t[k] = 0.f;
        for (int w0 = sub; w0 < W; w0 += 4 * LANES) {
            unsigned x[4];  // four words in flight
#pragma unroll
            for (int u = 0; u < 4; u++) x[u] = w0 + u * LANES < W ? __ldg(wp + (w0 + u * LANES) * 32) : 0u;
#pragma unroll
            for (int u = 0; u < 4; u++) {
                int w = w0 + u * LANES;
                if (w >= W) break;
                float f[P];
                levels<B>(x[u], f);
#pragma unroll
                for (int k = 0; k < GQ; k++) {
                    if (k < gq) {
                        const float* qk = qp + k * pad + w * P;
#pragma unroll
                        for (int i = 0; i < P; i++) t[k] = fmaf(qk[i], f[i], t[k]);
                    }
                }
            }
        }
        if (LANES > 1) {
#pragma unroll
            for (int k = 0; k < GQ; k++)
#pragma unroll
                for (int o = 1; o < LANES; o <<= 1) t[k] += __shfl_xor_sync(FULL, t[k], o);
        }
        if (!live || sub != 0) continue;
        unsigned sc = __ldg(scal + e);
        float beta = __fmul_rn(h2f((unsigned short)(sc >> 16)), sb);
        float norm = __fmul_rn(h2f((unsigned short)(sc & 0xffff)), sa);
        bool masked = allowed(allow, e) == 0;
#pragma unroll
        for (int k = 0; k < GQ; k++) {
            if (k < gq) {
                float qu = __fsub_rn(t[k], s_qsum[k]);
                float score = s_dot[k] ? __fmul_rn(beta, qu) : __fsub_rn(__fadd_rn(s_sq[k], norm), __fmul_rn(__fmul_rn(2.f, beta), qu));
                float dist = masked ? INF : __fadd_rn(__fmul_rn(s_mul[k], score), s_bias[k]);
                cand[s_out[k] + e] = dist;
            }
        }
    }
}

// vlc_s_scanB: block b takes the pairs order[b*g .. b*g+g-1] (g <= GQ):
// runs of them that probe the same list are scored together, each word
// of an entry's levels read and unpacked once for all the run's queries.
// Every entry of the list gets device.IndexData's estimate for each query
// of the run, written to the query's candidates. A query's sums are the
// same float32 operations in the same order whatever its run; but small
// batches split an entry's words between 4 threads (and take the few-query
// dots), which adds in another order: a query alone and in a large batch
// can differ in the last bits.
template <int B>
__device__ void scan(const float* __restrict__ rq, const float* __restrict__ qqs, const float* __restrict__ dots,
                     const float* __restrict__ rotA, const float* __restrict__ norms, const unsigned long long* __restrict__ offs,
                     const float* __restrict__ scale, const float* __restrict__ sqrtS, const unsigned* __restrict__ words,
                     const unsigned* __restrict__ scal, int d, int m, int W, int metricIP, int ipCodes, int nprobe,
                     const int* __restrict__ probe, const int* __restrict__ coff, int cap, float* __restrict__ cand,
                     const int* __restrict__ order, int npairs, int g, int lanes, const unsigned long long* __restrict__ allow) {
    extern __shared__ float qp[];  // GQ x pad: each query's q', zero past d
    __shared__ float s_qsum[GQ], s_sq[GQ], s_mul[GQ], s_bias[GQ];
    __shared__ int s_dot[GQ];
    __shared__ long long s_out[GQ];
    const int P = 32 / B, pad = W * P;
    int p1 = min((int)blockIdx.x * g + g, npairs);
#define PAIR(p) (order ? order[p] : (p))
    for (int p = blockIdx.x * g; p < p1;) {
        int a = probe[PAIR(p)];
        int end = p + 1;
        while (end < p1 && probe[PAIR(end)] == a) end++;
        int gq = end - p;
        int lo = (int)offs[a], hi = (int)offs[a + 1];
        if (lo == hi) {
            p = end;
            continue;
        }
        float na = norms[a];
        if (threadIdx.x < gq) {
            int pair = PAIR(p + threadIdx.x), q = pair / nprobe, r = pair % nprobe;
            float qq = qqs[q], qa = dots[(size_t)q * m + a];
            int dot = 0;
            float mul = 1.f, bias = 0.f;
            if (ipCodes && __fadd_rn(__fsub_rn(qq, __fmul_rn(2.f, qa)), na) < qq) {
                mul = 0.5f;
                bias = -__fadd_rn(qq, na) / 2.f;
            } else if (metricIP) {
                dot = 1;
                mul = -1.f;
                bias = -qa;
            }
            s_dot[threadIdx.x] = dot;
            s_mul[threadIdx.x] = mul;
            s_bias[threadIdx.x] = bias;
            s_out[threadIdx.x] = (long long)q * cap + coff[(size_t)q * (nprobe + 1) + r] - lo;
        }
        __syncthreads();
        const float* anc = rotA + (size_t)a * d;
        for (int i = threadIdx.x; i < gq * pad; i += SBLOCK) {
            int k = i / pad, j = i - k * pad;
            float v = 0.f;
            if (j < d) {
                const float* src = rq + (size_t)(PAIR(p + k) / nprobe) * d;
                v = s_dot[k] ? src[j] : __fsub_rn(src[j], anc[j]);
            }
            qp[k * pad + j] = v;
        }
        __syncthreads();
        int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
        if (warp < gq) {  // warp k sums query k's q' and its squares
            float su = 0.f, sq = 0.f;
            for (int j = lane; j < pad; j += 32) {
                float v = qp[warp * pad + j];
                su += v;
                sq = fmaf(v, v, sq);
            }
            for (int o = 16; o; o >>= 1) {
                su += __shfl_xor_sync(FULL, su, o);
                sq += __shfl_xor_sync(FULL, sq, o);
            }
            if (lane == 0) {
                s_qsum[warp] = su * (float)((1 << B) - 1) / 2.f;
                s_sq[warp] = sq;
            }
        }
        __syncthreads();
        if (lanes == 8)
            score<B, 8>(words, scal, scale[a], sqrtS[a], lo, hi, W, pad, gq, qp, s_qsum, s_sq, s_mul, s_bias, s_dot, s_out, cand, allow);
        else if (lanes == 4)
            score<B, 4>(words, scal, scale[a], sqrtS[a], lo, hi, W, pad, gq, qp, s_qsum, s_sq, s_mul, s_bias, s_dot, s_out, cand, allow);
        else
            score<B, 1>(words, scal, scale[a], sqrtS[a], lo, hi, W, pad, gq, qp, s_qsum, s_sq, s_mul, s_bias, s_dot, s_out, cand, allow);
        __syncthreads();
        p = end;
    }
#undef PAIR
}

#define SCAN_ARGS                                                                                                                 \
    const float *__restrict__ rq, const float *__restrict__ qqs, const float *__restrict__ dots, const float *__restrict__ rotA, \
        const float *__restrict__ norms, const unsigned long long *__restrict__ offs, const float *__restrict__ scale,           \
        const float *__restrict__ sqrtS, const unsigned *__restrict__ words, const unsigned *__restrict__ scal, int d, int m, int W, \
        int metricIP, int ipCodes, int nprobe, const int *__restrict__ probe, const int *__restrict__ coff, int cap,             \
        float *__restrict__ cand, const int *__restrict__ order, int npairs, int g, int lanes, const unsigned long long *__restrict__ allow
#define SCAN_PASS \
    rq, qqs, dots, rotA, norms, offs, scale, sqrtS, words, scal, d, m, W, metricIP, ipCodes, nprobe, probe, coff, cap, cand, order, npairs, g, lanes, allow
extern "C" __global__ void __launch_bounds__(SBLOCK) vlc_s_scan1(SCAN_ARGS) { scan<1>(SCAN_PASS); }
extern "C" __global__ void __launch_bounds__(SBLOCK) vlc_s_scan2(SCAN_ARGS) { scan<2>(SCAN_PASS); }
extern "C" __global__ void __launch_bounds__(SBLOCK) vlc_s_scan4(SCAN_ARGS) { scan<4>(SCAN_PASS); }
extern "C" __global__ void __launch_bounds__(SBLOCK) vlc_s_scan8(SCAN_ARGS) { scan<8>(SCAN_PASS); }

// The tensor-core scan, for batches large enough to give a list several
// queries: a block takes up to QT of the pairs that probe one list (a
// tile) and scores all of them against each of the list's entries with
// mma.sync (f16 inputs, f32 sums), so that a list's codes are read once
// per QT queries and every product runs on the tensor cores. A query's
// residual q' is scaled by a power of two (exact) and split into two
// float16 halves, hi + lo, which carry about 22 bits of it; the levels,
// centred on L/2, are exact in float16. So sum_j q'_j (l_j - L/2), the qu
// of device.IndexData, is the float32 sum of two products, within a few
// units of the float32 rounding of the FMA scan (in another order).

#define QT 32  // the most queries a tile: two m16 tiles (vlc_s_mmaB; vlc_s_mmahB takes 16)

// vlc_s_tiles: one block, after vlc_s_starts and before vlc_s_order: the
// tiles of each list with pairs, qt pairs a tile (the scan's, 16 or QT):
// tiles[t] = (list, first pair's position in order), and their count (a
// run of lists a thread, as in vlc_s_starts).
extern "C" __global__ void vlc_s_tiles(const int* __restrict__ cnt, const int* __restrict__ cursor, int m, int qt, int2* __restrict__ tiles,
                                       int* __restrict__ ntiles) {
    int per = (m + SBLOCK - 1) / SBLOCK, a0 = min(m, (int)threadIdx.x * per), a1 = min(a0 + per, m);
    int sum = 0, total;
#pragma unroll 4
    for (int a = a0; a < a1; a++) sum += (cnt[a] + qt - 1) / qt;
    int run = scan_block(sum, &total);
    for (int a = a0; a < a1; a++) {
        int c = (cnt[a] + qt - 1) / qt, st = cursor[a];
        for (int j = 0; j < c; j++) tiles[run + j] = make_int2(a, st + j * qt);
        run += c;
    }
    if (threadIdx.x == 0) *ntiles = total;
}

__device__ __forceinline__ void mma16816(float* c, const unsigned* a, const unsigned* b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void ldsm4(unsigned* r, const __half* p) {
    unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}

// vlc_s_dots_mma: dots = rq . rotA^T on the tensor cores, for batches
// past a few queries: each operand as two float16 halves (hi + lo, each
// scaled by a power of two: qinv a query's, ainv the anchors'), and the
// product as hi.hi + hi.lo + lo.hi in float32 sums, which carries about
// 22 bits of each value: within a few float32 roundings of vlc_s_dots.
// A block takes 64 queries x 128 anchors, 32 dimensions a stage through
// shared memory; a warp, 32 x 32.
#define DQ 64
#define DA 128
#define DK2 32
extern "C" __global__ void __launch_bounds__(256) vlc_s_dots_mma(const __half* __restrict__ qh, const __half* __restrict__ ql,
                                                                 const float* __restrict__ qinv, const __half* __restrict__ ah,
                                                                 const __half* __restrict__ al, float ainv, int nq, int m, int dp,
                                                                 float* __restrict__ dots) {
    __shared__ __align__(16) __half sqh[DQ][DK2 + 8], sql[DQ][DK2 + 8], sah[DA][DK2 + 8], sal[DA][DK2 + 8];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wq = warp >> 2, wa = warp & 3;
    int q0 = blockIdx.y * DQ, a0 = blockIdx.x * DA;
    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int v = 0; v < 4; v++) acc[i][j][v] = 0.f;
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    for (int k0 = 0; k0 < dp; k0 += DK2) {
        {
            int r = threadIdx.x >> 2, c8 = (threadIdx.x & 3) * 8;
            bool in = q0 + r < nq;
            size_t at = (size_t)(q0 + r) * dp + k0 + c8;
            *reinterpret_cast<uint4*>(&sqh[r][c8]) = in ? *reinterpret_cast<const uint4*>(qh + at) : zero;
            *reinterpret_cast<uint4*>(&sql[r][c8]) = in ? *reinterpret_cast<const uint4*>(ql + at) : zero;
        }
#pragma unroll
        for (int u = 0; u < 2; u++) {
            int idx = threadIdx.x + 256 * u, r = idx >> 2, c8 = (idx & 3) * 8;
            bool in = a0 + r < m;
            size_t at = (size_t)(a0 + r) * dp + k0 + c8;
            *reinterpret_cast<uint4*>(&sah[r][c8]) = in ? __ldg(reinterpret_cast<const uint4*>(ah + at)) : zero;
            *reinterpret_cast<uint4*>(&sal[r][c8]) = in ? __ldg(reinterpret_cast<const uint4*>(al + at)) : zero;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < DK2; kk += 16) {
            unsigned fh[2][4], fl[2][4], bh[4][2], bl[4][2];
#pragma unroll
            for (int i = 0; i < 2; i++) {
                int row = wq * 32 + i * 16 + (lane & 15), col = kk + (lane >> 4) * 8;
                ldsm4(fh[i], &sqh[row][col]);
                ldsm4(fl[i], &sql[row][col]);
            }
#pragma unroll
            for (int jj = 0; jj < 4; jj += 2) {
                // matrices: (anchors nb.., k kk), (nb.., kk+8), (nb+8.., kk), (nb+8.., kk+8)
                int row = wa * 32 + jj * 8 + (lane & 7) + ((lane >> 4) << 3), col = kk + ((lane >> 3) & 1) * 8;
                unsigned r[4];
                ldsm4(r, &sah[row][col]);
                bh[jj][0] = r[0], bh[jj][1] = r[1], bh[jj + 1][0] = r[2], bh[jj + 1][1] = r[3];
                ldsm4(r, &sal[row][col]);
                bl[jj][0] = r[0], bl[jj][1] = r[1], bl[jj + 1][0] = r[2], bl[jj + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < 2; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    mma16816(acc[i][j], fh[i], bh[j]);
                    mma16816(acc[i][j], fh[i], bl[j]);
                    mma16816(acc[i][j], fl[i], bh[j]);
                }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int v = 0; v < 4; v++) {
                int qi = q0 + wq * 32 + i * 16 + (lane >> 2) + (v >> 1) * 8, aj = a0 + wa * 32 + j * 8 + (lane & 3) * 2 + (v & 1);
                if (qi < nq && aj < m) dots[(size_t)qi * m + aj] = acc[i][j][v] * qinv[qi] * ainv;
            }
}

// The B operand: for k-step s, lane (rr, c) of a warp needs, for each
// of its tile's four n8 blocks n, the levels of dimensions 16s+2c,
// 16s+2c+1 (b0) and 16s+2c+8, 16s+2c+9 (b1) of entry 8n+rr, as float16
// pairs: eight pairs of levels, 2B bits each. The fragment layout (frag,
// made on the device from the words at upload by vlc_s_frag) holds them
// in that order, RW = max(1, B/2) words a lane, so that a warp reads a
// k-step's operand in one coalesced load of 32 x RW words:
//   frag word i of lane L, k-step s, tile t at ((t*S + s)*32 + L)*RW + i,
// S the k-steps a tile (kp/16, a multiple of KC), pair p = 2n + (0 for
// b0, 1 for b1) at bits 2Bp.. of the lane's words (zero past W words).
#define KC 4  // k-steps a chunk: the scan loads the next chunk's operand while it multiplies this one's

template <int B>
struct Frag {
    static const int RW = B >= 2 ? B / 2 : 1;
};

// vlc_s_fragB: block t writes tile t's fragments from its words.
template <int B>
__device__ void frag(const unsigned* __restrict__ words, int W, int S, unsigned* __restrict__ out) {
    const int P = 32 / B, RW = Frag<B>::RW;
    const unsigned mask = (1u << B) - 1;
    const unsigned* wt = words + (size_t)blockIdx.x * W * 32;
    for (int i = threadIdx.x; i < S * 32; i += SBLOCK) {
        int st = i >> 5, lane = i & 31, rr = lane >> 2, c = lane & 3;
        unsigned rec[RW];
#pragma unroll
        for (int k = 0; k < RW; k++) rec[k] = 0u;
#pragma unroll
        for (int n = 0; n < 4; n++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                int j = 16 * st + 2 * c + 8 * h, w = j / P;
                unsigned x = w < W ? wt[w * 32 + 8 * n + rr] : 0u;
                unsigned v = (x >> ((j % P) * B)) & ((mask << B) | mask);  // levels j and j+1
                int bit = 2 * B * (2 * n + h);
                rec[bit / 32] |= v << (bit % 32);
            }
        unsigned* o = out + ((size_t)blockIdx.x * S * 32 + i) * RW;
#pragma unroll
        for (int k = 0; k < RW; k++) o[k] = rec[k];
    }
}
extern "C" __global__ void vlc_s_frag1(const unsigned* __restrict__ w, int W, int S, unsigned* __restrict__ o) { frag<1>(w, W, S, o); }
extern "C" __global__ void vlc_s_frag2(const unsigned* __restrict__ w, int W, int S, unsigned* __restrict__ o) { frag<2>(w, W, S, o); }
extern "C" __global__ void vlc_s_frag4(const unsigned* __restrict__ w, int W, int S, unsigned* __restrict__ o) { frag<4>(w, W, S, o); }
extern "C" __global__ void vlc_s_frag8(const unsigned* __restrict__ w, int W, int S, unsigned* __restrict__ o) { frag<8>(w, W, S, o); }

// load_rec loads a lane's RW words of one k-step.
template <int B>
__device__ __forceinline__ void load_rec(unsigned* r, const unsigned* __restrict__ p) {
    const int RW = Frag<B>::RW;
    if (RW == 4) {
        uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
        r[0] = v.x, r[1] = v.y, r[2] = v.z, r[3] = v.w;
    } else if (RW == 2) {
        uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
        r[0] = v.x, r[1] = v.y;
    } else {
        r[0] = __ldg(p);
    }
}

// pair_half2 is pair p of a lane's record as the float16 pair
// 2(l - L/2): 1024 + 2l made exact from the bits, less 1024 + L. (The
// factor 2 is undone with the query's scale.)
template <int B>
__device__ __forceinline__ unsigned pair_half2(const unsigned* r, int p) {
    const int bit = 2 * B * p;
    const unsigned mask = (1u << B) - 1;
    unsigned v = r[bit / 32] >> (bit % 32);
    unsigned h = ((v & mask) << 1) | (((v >> B) & mask) << 17) | 0x64006400u;
    __half2 f = __hsub2(*reinterpret_cast<__half2*>(&h), __floats2half2_rn(1024.f + mask, 1024.f + mask));
    return *reinterpret_cast<unsigned*>(&f);
}

// vlc_s_mmaB (Q = QT) and vlc_s_mmahB (Q = 16): block t takes tile t,
// up to Q queries (blocks past ntiles return). kp is the residuals'
// length in float16, 16 S (S the fragments' k-steps); shared memory
// holds Q rows of hi and of lo, kp + 8 values each (the 8 keep
// ldmatrix's rows off one bank).
template <int B, int Q>
__device__ void mma_scan(const float* __restrict__ rq, const float* __restrict__ qqs, const float* __restrict__ dots,
                         const float* __restrict__ rotA, const float* __restrict__ norms, const unsigned long long* __restrict__ offs,
                         const float* __restrict__ scale, const float* __restrict__ sqrtS, const unsigned* __restrict__ frag,
                         const unsigned* __restrict__ scal, int d, int m, int W, int metricIP, int ipCodes, int nprobe,
                         const int* __restrict__ coff, int cap, float* __restrict__ cand, const int* __restrict__ order,
                         const int* __restrict__ cursor, const int2* __restrict__ tiles, const int* __restrict__ ntiles, int kp,
                         const unsigned long long* __restrict__ allow) {
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ float s_sq[Q], s_mul[Q], s_bias[Q], s_inv[Q];
    __shared__ int s_dot[Q];
    __shared__ long long s_out[Q];
    if ((int)blockIdx.x >= *ntiles) return;
    const int stride = kp + 8;
    __half* ahi = reinterpret_cast<__half*>(smem);
    __half* alo = ahi + Q * stride;
    int2 tile = tiles[blockIdx.x];
    int a = tile.x, p0 = tile.y, nt = min(Q, cursor[a] - p0);
    int lo = (int)offs[a], hi = (int)offs[a + 1];
    if (lo == hi) return;
    float na = norms[a];
    __shared__ int s_q[Q];
    __shared__ float s_sc[Q];
    if (threadIdx.x < Q) {
        // A query's constants, and the scale of its residual: a power of
        // two from a bound on |q'| (every |v| is at most |q'|), known
        // from qq, qa and |a|^2 (their float32 rounding covered by the
        // margin), so that the residual's loads below all go out at once.
        int k = threadIdx.x, dot = 0, q = 0;
        float mul = 1.f, bias = 0.f, sc = 1.f, inv = 1.f;
        long long out = 0;
        if (k < nt) {
            int pair = order[p0 + k], r = pair % nprobe;
            q = pair / nprobe;
            float qq = qqs[q], qa = dots[(size_t)q * m + a];
            if (ipCodes && __fadd_rn(__fsub_rn(qq, __fmul_rn(2.f, qa)), na) < qq) {
                mul = 0.5f;
                bias = -__fadd_rn(qq, na) / 2.f;
            } else if (metricIP) {
                dot = 1;
                mul = -1.f;
                bias = -qa;
            }
            out = (long long)q * cap + coff[(size_t)q * (nprobe + 1) + r] - lo;
            float bound = qq;
            if (!dot) bound = fmaxf(__fadd_rn(__fsub_rn(qq, __fmul_rn(2.f, qa)), na), 0.f) + 1e-4f * (qq + na);
            int ex = 0;
            frexpf(sqrtf(bound) * 1.001f, &ex);     // |v| <= |q'| < 2^ex
            int sh = min(max(14 - ex, -100), 100);  // so |v| * 2^sh < 2^14
            sc = ldexpf(1.f, sh);
            inv = ldexpf(1.f, -sh - 1);  // (the levels come doubled: s_inv halves too)
        }
        s_dot[k] = dot;
        s_mul[k] = mul;
        s_bias[k] = bias;
        s_out[k] = out;
        s_q[k] = q;
        s_sc[k] = sc;
        s_inv[k] = inv;
    }
    __syncthreads();
    const float* anc = rotA + (size_t)a * d;
    const int warps = SBLOCK / 32;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    // Each query's q', |q'|^2 and halves: warp w takes queries w, w + 8,
    // ... (Q / 8 of them), a chunk of 4 float4 a lane at a time, the
    // anchor's chunk loaded once for all of them and every query's loads
    // in flight together. Rows past nt are left as they are: a row of A
    // reaches only its own row of the products, which nothing reads.
    const int QW = Q / warps;
    float sq[QW];
#pragma unroll
    for (int u = 0; u < QW; u++) sq[u] = 0.f;
    if ((d & 3) == 0) {  // float4 loads: rows start 16-byte aligned
        const float4* a4 = reinterpret_cast<const float4*>(anc);
        for (int c0 = 0; c0 < kp / 4; c0 += 4 * 32) {
            float4 w[4];
#pragma unroll
            for (int t = 0; t < 4; t++) {
                int j4 = c0 + t * 32 + lane;
                w[t] = 4 * j4 < d ? a4[j4] : make_float4(0.f, 0.f, 0.f, 0.f);
            }
#pragma unroll
            for (int u = 0; u < QW; u++) {
                int k = warp + u * warps;
                if (k >= nt) break;
                const float4* s4 = reinterpret_cast<const float4*>(rq + (size_t)s_q[k] * d);
                int dot = s_dot[k];
                float sc = s_sc[k];
                float4 v[4];
#pragma unroll
                for (int t = 0; t < 4; t++) {
                    int j4 = c0 + t * 32 + lane;
                    v[t] = 4 * j4 < d ? s4[j4] : make_float4(0.f, 0.f, 0.f, 0.f);
                }
                __half* hrow = ahi + k * stride;
                __half* lrow = alo + k * stride;
#pragma unroll
                for (int t = 0; t < 4; t++) {
                    int j4 = c0 + t * 32 + lane;
                    if (j4 >= kp / 4) break;
                    float4 x = v[t];
                    if (!dot) x = make_float4(__fsub_rn(x.x, w[t].x), __fsub_rn(x.y, w[t].y), __fsub_rn(x.z, w[t].z), __fsub_rn(x.w, w[t].w));
                    sq[u] = fmaf(x.x, x.x, sq[u]);
                    sq[u] = fmaf(x.y, x.y, sq[u]);
                    sq[u] = fmaf(x.z, x.z, sq[u]);
                    sq[u] = fmaf(x.w, x.w, sq[u]);
                    __half2 h01 = __floats2half2_rn(x.x * sc, x.y * sc), h23 = __floats2half2_rn(x.z * sc, x.w * sc);
                    __half2 l01 = __floats2half2_rn(__fsub_rn(x.x * sc, __low2float(h01)), __fsub_rn(x.y * sc, __high2float(h01)));
                    __half2 l23 = __floats2half2_rn(__fsub_rn(x.z * sc, __low2float(h23)), __fsub_rn(x.w * sc, __high2float(h23)));
                    *reinterpret_cast<uint2*>(hrow + 4 * j4) = make_uint2(*reinterpret_cast<unsigned*>(&h01), *reinterpret_cast<unsigned*>(&h23));
                    *reinterpret_cast<uint2*>(lrow + 4 * j4) = make_uint2(*reinterpret_cast<unsigned*>(&l01), *reinterpret_cast<unsigned*>(&l23));
                }
            }
        }
    } else {
#pragma unroll
        for (int u = 0; u < QW; u++) {
            int k = warp + u * warps;
            if (k >= nt) break;
            const float* src = rq + (size_t)s_q[k] * d;
            int dot = s_dot[k];
            float sc = s_sc[k];
            __half* hrow = ahi + k * stride;
            __half* lrow = alo + k * stride;
            for (int j = lane; j < kp; j += 32) {
                float v = j < d ? (dot ? src[j] : __fsub_rn(src[j], anc[j])) : 0.f;
                sq[u] = fmaf(v, v, sq[u]);
                float x = v * sc;
                __half h = __float2half_rn(x);
                hrow[j] = h;
                lrow[j] = __float2half_rn(x - __half2float(h));
            }
        }
    }
#pragma unroll
    for (int u = 0; u < QW; u++) {
        float t = sq[u];
        for (int o = 16; o; o >>= 1) t += __shfl_xor_sync(FULL, t, o);
        int k = warp + u * warps;
        if (lane == 0 && k < nt) s_sq[k] = t;
    }
    __syncthreads();
    const int c = lane & 3, rr = lane >> 2;
    const bool two = Q > 16 && nt > 16;  // the second m16 tile holds queries
    float sa = scale[a], sb = sqrtS[a];
    for (int t = (lo >> 5) + warp; t < (hi + 31) >> 5; t += warps) {
        const int I = Q / 16;  // m16 tiles
        float acc[I][4][4];
#pragma unroll
        for (int i = 0; i < I; i++)
#pragma unroll
            for (int n = 0; n < 4; n++)
#pragma unroll
                for (int v = 0; v < 4; v++) acc[i][n][v] = 0.f;
        const int RW = Frag<B>::RW, S = kp / 16;
        const unsigned* ft = frag + ((size_t)t * S * 32 + lane) * RW;
        unsigned cur[KC][RW], nxt[KC][RW];  // this chunk's operands, and the next one's in flight
#pragma unroll
        for (int u = 0; u < KC; u++) load_rec<B>(cur[u], ft + u * 32 * RW);
        for (int s0 = 0; s0 < S; s0 += KC) {
            if (s0 + KC < S) {
#pragma unroll
                for (int u = 0; u < KC; u++) load_rec<B>(nxt[u], ft + (s0 + KC + u) * 32 * RW);
            }
#pragma unroll
            for (int u = 0; u < KC; u++) {
                unsigned ah[I][4], al[I][4];
                const int arow = (lane & 15) * stride + 16 * (s0 + u) + (lane >> 4) * 8;
                ldsm4(ah[0], ahi + arow);
                ldsm4(al[0], alo + arow);
                if (two) {
                    ldsm4(ah[I - 1], ahi + 16 * stride + arow);
                    ldsm4(al[I - 1], alo + 16 * stride + arow);
                }
#pragma unroll
                for (int n = 0; n < 4; n++) {
                    unsigned b[2] = {pair_half2<B>(cur[u], 2 * n), pair_half2<B>(cur[u], 2 * n + 1)};
                    mma16816(acc[0][n], ah[0], b);
                    mma16816(acc[0][n], al[0], b);
                    if (two) {
                        mma16816(acc[I - 1][n], ah[I - 1], b);
                        mma16816(acc[I - 1][n], al[I - 1], b);
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < KC; u++)
#pragma unroll
                for (int i = 0; i < RW; i++) cur[u][i] = nxt[u][i];
        }
#pragma unroll
        for (int n = 0; n < 4; n++) {
#pragma unroll
            for (int col = 0; col < 2; col++) {
                int e = t * 32 + 8 * n + 2 * c + col;
                if (e < lo || e >= hi) continue;
                unsigned sc = __ldg(scal + e);
                float beta = __fmul_rn(h2f((unsigned short)(sc >> 16)), sb);
                float norm = __fmul_rn(h2f((unsigned short)(sc & 0xffff)), sa);
                bool masked = allowed(allow, e) == 0;
#pragma unroll
                for (int i = 0; i < I; i++) {
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        int k = 16 * i + rr + 8 * h;
                        if (k >= nt) continue;
                        float qu = __fmul_rn(acc[i][n][2 * h + col], s_inv[k]);
                        float score = s_dot[k] ? __fmul_rn(beta, qu) : __fsub_rn(__fadd_rn(s_sq[k], norm), __fmul_rn(__fmul_rn(2.f, beta), qu));
                        float dist = masked ? INF : __fadd_rn(__fmul_rn(s_mul[k], score), s_bias[k]);
                        cand[s_out[k] + e] = dist;
                    }
                }
            }
        }
    }
}

#define MMA_ARGS                                                                                                                  \
    const float *__restrict__ rq, const float *__restrict__ qqs, const float *__restrict__ dots, const float *__restrict__ rotA, \
        const float *__restrict__ norms, const unsigned long long *__restrict__ offs, const float *__restrict__ scale,           \
        const float *__restrict__ sqrtS, const unsigned *__restrict__ frag, const unsigned *__restrict__ scal, int d, int m, int W, \
        int metricIP, int ipCodes, int nprobe, const int *__restrict__ coff, int cap, float *__restrict__ cand,                  \
        const int *__restrict__ order, const int *__restrict__ cursor, const int2 *__restrict__ tiles, const int *__restrict__ ntiles, \
        int kp, const unsigned long long *__restrict__ allow
#define MMA_PASS \
    rq, qqs, dots, rotA, norms, offs, scale, sqrtS, frag, scal, d, m, W, metricIP, ipCodes, nprobe, coff, cap, cand, order, cursor, tiles, ntiles, kp, allow
extern "C" __global__ void __launch_bounds__(SBLOCK) vlc_s_mma1(MMA_ARGS) { mma_scan<1, QT>(MMA_PASS); }
extern "C" __global__ void __launch_bounds__(SBLOCK) vlc_s_mma2(MMA_ARGS) { mma_scan<2, QT>(MMA_PASS); }
extern "C" __global__ void __launch_bounds__(SBLOCK) vlc_s_mma4(MMA_ARGS) { mma_scan<4, QT>(MMA_PASS); }
extern "C" __global__ void __launch_bounds__(SBLOCK) vlc_s_mma8(MMA_ARGS) { mma_scan<8, QT>(MMA_PASS); }
// vlc_s_mmahB: tiles of 16 queries, for batches whose lists have few
// queries each: half the shared memory and fewer registers, so that
// three blocks share a multiprocessor where vlc_s_mmaB fits two.
extern "C" __global__ void __launch_bounds__(SBLOCK, 3) vlc_s_mmah1(MMA_ARGS) { mma_scan<1, 16>(MMA_PASS); }
extern "C" __global__ void __launch_bounds__(SBLOCK, 3) vlc_s_mmah2(MMA_ARGS) { mma_scan<2, 16>(MMA_PASS); }
extern "C" __global__ void __launch_bounds__(SBLOCK, 3) vlc_s_mmah4(MMA_ARGS) { mma_scan<4, 16>(MMA_PASS); }
extern "C" __global__ void __launch_bounds__(SBLOCK, 3) vlc_s_mmah8(MMA_ARGS) { mma_scan<8, 16>(MMA_PASS); }

// vlc_s_topk: one block per query: the keep candidates of least (distance,
// entry), sorted, padded with entry -1 and +Inf. Candidate i of a query
// is entry offs[a] + i - coff[r] of the list a = probe[r] whose slots
// hold it. When cached is at least the query's candidates, their keys are
// read into shared memory once (cached of them fit) and the select's
// passes read them there. Dynamic shared memory holds those keys, then
// (8-byte aligned) the selection: keep rounded up to a power of two.
extern "C" __global__ void vlc_s_topk(const float* __restrict__ cand, int cap, const int* __restrict__ coff, const int* __restrict__ probe,
                                      const unsigned long long* __restrict__ offs, int nprobe, int keep, int cached,
                                      int* __restrict__ outE, float* __restrict__ outD) {  // outD may follow outE: one copy back
    extern __shared__ __align__(8) unsigned keys[];
    unsigned long long* sel = reinterpret_cast<unsigned long long*>(keys + ((cached + 1) & ~1));
    const float* c = cand + (size_t)blockIdx.x * cap;
    const int* co = coff + (size_t)blockIdx.x * (nprobe + 1);
    const int* pr = probe + (size_t)blockIdx.x * nprobe;
    int n = co[nprobe];
    int size = 1;
    while (size < min(keep, n)) size <<= 1;
    for (int i = threadIdx.x; i < size; i += SBLOCK) sel[i] = ~0ull;
    auto entry = [&](int i) {  // the last rank whose slots start at or before i
        int lo = 0, hi = nprobe - 1;
        while (lo < hi) {
            int mid = (lo + hi + 1) >> 1;
            if (co[mid] <= i) lo = mid;
            else hi = mid - 1;
        }
        return (unsigned)(offs[pr[lo]] + (unsigned)(i - co[lo]));
    };
    auto tie = [&](int i) { return entry(i); };
    bool sorted = false;  // sel holds the result in order already
    if (n <= cached) {
        // Read with 16-byte loads (cap is a multiple of 4), several in
        // flight, the least and greatest key on the way.
        unsigned lo = ~0u, hi = 0;
        const float4* c4 = reinterpret_cast<const float4*>(c);
#pragma unroll 8
        for (int i = threadIdx.x; i < (n + 3) / 4; i += SBLOCK) {
            float4 v = c4[i];
            unsigned k[4] = {okey(v.x), okey(v.y), okey(v.z), okey(v.w)};
#pragma unroll
            for (int u = 0; u < 4; u++)
                if (4 * i + u < n) {
                    keys[4 * i + u] = k[u];
                    lo = min(lo, k[u]);
                    hi = max(hi, k[u]);
                }
        }
        __syncthreads();
        auto key = [&](int i) { return keys[i]; };
        // A threshold from a sample: the key of rank r among up to TSAMPLE
        // evenly spaced keys, r such that about twice keep keys (plus a
        // margin) lie at or below it. When at least keep and at most
        // TCAND do, the keep smallest are among them, ties included, and
        // the select runs over those few; else over every key.
        __shared__ __align__(8) unsigned samp[TSAMPLE];
        __shared__ int cidx[TCAND], s_cnt;
        int ns = min(n, TSAMPLE), stride = n / ns;
        int r = min(ns, (int)(((long long)keep * ns + n - 1) / n) * 2 + 8);
        bool few = false;
        if (keep * 4 < n && r < ns) {
            for (int i = threadIdx.x; i < ns; i += SBLOCK) samp[i] = keys[i * stride];
            if (threadIdx.x == 0) s_cnt = 0;
            __syncthreads();
            int ties;
            unsigned t = select_key([&](int i) { return samp[i]; }, ns, r, &ties);
            for (int base = 0; base < n; base += SBLOCK) {
                int i = base + threadIdx.x;
                bool in = i < n && keys[i] <= t;
                unsigned ball = __ballot_sync(FULL, in);
                int first = 0;
                if ((threadIdx.x & 31) == 0 && ball) first = atomicAdd(&s_cnt, __popc(ball));
                first = __shfl_sync(FULL, first, 0);
                int at = first + __popc(ball & ((1u << (threadIdx.x & 31)) - 1));
                if (in && at < TCAND) cidx[at] = i;
            }
            __syncthreads();
            few = s_cnt >= keep && s_cnt <= TCAND;
        }
        if (few && s_cnt <= SBLOCK) {
            // A thread a key: its rank among the few by (key, entry), all
            // distinct, is its place in the result, which comes out
            // sorted (no select, no sort).
            int c = s_cnt;
            unsigned long long* few_k = reinterpret_cast<unsigned long long*>(samp);  // the sample is spent
            __syncthreads();
            unsigned long long mine = 0;
            if (threadIdx.x < c) {
                int i = cidx[threadIdx.x];
                mine = ((unsigned long long)keys[i] << 32) | entry(i);
                few_k[threadIdx.x] = mine;
            }
            __syncthreads();
            if (threadIdx.x < c) {
                int rank = 0;
                for (int f = 0; f < c; f++) rank += few_k[f] < mine;
                if (rank < keep) sel[rank] = mine;
            }
            sorted = true;
        } else if (few) {
            int c = s_cnt;
            __syncthreads();
            take_smallest([&](int j) { return keys[cidx[j]]; }, [&](int j) { return entry(cidx[j]); }, c, keep,
                          [&](int at, int j) { sel[at] = ((unsigned long long)keys[cidx[j]] << 32) | entry(cidx[j]); });
        } else {
            take_smallest(key, tie, n, keep, [&](int at, int i) { sel[at] = ((unsigned long long)keys[i] << 32) | entry(i); }, lo, hi, true);
        }
    } else {
        __syncthreads();
        auto key = [&](int i) { return okey(c[i]); };
        take_smallest(key, tie, n, keep, [&](int at, int i) { sel[at] = ((unsigned long long)okey(c[i]) << 32) | entry(i); });
    }
    __syncthreads();
    for (int k = 2; k <= size && !sorted; k <<= 1) {
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int i = threadIdx.x; i < size; i += SBLOCK) {
                int l = i ^ j;
                if (l > i) {
                    unsigned long long x = sel[i], y = sel[l];
                    if ((x > y) == ((i & k) == 0)) {
                        sel[i] = y;
                        sel[l] = x;
                    }
                }
            }
            __syncthreads();
        }
    }
    int* oe = outE + (size_t)blockIdx.x * keep;
    float* od = outD + (size_t)blockIdx.x * keep;
    for (int i = threadIdx.x; i < keep; i += SBLOCK) {
        float dist = ofloat((unsigned)(sel[i] >> 32));
        if (i < min(keep, n) && dist != INF) {  // +Inf: a masked entry
            oe[i] = (int)(unsigned)sel[i];
            od[i] = dist;
        } else {
            oe[i] = -1;
            od[i] = __int_as_float(0x7f800000);
        }
    }
}
