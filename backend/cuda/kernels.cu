// Kernels of the CUDA backend (Go package github.com/vlc-embed/vlc/backend/cuda).
//
// PTX for compute_80 (Ampere, Ada, Hopper) is generated from this file with
//
//	nvcc -ptx -arch=compute_80 -O3 -o kernels.ptx kernels.cu
//
// (`make ptx` at the repository root), committed, and embedded in the Go
// binary; the driver compiles it for the GPU at hand when the module loads.
// kernels.cu.sha256 records the hashes of this file and of consts.cuh: a Go
// test fails when the committed PTX is older than the sources. consts.cuh
// holds the constants the Go side shares (tile sizes, block sizes, the
// assign variants), generated from kernels.go.
//
// No CUDA header is included beyond what nvcc always provides: float16
// values are raw uint16 bit patterns converted with cvt, and the tensor-core
// work is inline PTX (cp.async, ldmatrix, mma.sync m16n8k16).
//
// Buffers (all device-resident; layouts fixed by the Go side):
//   X      np x dp  float16  points, rows padded to a multiple of BM with
//                            zero rows, columns to a multiple of 64 with zeros
//   A32    m x d    float32  anchors, the master copy
//   A16    mp x dp  float16  anchors rounded to float16 for the tensor cores,
//                            zero beyond m rows and d columns
//   anorm  mp       float32  |A16 row|^2, +Inf beyond m (padded anchors lose)
//   keys   np       uint64   per point (orderable distance << 32 | anchor),
//                            ~0 between steps
//   assign n        int32    anchor of each point, -1 before the first assign
//   dist   n        float32  |x - A32[assign]|^2 of the last reduce
//   stats  sum (m x d i64), sq (m x d i64), wsum (m i64), cnt (m u32):
//          fixed point (below)
//   sc     Scalars  energy (fixed-point sum of dist) and changed count
//
// Fixed point: the reduce adds every term t (w r, r^2, w, dist) as the
// 64-bit integer rint(t * scale), scales powers of two the Go side picks
// for a largest point distance smax so that no sum of n terms can
// overflow; the reduce records the pass's largest distance (maxdist), and
// the update moves nothing when it exceeds smax (the Go side then runs the
// reduce again with scales for it). Integer sums do not depend on the
// order of the additions, so the statistics, the anchors and the energy
// are the same bits from run to run (float atomics were not).

#include "consts.cuh"

struct Scalars {
    long long energy;  // fixed point, scale se
    unsigned int changed;
    unsigned int maxdist;  // the largest dist of the pass, float32 bits
};
static_assert(sizeof(Scalars) == SCALARS_BYTES, "the Go side reads SCALARS_BYTES of Scalars");

