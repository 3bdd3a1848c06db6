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
//   cand   nq x cap  uint2    (distance bits, entry) of every scored entry
//   outE, outD nq x keep      the keep best, nearest first

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

// select_key finds the want-th smallest (1-based) of the n keys key(i):
// a radix select, 8 bits a pass from the top. It returns that key and
// sets *ties to how many keys equal to it are among the want smallest.
template <typename Key>
__device__ unsigned select_key(Key key, int n, int want, int* ties) {
    __shared__ unsigned hist[256];
    __shared__ unsigned s_prefix;
    __shared__ int s_want;
    unsigned prefix = 0, mask = 0;
    if (threadIdx.x == 0) s_want = want;
    for (int shift = 24; shift >= 0; shift -= 8) {
        hist[threadIdx.x] = 0;
        __syncthreads();
        for (int i = threadIdx.x; i < n; i += SBLOCK) {
            unsigned k = key(i);
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
    }
    *ties = s_want;
    __syncthreads();
    return prefix;
}

// take_smallest calls out(at, i), at = 0 .. min(want, n)-1 in no set
// order, with the index i of each of the want smallest keys of key(0..n-1),
// ties at the boundary to the lowest tie(i) (up to TIES of them; beyond,
// to the lowest indexes), and returns how many.
#define TIES 256
template <typename Key, typename Tie, typename Out>
__device__ int take_smallest(Key key, Tie tie, int n, int want, Out out) {
    if (want >= n) {
        for (int i = threadIdx.x; i < n; i += SBLOCK) out(i, i);
        return n;
    }
    int ties;
    unsigned t = select_key(key, n, want, &ties);
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

// vlc_s_rotate: one block per query: qq = |q|^2 and rq = P q, the
// rotation's steps in quant.Rotation's order (each output of a butterfly
// is the same float32 sum as on the host).
extern "C" __global__ void vlc_s_rotate(const float* __restrict__ q, const float* __restrict__ signs, int d, int p, float pscale,
                                        float* __restrict__ rq, float* __restrict__ qq) {
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
    for (int j = threadIdx.x; j < d; j += SBLOCK) dst[j] = x[j];
}

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
// beforehand).
extern "C" __global__ void vlc_s_probe(const float* __restrict__ dots, const float* __restrict__ norms,
                                       const unsigned long long* __restrict__ offs, int m, int ip, int nprobe,
                                       int* __restrict__ probe, int* __restrict__ coff, int* __restrict__ cnt) {
    const float* qa = dots + (size_t)blockIdx.x * m;
    int* pr = probe + (size_t)blockIdx.x * nprobe;
    auto key = [&](int a) { return okey(ip ? -qa[a] : norms[a] - 2.f * qa[a]); };
    take_smallest(key, [](int a) { return (unsigned)a; }, m, nprobe, [&](int at, int a) { pr[at] = a; });
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
// where list a's pairs start in the batch's list order.
extern "C" __global__ void vlc_s_starts(const int* __restrict__ cnt, int m, int* __restrict__ cursor) {
    int run = 0;
    for (int base = 0; base < m; base += SBLOCK) {
        int a = base + threadIdx.x, c = a < m ? cnt[a] : 0, total;
        int at = scan_block(c, &total);
        if (a < m) cursor[a] = run + at;
        run += total;
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

// score writes the estimates of entries lo..hi-1 for the gq queries whose
// residuals are in qp (pad values each) and constants in the s_ arrays.
// LANES threads take an entry (4 when the batch is too small to fill the
// GPU otherwise, each summing every 4th word, the sums then added across
// them), and the blocks of grid y share a list's entries.
template <int B, int LANES>
__device__ __forceinline__ void score(const unsigned* __restrict__ words, const unsigned* __restrict__ scal, float sa, float sb, int lo,
                                      int hi, int W, int pad, int gq, const float* qp, const float* s_qsum, const float* s_sq,
                                      const float* s_mul, const float* s_bias, const int* s_dot, const long long* s_out,
                                      uint2* __restrict__ cand) {
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
#pragma unroll
        for (int k = 0; k < GQ; k++) {
            if (k < gq) {
                float qu = __fsub_rn(t[k], s_qsum[k]);
                float score = s_dot[k] ? __fmul_rn(beta, qu) : __fsub_rn(__fadd_rn(s_sq[k], norm), __fmul_rn(__fmul_rn(2.f, beta), qu));
                float dist = __fadd_rn(__fmul_rn(s_mul[k], score), s_bias[k]);
                cand[s_out[k] + e] = make_uint2(__float_as_uint(dist), (unsigned)e);
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
                     const int* __restrict__ probe, const int* __restrict__ coff, int cap, uint2* __restrict__ cand,
                     const int* __restrict__ order, int npairs, int g, int lanes) {
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
        if (lanes == 4)
            score<B, 4>(words, scal, scale[a], sqrtS[a], lo, hi, W, pad, gq, qp, s_qsum, s_sq, s_mul, s_bias, s_dot, s_out, cand);
        else
            score<B, 1>(words, scal, scale[a], sqrtS[a], lo, hi, W, pad, gq, qp, s_qsum, s_sq, s_mul, s_bias, s_dot, s_out, cand);
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
        uint2 *__restrict__ cand, const int *__restrict__ order, int npairs, int g, int lanes
#define SCAN_PASS \
    rq, qqs, dots, rotA, norms, offs, scale, sqrtS, words, scal, d, m, W, metricIP, ipCodes, nprobe, probe, coff, cap, cand, order, npairs, g, lanes
extern "C" __global__ void __launch_bounds__(SBLOCK) vlc_s_scan1(SCAN_ARGS) { scan<1>(SCAN_PASS); }
extern "C" __global__ void __launch_bounds__(SBLOCK) vlc_s_scan2(SCAN_ARGS) { scan<2>(SCAN_PASS); }
extern "C" __global__ void __launch_bounds__(SBLOCK) vlc_s_scan4(SCAN_ARGS) { scan<4>(SCAN_PASS); }
extern "C" __global__ void __launch_bounds__(SBLOCK) vlc_s_scan8(SCAN_ARGS) { scan<8>(SCAN_PASS); }

// vlc_s_topk: one block per query: the keep candidates of least (distance,
// entry), sorted, padded with entry -1 and +Inf.
extern "C" __global__ void vlc_s_topk(const uint2* __restrict__ cand, int cap, const int* __restrict__ coff, int nprobe, int keep,
                                      int* __restrict__ outE, float* __restrict__ outD) {  // outD may follow outE: one copy back
    __shared__ unsigned long long sel[MAX_KEEP];
    const uint2* c = cand + (size_t)blockIdx.x * cap;
    int n = coff[(size_t)blockIdx.x * (nprobe + 1) + nprobe];
    int size = 1;
    while (size < min(keep, n)) size <<= 1;
    for (int i = threadIdx.x; i < size; i += SBLOCK) sel[i] = ~0ull;
    __syncthreads();
    auto key = [&](int i) { return okey(__uint_as_float(c[i].x)); };
    take_smallest(key, [&](int i) { return c[i].y; }, n, keep, [&](int at, int i) { sel[at] = ((unsigned long long)okey(__uint_as_float(c[i].x)) << 32) | c[i].y; });
    __syncthreads();
    for (int k = 2; k <= size; k <<= 1) {
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
        if (i < min(keep, n)) {
            oe[i] = (int)(unsigned)sel[i];
            od[i] = ofloat((unsigned)(sel[i] >> 32));
        } else {
            oe[i] = -1;
            od[i] = __int_as_float(0x7f800000);
        }
    }
}