__device__ __forceinline__ float h2f(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ unsigned short f2h(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

__device__ __forceinline__ void cp_async16(unsigned dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldsm_x4(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

// c += a (16x16, row-major) * b (16x8, column-major), float32 accumulate.
__device__ __forceinline__ void mma16816(float* c, const unsigned* a, unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Byte offset of 16-byte chunk c of row r in a stage tile whose rows hold
// BK float16 values. The chunk index is XOR-swizzled with the row so that
// the 8 row addresses of one ldmatrix phase hit 8 different 16-byte bank
// groups: 64-byte rows (BK = 32) with bits 1-2 of the row, 128-byte rows
// (BK = 64) with bits 0-2.
template <int BK>
__device__ __forceinline__ unsigned swz(int r, int c) {
    if (BK == 32) return (unsigned)(r * 64 + ((c ^ ((r >> 1) & 3)) << 4));
    return (unsigned)(r * 128 + ((c ^ (r & 7)) << 4));
}

// Orderable key: smaller distance first, then the lower anchor index.
__device__ __forceinline__ unsigned long long pack_key(float v, int idx) {
    unsigned u = __float_as_uint(v);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((unsigned long long)u << 32) | (unsigned)idx;
}

// row_min puts the best (distance, anchor) of the four lanes of a quad,
// which hold the same row, into rowkey[row]: the lowest anchor among equal
// distances.
__device__ __forceinline__ void row_min(float v, int i, unsigned long long* rowkey, int row, int lane) {
#pragma unroll
    for (int o = 1; o <= 2; o <<= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, v, o);
        int oi = __shfl_xor_sync(0xffffffffu, i, o);
        if (ov < v || (ov == v && oi < i)) {
            v = ov;
            i = oi;
        }
    }
    if ((lane & 3) == 0) atomicMin(&rowkey[row], pack_key(v, i));
}

// rows_to_keys merges the block's best per row into keys, once every
// thread has done its row_min.
__device__ __forceinline__ void rows_to_keys(const unsigned long long* rowkey, unsigned long long* keys, int rowBase,
                                             int tid) {
    __syncthreads();
    for (int i = tid; i < BM; i += ATHREADS) atomicMin(&keys[rowBase + i], rowkey[i]);
}

template <int BN, int BK>
__device__ __forceinline__ void assign_load(const unsigned short* __restrict__ X, const unsigned short* __restrict__ A,
                                            unsigned xs, int rowBase, int tile, int kc, int dp, int tid) {
    constexpr int CPR = BK / 8;  // 16-byte chunks per row
    const unsigned as = xs + BM * BK * 2;
    const unsigned short* xg = X + (size_t)rowBase * dp + kc * BK;
#pragma unroll
    for (int q = 0; q < (BM * CPR) / ATHREADS; q++) {
        int idx = tid + q * ATHREADS;
        int r = idx / CPR, c = idx % CPR;
        cp_async16(xs + swz<BK>(r, c), xg + (size_t)r * dp + c * 8);
    }
    const unsigned short* ag = A + (size_t)tile * BN * dp + kc * BK;
#pragma unroll
    for (int q = 0; q < (BN * CPR) / ATHREADS; q++) {
        int idx = tid + q * ATHREADS;
        int r = idx / CPR, c = idx % CPR;
        cp_async16(as + swz<BK>(r, c), ag + (size_t)r * dp + c * 8);
    }
}

// Fused assign. Block (bx, by) takes points [bx*BM, bx*BM+BM) and anchor
// tiles [by*tilesPerSplit, ...) of BN anchors each. For every pair it
// computes x.a with tensor cores (float16 in, float32 accumulate), turns it
// into the partial distance |a|^2 - 2 x.a (|x|^2 is the same for every
// anchor of a point and left out) and keeps a running minimum per point in
// registers; the n x m matrix is never stored. Per point, the block's best
// (distance, anchor) goes into keys with a 64-bit atomicMin, so splits over
// the anchors combine exactly, ties to the lowest anchor index.
//
// 8 warps as 2 (points) x 4 (anchors); warp tile 64 x BN/4; K in stages of
// BK through a STAGES-deep cp.async pipeline that runs across anchor tiles.
// dp must be a multiple of BK.
template <int BN, int STAGES, int BK>
__device__ __forceinline__ void assign_body(const unsigned short* __restrict__ X, const unsigned short* __restrict__ A,
                                            const float* __restrict__ anorm, unsigned long long* __restrict__ keys,
                                            int dp, int ntiles, int tilesPerSplit) {
    constexpr int WN = BN / 4;
    constexpr int MT = 4;  // 64 rows per warp / 16
    constexpr int NT = WN / 8;
    constexpr int STAGE = (BM + BN) * BK * 2;
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ unsigned long long rowkey[BM];

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp >> 2, wn = warp & 3;
    const int rowBase = blockIdx.x * BM;
    const int t0 = blockIdx.y * tilesPerSplit;
    const int t1 = min(t0 + tilesPerSplit, ntiles);
    if (t0 >= t1) return;
    const int KT = dp / BK;
    const int T = (t1 - t0) * KT;

    for (int i = tid; i < BM; i += ATHREADS) rowkey[i] = ~0ull;

    const unsigned sbase = smem_u32(smem);

    float acc[MT][NT][4];
    float best[MT][2];
    int bidx[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
#pragma unroll
            for (int e = 0; e < 4; e++) acc[mt][nt][e] = 0.f;
        }
        best[mt][0] = best[mt][1] = __int_as_float(0x7f800000);
        bidx[mt][0] = bidx[mt][1] = 0x7fffffff;
    }

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < T) assign_load<BN, BK>(X, A, sbase + s * STAGE, rowBase, t0 + s / KT, s % KT, dp, tid);
        cp_async_commit();
    }

    int tile = t0, kc = 0;
    for (int it = 0; it < T; it++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        {
            int nx = it + STAGES - 1;
            if (nx < T) assign_load<BN, BK>(X, A, sbase + (nx % STAGES) * STAGE, rowBase, t0 + nx / KT, nx % KT, dp, tid);
            cp_async_commit();
        }
        const unsigned xs = sbase + (it % STAGES) * STAGE;
        const unsigned as = xs + BM * BK * 2;
#pragma unroll
        for (int ks = 0; ks < BK / 16; ks++) {
            unsigned a[MT][4], b[NT][2];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                int r = wm * 64 + mt * 16 + (lane & 15);
                int c = ks * 2 + (lane >> 4);
                ldsm_x4(xs + swz<BK>(r, c), a[mt][0], a[mt][1], a[mt][2], a[mt][3]);
            }
#pragma unroll
            for (int np = 0; np < NT / 2; np++) {
                int r = wn * WN + np * 16 + (lane & 7) + ((lane >> 4) << 3);
                int c = ks * 2 + ((lane >> 3) & 1);
                ldsm_x4(as + swz<BK>(r, c), b[2 * np][0], b[2 * np][1], b[2 * np + 1][0], b[2 * np + 1][1]);
            }
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
#pragma unroll
                for (int nt = 0; nt < NT; nt++) mma16816(acc[mt][nt], a[mt], b[nt][0], b[nt][1]);
            }
        }
        if (++kc == KT) {
            // Epilogue of one anchor tile: partial distances, running argmin.
            // Each thread sees its columns in increasing order, so a strict <
            // keeps the lowest index among equals.
            const int cb = tile * BN + wn * WN + 2 * (lane & 3);
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                const float n0 = anorm[cb + nt * 8], n1 = anorm[cb + nt * 8 + 1];
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        float v0 = n0 - 2.f * acc[mt][nt][2 * h];
                        float v1 = n1 - 2.f * acc[mt][nt][2 * h + 1];
                        if (v0 < best[mt][h]) {
                            best[mt][h] = v0;
                            bidx[mt][h] = cb + nt * 8;
                        }
                        if (v1 < best[mt][h]) {
                            best[mt][h] = v1;
                            bidx[mt][h] = cb + nt * 8 + 1;
                        }
                    }
#pragma unroll
                    for (int e = 0; e < 4; e++) acc[mt][nt][e] = 0.f;
                }
            }
            kc = 0;
            tile++;
        }
    }
    cp_async_wait<0>();

    // The four lanes of a quad hold the same rows: combine them, then the
    // four warps along the anchors through shared memory.
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int h = 0; h < 2; h++) row_min(best[mt][h], bidx[mt][h], rowkey, wm * 64 + mt * 16 + (lane >> 2) + 8 * h, lane);
    }
    rows_to_keys(rowkey, keys, rowBase, tid);
}

// The variants: BN anchors per tile, pipeline stages, BK. Dynamic shared
// memory = STAGES * (BM + BN) * BK * 2 bytes (the Go side sets it).
#define ASSIGN_VARIANT(NAME, BN, STAGES, BK)                                                                   \
    extern "C" __global__ void __launch_bounds__(ATHREADS)                                                     \
        NAME(const unsigned short* __restrict__ X, const unsigned short* __restrict__ A,                       \
             const float* __restrict__ anorm, unsigned long long* __restrict__ keys, int dp, int ntiles,       \
             int tilesPerSplit) {                                                                              \
        assign_body<BN, STAGES, BK>(X, A, anorm, keys, dp, ntiles, tilesPerSplit);                             \
    }

ASSIGN_VARIANTS(ASSIGN_VARIANT)

// Finalize: one thread per point. assign[i] = anchor of keys[i] (an index
// beyond m, possible only when every distance was NaN, becomes 0), keys[i]
// back to ~0 for the next assign, and the number of points whose anchor
// changed added to sc->changed. The threads of the grid also zero the
// statsWords 32-bit words of the statistics for the reduce that follows.
extern "C" __global__ void vlc_finalize(unsigned long long* __restrict__ keys, int* __restrict__ assign,
                                        unsigned* __restrict__ stats, long long statsWords, Scalars* sc, int n,
                                        int m) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    int ch = 0;
    if (i < n) {
        unsigned long long k = keys[i];
        keys[i] = ~0ull;
        int a = (int)(unsigned)(k & 0xffffffffu);
        if ((unsigned)a >= (unsigned)m) a = 0;
        ch = assign[i] != a;
        assign[i] = a;
    }
    int c = __syncthreads_count(ch);
    if (threadIdx.x == 0 && c) atomicAdd(&sc->changed, (unsigned)c);
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < statsWords;
         j += (long long)gridDim.x * blockDim.x)
        stats[j] = 0;
}

// fix is term t in fixed point (see the buffer notes above).
__device__ __forceinline__ long long fix(float t, float scale) { return __float2ll_rn(t * scale); }

// fix_add adds term t in fixed point to *p.
__device__ __forceinline__ void fix_add(long long* p, float t, float scale) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), (unsigned long long)fix(t, scale));
}

// add_block_scalars adds the fixed-point energies e that lane 0 of each of
// the block's nw warps summed to sc->energy, and their largest distances
// mx to sc->maxdist: one atomic each per block. Every thread of the block
// calls it.
__device__ __forceinline__ void add_block_scalars(long long e, float mx, Scalars* sc, int lane, int warp, int nw) {
    __shared__ long long part[32];
    __shared__ float pmax[32];
    if (lane == 0) {
        part[warp] = e;
        pmax[warp] = mx;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        long long t = 0;
        float m = 0.f;
        for (int w = 0; w < nw; w++) {
            t += part[w];
            m = fmaxf(m, pmax[w]);
        }
        atomicAdd(reinterpret_cast<unsigned long long*>(&sc->energy), (unsigned long long)t);
        atomicMax(&sc->maxdist, __float_as_uint(m));  // dist >= 0: its bits order as unsigned
    }
}

// Reduce: one warp per point (grid-stride). r = x - A32[assign] in float32;
// dist = sum r^2 (summed directly, not expanded); the Huber weight
// w = min(1, tau/sqrt(dist)) when huber != 0; then, per dimension,
// sum += w*r (when move != 0) and sq += r^2, with 64-bit integer atomics
// in fixed point (scales ss, sq2, sw, se); per anchor wsum += w and cnt +=
// 1; sc->energy += dist.
extern "C" __global__ void vlc_reduce(const unsigned short* __restrict__ X, const int* __restrict__ assign,
                                      const float* __restrict__ A32, float* __restrict__ dist, long long* sum,
                                      long long* sq, long long* wsum, unsigned* cnt, Scalars* sc, int n, int d, int dp,
                                      float tau, int huber, int move, float ss, float sq2, float sw, float se) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    long long e = 0;
    float mx = 0.f;
    for (int i = blockIdx.x * nw + warp; i < n; i += gridDim.x * nw) {
        const int a = assign[i];
        const unsigned short* x = X + (size_t)i * dp;
        const float* c = A32 + (size_t)a * d;
        // dist in vlc_reduce_runs' order (lane l: dimensions 256 g + 8 l
        // .. +7, g ascending, then the same shuffle tree), explicit fused
        // multiply-adds: the same bits there and here.
        float s = 0.f;
        for (int j0 = 8 * lane; j0 < d; j0 += 256)
            for (int j = j0; j < j0 + 8 && j < d; j++) {
                float r = h2f(x[j]) - c[j];
                s = __fmaf_rn(r, r, s);
            }
#pragma unroll
        for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        s = __shfl_sync(0xffffffffu, s, 0);
        float w = 1.f;
        if (huber) {
            float rr = sqrtf(s);
            if (rr > tau) w = tau / rr;
        }
        long long* su = sum + (size_t)a * d;
        long long* q = sq + (size_t)a * d;
        for (int j = lane; j < d; j += 32) {
            float r = h2f(x[j]) - c[j];
            if (move) fix_add(su + j, w * r, ss);
            fix_add(q + j, r * r, sq2);
        }
        if (lane == 0) {
            dist[i] = s;
            e += fix(s, se);
            mx = fmaxf(mx, s);
            if (move) fix_add(wsum + a, w, sw);
            atomicAdd(cnt + a, 1u);
        }
    }
    add_block_scalars(e, mx, sc, lane, warp, nw);
}

// Sum of v over the block, the same value in every thread. Every thread
// must call it.
__device__ float block_sum(float v, float* red) {
#pragma unroll
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    float t = 0.f;
    for (int w = 0; w < (int)(blockDim.x >> 5); w++) t += red[w];
    return t;
}

// Update: one block per anchor row a < mp. With move != 0 and cnt[a] > 0,
// the anchor moves by s * rate * sum/wsum, s = min(1, maxmove/|rate *
// sum/wsum|) when capped != 0; empty anchors stay. Then (always) A16 row =
// float16(A32 row) rounded to nearest even and anorm[a] = |A16 row|^2.
// Rows a >= m only get anorm[a] = +Inf. SetAnchors runs it with move = 0.
// sum and wsum are fixed point: invs and invw are 1/ss and 1/sw; nothing
// moves when the reduce saw a point further than its scales allow
// (sc->maxdist > smax: the sums may have overflowed) or an anchor's
// weights sum to 0.
extern "C" __global__ void vlc_update(float* A32, unsigned short* A16, float* anorm, const long long* __restrict__ sum,
                                      const long long* __restrict__ wsum, const unsigned* __restrict__ cnt, int m,
                                      int d, int dp, float rate, float maxmove, int capped, int move, float invs,
                                      float invw, const Scalars* __restrict__ sc, float smax) {
    __shared__ float red[32];
    const int a = blockIdx.x;
    if (a >= m) {
        if (threadIdx.x == 0) anorm[a] = __int_as_float(0x7f800000);
        return;
    }
    float* c = A32 + (size_t)a * d;
    if (move && cnt[a] > 0 && wsum[a] > 0 && __uint_as_float(sc->maxdist) <= smax) {
        const float inv = rate / (float)((double)wsum[a] * invw);
        const long long* su = sum + (size_t)a * d;
        float scale = 1.f;
        if (capped) {
            float nn = 0.f;
            for (int j = threadIdx.x; j < d; j += blockDim.x) {
                float mv = (float)((double)su[j] * invs) * inv;
                nn += mv * mv;
            }
            float len = sqrtf(block_sum(nn, red));
            if (len > maxmove) scale = maxmove / len;
        }
        for (int j = threadIdx.x; j < d; j += blockDim.x) c[j] += scale * ((float)((double)su[j] * invs) * inv);
    }
    unsigned short* h = A16 + (size_t)a * dp;
    float nn = 0.f;
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        unsigned short v = f2h(c[j]);
        h[j] = v;
        float f = h2f(v);
        nn += f * f;
    }
    nn = block_sum(nn, red);
    if (threadIdx.x == 0) anorm[a] = nn;
}

// ---------------------------------------------------------------------------
// Rotated-code encoding (quant.Rotated), one thread per index entry, giving
// the bytes quant.Rotated.EncodeList writes on the host: the same float32
// and float64 operations in the same order, with the _rn intrinsics where a
// multiply feeds an add so that no fused multiply-add changes a rounding.
// Entries are in index order: entry e is point ids[e], in list assign[ids[e]].
// Each thread keeps its residual and sort keys in a slice of global scratch,
// interleaved by thread (element j of thread t at j*T + t) so that a warp's
// accesses to the same j coalesce.

// vlc_rot_sumsq: the largest |x - a|^2 (float64, unrotated) of every list,
// as float64 bits in lmax (zeroed by the caller): quant.Rotated.Fit.
extern "C" __global__ void vlc_rot_sumsq(const unsigned short* __restrict__ X, int dp,
                                         const int* __restrict__ assign, const float* __restrict__ anch,
                                         const unsigned* __restrict__ ids, int n, int d,
                                         unsigned long long* lmax) {
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < n; e += gridDim.x * blockDim.x) {
        int row = ids[e], a = assign[row];
        const unsigned short* x = X + (long long)row * dp;
        const float* an = anch + (long long)a * d;
        double s = 0;
        for (int j = 0; j < d; j++) {
            float v = h2f(x[j]) - an[j];
            s = __dadd_rn(s, __dmul_rn((double)v, (double)v));
        }
        atomicMax(lmax + a, (unsigned long long)__double_as_longlong(s));
    }
}

// fwht_pass runs R = 2, 4 or 8 consecutive stages h, 2h, .. of the
// transform on the p values of one thread starting at element off (stride
// T): each group of R values j, j + h, .., j + (R-1) h goes through the
// stages in registers, the same additions on the same operands as one
// stage at a time, with R loads in flight instead of two. The last pass
// also applies the scale.
template <int R>
__device__ __forceinline__ void fwht_pass(float* r, long long T, int off, int p, int h, bool last, float scale) {
    for (int i = 0; i < p; i += R * h)
        for (int j = i; j < i + h; j++) {
            float v[R];
#pragma unroll
            for (int q = 0; q < R; q++) v[q] = r[(off + j + q * h) * T];
#pragma unroll
            for (int s = 1; s < R; s *= 2)
#pragma unroll
                for (int q = 0; q < R; q++)
                    if ((q & s) == 0) {
                        const float a = v[q], b = v[q + s];
                        v[q] = __fadd_rn(a, b);
                        v[q + s] = __fsub_rn(a, b);
                    }
            if (last) {
#pragma unroll
                for (int q = 0; q < R; q++) v[q] = __fmul_rn(v[q], scale);
            }
#pragma unroll
            for (int q = 0; q < R; q++) r[(off + j + q * h) * T] = v[q];
        }
}

// fwht_t: the orthonormal Walsh-Hadamard transform of the p values (a power
// of two) of one thread starting at element off (stride T), as quant's
// fwht: stages h = 1, 2, 4, .. (three at a time), then every value times
// scale.
__device__ void fwht_t(float* r, long long T, int off, int p, float scale) {
    int h = 1;
    while (h < p) {
        const int left = p / h;  // 2^(stages left)
        if (left >= 8) {
            fwht_pass<8>(r, T, off, p, h, left == 8, scale);
            h *= 8;
        } else if (left == 4) {
            fwht_pass<4>(r, T, off, p, h, true, scale);
            h *= 4;
        } else {
            fwht_pass<2>(r, T, off, p, h, true, scale);
            h *= 2;
        }
    }
    if (p == 1) r[off * T] = __fmul_rn(r[off * T], scale);
}

struct RotHead {
    double t;
    int k, i;
};

// vlc_rot_encode: the code of every entry: packed levels to codes (packed
// bytes an entry), the two float16 corrections to corr (the host appends
// them). slist holds each list's s (the float32 of Fit); signs 3 x d; rotA
// the rotated anchors (ip form only).
// Scratch: r T*d float32, keys 2*T*d uint32 (interleaved), sorted T*d
// uint32 (each thread's d in a row), T = gridDim.x*blockDim.x;
// blocks of ENC_BLOCK threads, whose radix-sort counts live in shared
// memory (in local memory, indexed by the data, they went to L2).
extern "C" __global__ void __launch_bounds__(ENC_BLOCK) vlc_rot_encode(const unsigned short* __restrict__ X, int dp,
                                          const int* __restrict__ assign, const float* __restrict__ anch,
                                          const float* __restrict__ rotA, const unsigned* __restrict__ ids,
                                          int n, int d, int p, const float* __restrict__ signs, float scale,
                                          int bits, int packed, int ip, const float* __restrict__ slist,
                                          unsigned char* codes, unsigned short* corr, float* rs,
                                          unsigned* ks, unsigned* sorted) {
    __shared__ unsigned short scount[256 * ENC_BLOCK];
    const long long T = (long long)gridDim.x * blockDim.x;
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    float* r = rs + tid;
    unsigned* keys = ks + tid;
    unsigned* tmp = ks + T * d + tid;
    unsigned short* count = scount + threadIdx.x;  // count[b * ENC_BLOCK]
    const int L = (1 << bits) - 1, steps = (L - 1) / 2;
    const int cb = packed;
    for (int e = tid; e < n; e += T) {
        int row = ids[e], a = assign[row];
        const unsigned short* x = X + (long long)row * dp;
        const float* an = anch + (long long)a * d;
        for (int j = 0; j < d; j++) r[j * T] = h2f(x[j]) - an[j];
        for (int k = 0; k < 3; k++) {
            int j = 0;
            for (; j + 8 <= d; j += 8) {  // 8 loads in flight
                float v[8];
#pragma unroll
                for (int q = 0; q < 8; q++) v[q] = r[(j + q) * T];
#pragma unroll
                for (int q = 0; q < 8; q++) r[(j + q) * T] = __fmul_rn(v[q], signs[k * d + j + q]);
            }
            for (; j < d; j++) r[j * T] = __fmul_rn(r[j * T], signs[k * d + j]);
            fwht_t(r, T, 0, p, scale);
            if (p != d) fwht_t(r, T, d - p, p, scale);
        }

        // bestLevels
        double ua = 0, uu = 0;
        for (int j = 0; j < d; j++) {
            ua = __dadd_rn(ua, __dmul_rn(0.5, fabs((double)r[j * T])));
            uu = __dadd_rn(uu, 0.25);
        }
        double bestT = 0, bestCos = __ddiv_rn(ua, __dsqrt_rn(uu));
        if (bits == 8) {
            double big = 0;
            for (int j = 0; j < d; j++) big = fmax(big, fabs((double)r[j * T]));
            if (big > 0) bestT = __dmul_rn(__ddiv_rn((double)steps + 0.5, big), 1 - 1e-9);
        } else if (ua > 0 && steps > 0) {
            int nk = 0;
            for (int j = 0; j < d; j++) {
                float v = r[j * T];
                if (v != 0) {
                    keys[(long long)nk * T] = ~__float_as_uint(fabsf(v));
                    nk++;
                }
            }
            // LSD radix sort of ~|v| (ascending: |v| descending). quant's
            // radixHigh32 sorts the same 32 bits with the index below
            // them; the loop below reads only the values, which equal
            // keys leave the same.
            // The last pass writes this thread's row of sorted: the loop
            // after it walks the sorted values from 'steps' places at once,
            // each onward one by one, which a row serves from L1 where the
            // interleaved layout would load a sector a value.
            unsigned *src = keys, *dst = tmp;
            unsigned* row = sorted + (long long)tid * d;
            for (int shift = 0; shift < 32; shift += 8) {
                for (int b = 0; b < 256; b++) count[b * ENC_BLOCK] = 0;
                for (int i = 0; i < nk; i++) count[((src[(long long)i * T] >> shift) & 255) * ENC_BLOCK]++;
                unsigned short pos = 0;
                for (int b = 0; b < 256; b++) {
                    unsigned short c = count[b * ENC_BLOCK];
                    count[b * ENC_BLOCK] = pos;
                    pos += c;
                }
                const long long stride = shift == 24 ? 1 : T;
                unsigned* out = shift == 24 ? row : dst;
                for (int i = 0; i < nk; i++) {
                    const unsigned kv = src[(long long)i * T];
                    out[(long long)(count[((kv >> shift) & 255) * ENC_BLOCK]++) * stride] = kv;
                }
                unsigned* sw = src; src = dst; dst = sw;
            }
            RotHead heads[8];
            for (int k = 1; k <= steps; k++) {
                heads[k - 1].t = __ddiv_rn((double)k, (double)__uint_as_float(~row[0]));
                heads[k - 1].k = k;
                heads[k - 1].i = 0;
            }
            int live = steps;
            while (live > 0) {
                RotHead h = heads[0];
                int k = h.k;
                double t = h.t;
                ua = __dadd_rn(ua, (double)__uint_as_float(~row[h.i]));
                uu = __dadd_rn(uu, (double)(2 * k));
                if (++h.i < nk) {
                    h.t = __ddiv_rn((double)k, (double)__uint_as_float(~row[h.i]));
                    int q = 0;
                    while (q + 1 < live && (heads[q + 1].t < h.t || (heads[q + 1].t == h.t && heads[q + 1].k < k))) {
                        heads[q] = heads[q + 1];
                        q++;
                    }
                    heads[q] = h;
                } else {
                    for (int q = 0; q + 1 < live; q++) heads[q] = heads[q + 1];
                    live--;
                }
                if (__dmul_rn(ua, ua) > __dmul_rn(__dmul_rn(__dmul_rn(bestCos, bestCos), uu), 1 - 1e-9)) {
                    double c = __ddiv_rn(ua, __dsqrt_rn(uu));
                    if (c > bestCos) { bestCos = c; bestT = t; }
                }
            }
        }
        unsigned char* code = codes + (long long)e * cb;
        for (int b = 0; b < packed; b++) code[b] = 0;
        double ur = 0, norm = 0, slot = 0;
        for (int j = 0; j < d; j++) {
            float v = r[j * T];
            double av = fabs((double)v);
            int m = (int)floor(__dmul_rn(bestT, av));
            if (m > steps) m = steps;
            int l = (v < 0) ? (L - 1) / 2 - m : (L + 1) / 2 + m;
            int bit = j * bits;
            code[bit / 8] |= (unsigned char)(l << (bit % 8));
            ur = __dadd_rn(ur, __dmul_rn((double)l - (double)L / 2, (double)v));
            norm = __dadd_rn(norm, __dmul_rn((double)v, (double)v));
            if (ip) slot = __dadd_rn(slot, __dmul_rn((double)rotA[(long long)a * d + j], (double)v));
        }
        double s = (double)slist[a];
        double beta = 0;
        if (ur > 0) beta = __ddiv_rn(__ddiv_rn(norm, ur), __dsqrt_rn(s));
        slot = ip ? -2 * slot : norm;
        corr[2 * (long long)e] = f2h((float)__ddiv_rn(slot, s));
        corr[2 * (long long)e + 1] = f2h((float)beta);
    }
}

// ---------------------------------------------------------------------------
// k-means++ on the device: the sample's float16 rows gathered once into a
// column-major copy (element j of sample point i at j*s + i, so that a warp
// reads consecutive addresses), then per round the distance of every sample
// point to the new centre, summed exactly as vec.L2 on the host (four
// float32 accumulators over j mod 4, then (s0+s1)+(s2+s3), then the tail;
// _rn intrinsics so that nothing is fused): the host then draws the same
// centres from the same distances.

// vlc_pp_gather: T[j*s + i] = X[rows[i]*dp + j].
extern "C" __global__ void vlc_pp_gather(const unsigned short* __restrict__ X, int dp,
                                         const int* __restrict__ rows, int s, int d,
                                         unsigned short* __restrict__ T) {
    long long total = (long long)s * d;
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < total;
         k += (long long)gridDim.x * blockDim.x) {
        int i = (int)(k % s), j = (int)(k / s);
        T[k] = X[(long long)rows[i] * dp + j];
    }
}

// vlc_pp_dist: dist[i] = |T_i - T_c|^2, or the smaller of that and dist[i]
// when keep; c is *cptr when cptr is not null (a pick made on the device). Blocks of 128 threads for 32 points: warp w sums chain w of
// vec.L2's four (dimensions j = w mod 4) for the 32 points, in its order;
// warp 0 then adds the chains as vec.L2 does, and the tail. Four warps a
// point keep 4x the loads in flight of a thread a point.
extern "C" __global__ void __launch_bounds__(128) vlc_pp_dist(const unsigned short* __restrict__ T, int s, int d,
                                                              int c, const int* __restrict__ cptr, int keep,
                                                              float* dist) {
    __shared__ float part[4][32];
    if (cptr) c = *cptr;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int i = blockIdx.x * 32 + lane;
    const int d4 = d & ~3;
    float acc = 0;
    if (i < s) {
#pragma unroll 4
        for (int j = w; j < d4; j += 4) {
            const long long o = (long long)j * s;
            const float e = h2f(T[o + i]) - h2f(T[o + c]);
            acc = __fadd_rn(acc, __fmul_rn(e, e));
        }
    }
    part[w][lane] = acc;
    __syncthreads();
    if (w == 0 && i < s) {
        float t = __fadd_rn(__fadd_rn(part[0][lane], part[1][lane]), __fadd_rn(part[2][lane], part[3][lane]));
        for (int j = d4; j < d; j++) {
            const long long o = (long long)j * s;
            const float e = h2f(T[o + i]) - h2f(T[o + c]);
            t = __fadd_rn(t, __fmul_rn(e, e));
        }
        if (!keep || t < dist[i]) dist[i] = t;
    }
}

// k-means++ rounds on the device (kmeans.PlusPlusRounds, with its
// arithmetic): per round vlc_pp_blocksums, vlc_pp_draw and vlc_pp_dist
// queue on the stream with no round trip; the host reads the picks once.

// vlc_pp_blocksums: blocks[b] = the float64 sum of dist's block b of
// PP_BLOCK values, as kmeans.BlockSums: four chains, (s0+s1)+(s2+s3), then
// the tail.
extern "C" __global__ void vlc_pp_blocksums(const float* __restrict__ dist, int s, double* blocks, int nb) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nb) return;
    const int lo = b * PP_BLOCK, len = min(s, lo + PP_BLOCK) - lo;
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int i = 0;
    for (; i + 4 <= len; i += 4) {
        s0 = __dadd_rn(s0, (double)dist[lo + i]);
        s1 = __dadd_rn(s1, (double)dist[lo + i + 1]);
        s2 = __dadd_rn(s2, (double)dist[lo + i + 2]);
        s3 = __dadd_rn(s3, (double)dist[lo + i + 3]);
    }
    double t = __dadd_rn(__dadd_rn(s0, s1), __dadd_rn(s2, s3));
    for (; i < len; i++) t = __dadd_rn(t, (double)dist[lo + i]);
    blocks[b] = t;
}

// vlc_pp_draw (one block of PP_DRAW_THREADS): round k's pick, as
// kmeans.drawD2: the total of the block sums in order; r = u[k-1] * total
// taken down block by block while it stays >= 0, then point by point; the
// last point with a positive distance when rounding leaves r >= 0;
// fallback[k-1] when the total is 0. Thread 0 does the arithmetic, in
// that order; the block stages the block sums in shared memory a tile at a
// time, and the chosen block's distances are loaded together, so that the
// walks wait on shared memory and registers rather than on a global load
// a step (a thread alone: about half of a round's time at 4,096 anchors).
#define PP_DRAW_TILE 2048 // block sums a tile: 16 KB
extern "C" __global__ void __launch_bounds__(PP_DRAW_THREADS)
    vlc_pp_draw(const float* __restrict__ dist, int s, const double* __restrict__ blocks, int nb,
                const double* __restrict__ u, const int* __restrict__ fallback, int* picks, int k) {
    __shared__ double tile[PP_DRAW_TILE];
    __shared__ int done;
    const bool lead = threadIdx.x == 0;
    double total = 0;
    for (int t0 = 0; t0 < nb; t0 += PP_DRAW_TILE) {
        const int len = min(PP_DRAW_TILE, nb - t0);
        for (int i = threadIdx.x; i < len; i += blockDim.x) tile[i] = blocks[t0 + i];
        __syncthreads();
        if (lead)
            for (int i = 0; i < len; i++) total = __dadd_rn(total, tile[i]);
        __syncthreads();
    }
    int pick = -1, last = -1;
    double r = 0;
    if (lead) {
        done = !(total > 0);
        if (total > 0) r = __dmul_rn(u[k - 1], total);
    }
    __syncthreads();
    const bool walk = !done;
    for (int t0 = 0; walk && t0 < nb; t0 += PP_DRAW_TILE) {
        const int len = min(PP_DRAW_TILE, nb - t0);
        for (int i = threadIdx.x; i < len; i += blockDim.x) tile[i] = blocks[t0 + i];
        __syncthreads();
        if (lead) {
            for (int b = t0; b < t0 + len && pick < 0; b++) {
                const double bs = tile[b - t0];
                if (bs > 0) last = b;
                const double t = __dsub_rn(r, bs);
                if (t >= 0) {
                    r = t;
                    continue;
                }
                // The block's distances, loaded together, then walked.
                const int lo = b * PP_BLOCK, hi = min(s, lo + PP_BLOCK);
                float vals[PP_BLOCK];
#pragma unroll
                for (int q = 0; q < PP_BLOCK; q++) vals[q] = lo + q < hi ? dist[lo + q] : 0.0f;
#pragma unroll
                for (int q = 0; q < PP_BLOCK; q++) {
                    const double v = (double)vals[q];
                    if (v > 0) {
                        r = __dsub_rn(r, v);
                        if (r < 0) {
                            pick = lo + q;
                            break;
                        }
                    }
                }
            }
            done = pick >= 0;
        }
        __syncthreads();
        if (done) break;
    }
    if (!lead) return;
    if (!walk) {
        picks[k] = fallback[k - 1];
        return;
    }
    if (pick < 0) {
        pick = s - 1;
        for (int i = min(s, (last + 1) * PP_BLOCK) - 1; i >= 0; i--)
            if (dist[i] > 0) {
                pick = i;
                break;
            }
    }
    picks[k] = pick;
}

// ---------------------------------------------------------------------------
// Reduce over points grouped by anchor (resident points, d <= 1024): a
// counting sort of the points by anchor (vlc_hist, vlc_scan, vlc_scatter),
// then vlc_reduce_runs, whose warps walk runs of consecutive sorted points,
// keep the sums of the current anchor in registers and add them to the
// statistics once per anchor per run instead of once per point: about one
// atomic per 30 points where vlc_reduce does one per point and dimension.
// The same sums as vlc_reduce, to the bit: both add the same fixed-point
// terms, in an order that does not matter.

#define RUN_POINTS 32  // sorted points per warp task

extern "C" __global__ void vlc_hist(const int* __restrict__ assign, unsigned* count, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(count + assign[i], 1u);
}

// vlc_scan (one block of 1024 threads): start[a] = count[0] + ... + count[a-1].
extern "C" __global__ void vlc_scan(const unsigned* __restrict__ count, unsigned* start, int m) {
    __shared__ unsigned part[1024];
    const int t = threadIdx.x, per = (m + 1023) / 1024;
    const int lo = min(m, t * per), hi = min(m, lo + per);
    unsigned s = 0;
    for (int a = lo; a < hi; a++) s += count[a];
    part[t] = s;
    __syncthreads();
    for (int o = 1; o < 1024; o <<= 1) {
        unsigned v = t >= o ? part[t - o] : 0;
        __syncthreads();
        part[t] += v;
        __syncthreads();
    }
    unsigned run = part[t] - s;  // exclusive prefix of this thread's segment
    for (int a = lo; a < hi; a++) {
        start[a] = run;
        run += count[a];
    }
}

extern "C" __global__ void vlc_scatter(const int* __restrict__ assign, unsigned* cursor, unsigned* perm, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        perm[atomicAdd(cursor + assign[i], 1u)] = (unsigned)i;
}

// ---------------------------------------------------------------------------
// The exchange of a point set split over devices (exchange.go): a share
// adds another share's partial sums to its own, and copies parts of the
// total from the others. The source may be another GPU's memory, read
// directly where the driver granted peer access. The sums are fixed
// point, so integer adds give the one-device total in any order (wrapping
// as the reduce's own adds do).

extern "C" __global__ void vlc_add_i64(long long* __restrict__ dst, const long long* __restrict__ src, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        dst[i] = (long long)((unsigned long long)dst[i] + (unsigned long long)src[i]);
}

extern "C" __global__ void vlc_add_u32(unsigned* __restrict__ dst, const unsigned* __restrict__ src, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        dst[i] += src[i];
}

extern "C" __global__ void vlc_copy_u64(unsigned long long* __restrict__ dst, const unsigned long long* __restrict__ src,
                                        long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

extern "C" __global__ void vlc_copy_u32(unsigned* __restrict__ dst, const unsigned* __restrict__ src, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

// reduce_runs is vlc_reduce_runs for d <= 256 G: lane l holds dimensions
// 256 g + 8 l .. +7 for g < G (one 16-byte load of 8 float16 values per
// group; rows of X are 128-byte aligned), and the fixed-point sums of the
// current anchor for them, 2 x 8 G 64-bit registers.
template <int G>
__device__ __forceinline__ void reduce_runs(const unsigned short* __restrict__ X, const int* __restrict__ assign,
                                            const unsigned* __restrict__ perm, const float* __restrict__ A32,
                                            float* __restrict__ dist, long long* sum, long long* sq, long long* wsum,
                                            unsigned* cnt, Scalars* sc, int n, int d, int dp, float tau, int huber,
                                            int move, float ss, float sq2, float sw, float se) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int tasks = (n + RUN_POINTS - 1) / RUN_POINTS;
    long long e = 0;
    float mx = 0.f;
    for (int task = blockIdx.x * nw + warp; task < tasks; task += gridDim.x * nw) {
        const int p0 = task * RUN_POINTS, p1 = min(n, p0 + RUN_POINTS);
        long long accS[G][8], accQ[G][8];
        long long accW = 0;
        unsigned accC = 0;
        int cur = -1;
#pragma unroll
        for (int g = 0; g < G; g++)
#pragma unroll
            for (int t = 0; t < 8; t++) accS[g][t] = accQ[g][t] = 0;
        // The next point's index, anchor and row are loaded while the
        // current one is summed: the chain perm -> assign -> X is what a
        // warp otherwise waits on, point after point.
        int ni = p0 < p1 ? (int)perm[p0] : -1;
        int na = ni >= 0 ? assign[ni] : -1;
        uint4 nx[G];
#pragma unroll
        for (int g = 0; g < G; g++) {
            const int j0 = 256 * g + 8 * lane;
            nx[g] = (ni >= 0 && j0 < d) ? *reinterpret_cast<const uint4*>(X + (size_t)ni * dp + j0) : make_uint4(0, 0, 0, 0);
        }
        for (int p = p0; p <= p1; p++) {
            const int i = ni, a = na;
            uint4 xv[G];
#pragma unroll
            for (int g = 0; g < G; g++) xv[g] = nx[g];
            if (p + 1 < p1) {
                ni = (int)perm[p + 1];
                na = assign[ni];
#pragma unroll
                for (int g = 0; g < G; g++) {
                    const int j0 = 256 * g + 8 * lane;
                    if (j0 < d) nx[g] = *reinterpret_cast<const uint4*>(X + (size_t)ni * dp + j0);
                }
            } else {
                ni = na = -1;
            }
            if (a != cur && cur >= 0) {  // flush the sums of anchor cur
                unsigned long long* su = reinterpret_cast<unsigned long long*>(sum + (size_t)cur * d);
                unsigned long long* q = reinterpret_cast<unsigned long long*>(sq + (size_t)cur * d);
#pragma unroll
                for (int g = 0; g < G; g++)
#pragma unroll
                    for (int t = 0; t < 8; t++) {
                        const int j = 256 * g + 8 * lane + t;
                        if (j < d) {
                            if (move) atomicAdd(su + j, (unsigned long long)accS[g][t]);
                            atomicAdd(q + j, (unsigned long long)accQ[g][t]);
                        }
                        accS[g][t] = accQ[g][t] = 0;
                    }
                if (lane == 0) {
                    if (move) atomicAdd(reinterpret_cast<unsigned long long*>(wsum + cur), (unsigned long long)accW);
                    atomicAdd(cnt + cur, accC);
                }
                accW = 0;
                accC = 0;
            }
            if (i < 0) break;
            cur = a;
            const float* c = A32 + (size_t)a * d;
            float r[G][8];
            float s = 0.f;
#pragma unroll
            for (int g = 0; g < G; g++) {
                const int j0 = 256 * g + 8 * lane;
                if (j0 < d) {
                    unsigned w4[4] = {xv[g].x, xv[g].y, xv[g].z, xv[g].w};
#pragma unroll
                    for (int t = 0; t < 8; t++) {
                        const int j = j0 + t;
                        const unsigned short h = (unsigned short)(w4[t >> 1] >> (16 * (t & 1)));
                        r[g][t] = j < d ? h2f(h) - c[j] : 0.f;
                        s = __fmaf_rn(r[g][t], r[g][t], s);
                    }
                } else {
#pragma unroll
                    for (int t = 0; t < 8; t++) r[g][t] = 0.f;
                }
            }
#pragma unroll
            for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
            float w = 1.f;
            if (huber) {
                float rr = sqrtf(s);
                if (rr > tau) w = tau / rr;
            }
#pragma unroll
            for (int g = 0; g < G; g++)
#pragma unroll
                for (int t = 0; t < 8; t++) {
                    if (move) accS[g][t] += fix(w * r[g][t], ss);
                    accQ[g][t] += fix(r[g][t] * r[g][t], sq2);
                }
            if (move) accW += fix(w, sw);
            accC++;
            if (lane == 0) {
                dist[i] = s;
                e += fix(s, se);
                mx = fmaxf(mx, s);
            }
        }
    }
    add_block_scalars(e, mx, sc, lane, warp, nw);
}

// vlc_reduce_runs<G>: the entry points for d <= 256, 512, 768, 1024.
static_assert(MAX_RUN_DIM == 4 * 256, "vlc_reduce_runs1..4 cover MAX_RUN_DIM dimensions");
#define REDUCE_RUNS(G)                                                                                                \
    extern "C" __global__ void vlc_reduce_runs##G(                                                                    \
        const unsigned short* __restrict__ X, const int* __restrict__ assign, const unsigned* __restrict__ perm,      \
        const float* __restrict__ A32, float* __restrict__ dist, long long* sum, long long* sq, long long* wsum,      \
        unsigned* cnt, Scalars* sc, int n, int d, int dp, float tau, int huber, int move, float ss, float sq2,        \
        float sw, float se) {                                                                                         \
        reduce_runs<G>(X, assign, perm, A32, dist, sum, sq, wsum, cnt, sc, n, d, dp, tau, huber, move, ss, sq2, sw, se); \
    }
REDUCE_RUNS(1)
REDUCE_RUNS(2)
REDUCE_RUNS(3)
REDUCE_RUNS(4)
