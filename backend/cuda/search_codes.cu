// Search kernels of the CUDA backend for the pq and sq8 codes: an index
// resident on the device, searched for batches of queries (Go:
// search_codes.go; the search itself is defined by device.CodeData).
// PTX for compute_80, generated with
//
//	nvcc -ptx -arch=compute_80 -O3 --fmad=false -o search_codes.ptx search_codes.cu
//
// (`make ptx`), committed and embedded; search_codes.cu.sha256 records this
// file's hash, and a Go test fails when the PTX is older. --fmad=false:
// pq's tables and sums are the CPU's float32 steps, each product and sum
// rounded on its own (its score cancels, device.CodeData).
//
// Buffers (device-resident while the index is open):
//   rotA   m x d     float32  P a (pq), a (sq8)
//   norms  m         float32  |a|^2
//   offs   m+1       uint64   list a is entries offs[a] .. offs[a+1]-1
//   words  tiles x W x 32 u32 code bytes, word w of entry e at
//                             (e/32)*W*32 + w*32 + e%32
//   signs  rounds x d float32 the rotation's sign rounds (pq: 3, sq8: 0)
//   pq:  scal tiles x 32 u32 (C | B<<8); grids m x 4 (B0, BStep, C0,
//        CStep); cb 256 x d centroids; mean d (P mu)
//   sq8: lo, step  m x d float32
// and per batch of nq queries:
//   q, rq  nq x d    float32  prepared queries, rotated; qq |q|^2
//   dots   nq x m    float32  <rq, rotA[a]>
//   probe  nq x nprobe int32  the probed lists; coff nq x (nprobe+1) each
//                             one's first candidate, and the total
//   lut    nq x ntab x nsub x 256 float32  pq's tables (ntab: 1 or 2)
//   cand   nq x cap  uint2    (distance bits, entry) of every scored entry
//   outE, outD nq x keep      the keep best, nearest first

#define FULL 0xffffffffu
#define SBLOCK 256      // threads of every kernel
#define MAX_KEEP 4096   // device.MaxKeep
#define CENT 256        // device.PQCentroids

__device__ __forceinline__ unsigned okey(float f) {
    unsigned u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float ofloat(unsigned k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// block_sum returns the sum of v over the block (every thread gets it);
// every thread must call it.
__device__ float block_sum(float v) {
    __shared__ float part[SBLOCK / 32];
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    float t = 0.f;
    for (int w = 0; w < SBLOCK / 32; w++) t += part[w];
    return t;
}

// scan_block returns the exclusive prefix sum of v over the block and
// sets *total to the sum; every thread must call it.
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

// select_key finds the want-th smallest (1-based) of the n keys key(i), a
// radix select 8 bits a pass, and sets *ties to how many keys equal to it
// are among the want smallest.
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
        int w = s_want;
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
// order, with the index i of each of the want smallest keys, ties at the
// boundary to the lowest tie(i) (up to TIES of them; beyond, to the lowest
// indexes), and returns how many.
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
    if (s_eq <= TIES) {
        for (int e = threadIdx.x; e < s_eq; e += SBLOCK) {
            int rank = 0, i = s_tie[e];
            unsigned ti = tie(i);
            for (int f = 0; f < s_eq; f++) {
                unsigned tf = tie(s_tie[f]);
                rank += tf < ti || (tf == ti && s_tie[f] < i);
            }
            if (rank < ties) out(less + rank, i);
        }
    } else {
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

// vlc_c_rotate: one block per query: qq = |q|^2 and rq = P q, the
// rotation's rounds (none for sq8) in quant.Rotation's order.
extern "C" __global__ void vlc_c_rotate(const float* __restrict__ q, const float* __restrict__ signs, int rounds, int d, int p,
                                        float pscale, float* __restrict__ rq, float* __restrict__ qq) {
    extern __shared__ float x[];
    const float* src = q + (size_t)blockIdx.x * d;
    float s = 0.f;
    for (int j = threadIdx.x; j < d; j += SBLOCK) {
        float v = src[j];
        x[j] = v;
        s += v * v;
    }
    s = block_sum(s);
    if (threadIdx.x == 0) qq[blockIdx.x] = s;
    __syncthreads();
    for (int round = 0; round < rounds; round++) {
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

// vlc_c_dots: dots (nq x m) = rq (nq x d) . rotA (m x d)^T, a 128 x 128
// tile a block, 8 x 8 a thread.
#define DT 128
#define DK 8
extern "C" __global__ void __launch_bounds__(256) vlc_c_dots(const float* __restrict__ rq, const float* __restrict__ rotA, int nq, int m,
                                                             int d, float* __restrict__ dots) {
    __shared__ float as[DK][DT + 4], bs[DK][DT + 4];
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    int q0 = blockIdx.y * DT, a0 = blockIdx.x * DT;
    float acc[8][8] = {};
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

// vlc_c_probe: one block per query: the nprobe lists of least distance
// (norms - 2 qa, or -qa for ip), ties to the lower list, in no set order;
// coff their candidates' offsets, exclusive, and the total.
extern "C" __global__ void vlc_c_probe(const float* __restrict__ dots, const float* __restrict__ norms,
                                       const unsigned long long* __restrict__ offs, int m, int ip, int nprobe,
                                       int* __restrict__ probe, int* __restrict__ coff) {
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
}

// vlc_c_lut: block (query, table): pq's lookup table, thread k computing
// centroid k's value in every subspace, T[s][k] = sum_j x_{lo+j} c_{s,k,j}
// in order of j, x = rq - mean (table 0, the L2 form's) or rq (table 1,
// the dot form's). first is the kind of the batch's table 0; ntab tables
// a query.
extern "C" __global__ void __launch_bounds__(SBLOCK) vlc_c_lut(const float* __restrict__ rq, const float* __restrict__ mean,
                                                               const float* __restrict__ cb, int d, int nsub, int ntab, int first,
                                                               float* __restrict__ lut) {
    extern __shared__ float x[];
    int q = blockIdx.x, kind = first + blockIdx.y;
    const float* src = rq + (size_t)q * d;
    for (int j = threadIdx.x; j < d; j += SBLOCK) x[j] = kind == 0 ? src[j] - mean[j] : src[j];
    __syncthreads();
    int k = threadIdx.x;
    float* out = lut + ((size_t)q * ntab + blockIdx.y) * nsub * CENT;
    for (int s = 0; s < nsub; s++) {
        int lo = s * d / nsub, hi = (s + 1) * d / nsub, w = hi - lo;
        const float* c = cb + (size_t)CENT * lo + (size_t)k * w;
        float p = 0.f;
        for (int j = 0; j < w; j++) p += c[j] * x[lo + j];
        out[s * CENT + k] = p;
    }
}

// form sets the list's form (device.IndexData): dot, mul and bias.
__device__ __forceinline__ void form(float qq, float qa, float na, int metricIP, int ipCodes, int* dot, float* mul, float* bias) {
    *dot = 0;
    *mul = 1.f;
    *bias = 0.f;
    if (ipCodes && qq - 2.f * qa + na < qq) {
        *mul = 0.5f;
        *bias = -(qq + na) / 2.f;
    } else if (metricIP) {
        *dot = 1;
        *mul = -1.f;
        *bias = -qa;
    }
}

// vlc_c_scan_pq: one block per (query, rank) pair: the estimates of the
// probed list's entries, a thread an entry, the table in shared memory
// when smemLut (nsub*256 floats of dynamic shared memory), else read from
// lut.
extern "C" __global__ void __launch_bounds__(SBLOCK)
    vlc_c_scan_pq(const float* __restrict__ rq, const float* __restrict__ qqs, const float* __restrict__ dots,
                  const float* __restrict__ rotA, const float* __restrict__ norms, const unsigned long long* __restrict__ offs,
                  const float* __restrict__ grids, const unsigned* __restrict__ words, const unsigned* __restrict__ scal,
                  const float* __restrict__ lut, int d, int m, int W, int nsub, int ntab, int first, int metricIP, int ipCodes,
                  int nprobe, const int* __restrict__ probe, const int* __restrict__ coff, int cap, uint2* __restrict__ cand,
                  int smemLut) {
    extern __shared__ float T[];
    int pair = blockIdx.x, q = pair / nprobe, r = pair % nprobe;
    int a = probe[pair];
    int lo = (int)offs[a], hi = (int)offs[a + 1];
    if (lo == hi) return;
    float qq = qqs[q], qa = dots[(size_t)q * m + a];
    int dot;
    float mul, bias;
    form(qq, qa, norms[a], metricIP, ipCodes, &dot, &mul, &bias);
    // |rq - P a|^2, the L2 form's first term
    const float* x = rq + (size_t)q * d;
    const float* anc = rotA + (size_t)a * d;
    float s = 0.f;
    if (!dot)
        for (int j = threadIdx.x; j < d; j += SBLOCK) {
            float v = x[j] - anc[j];
            s += v * v;
        }
    float qqa = block_sum(s);
    const float* tab = lut + ((size_t)q * ntab + (dot - first)) * nsub * CENT;
    if (smemLut) {
        for (int i = threadIdx.x; i < nsub * CENT; i += SBLOCK) T[i] = tab[i];
        __syncthreads();
        tab = T;
    }
    float b0 = grids[4 * a], bs = grids[4 * a + 1], c0 = grids[4 * a + 2], cs = grids[4 * a + 3];
    uint2* out = cand + (size_t)q * cap + coff[(size_t)q * (nprobe + 1) + r] - lo;
    for (int e = lo + threadIdx.x; e < hi; e += SBLOCK) {
        const unsigned* wp = words + (size_t)(e >> 5) * W * 32 + (e & 31);
        float t0 = 0.f, t1 = 0.f, t2 = 0.f, t3 = 0.f;
        int w = 0;
        for (; 4 * w + 3 < nsub; w++) {
            unsigned v = __ldg(wp + w * 32);
            const float* tw = tab + 4 * w * CENT;
            t0 += tw[v & 255];
            t1 += tw[CENT + ((v >> 8) & 255)];
            t2 += tw[2 * CENT + ((v >> 16) & 255)];
            t3 += tw[3 * CENT + (v >> 24)];
        }
        if (w < W) {  // the last word, with fewer than 4 subspaces
            unsigned v = __ldg(wp + w * 32);
            const float* tw = tab + 4 * w * CENT;
            int left = nsub - 4 * w;
            t0 += tw[v & 255];
            if (left > 1) t1 += tw[CENT + ((v >> 8) & 255)];
            if (left > 2) t2 += tw[2 * CENT + ((v >> 16) & 255)];
        }
        float ip = (t0 + t1) + (t2 + t3);
        unsigned sc = scal[e];
        float beta = b0 + (float)((sc >> 8) & 255) * bs;
        float score;
        if (dot) {
            score = beta * ip;
        } else {
            float c = c0 + (float)(sc & 255) * cs;
            score = qqa + c - 2.f * beta * ip;
        }
        out[e] = make_uint2(__float_as_uint(mul * score + bias), (unsigned)e);
    }
}

// vlc_c_scan_sq8: one block per (query, rank) pair: the estimates of the
// probed list's entries, a thread an entry; the query's per-dimension
// terms in shared memory (2d floats).
extern "C" __global__ void __launch_bounds__(SBLOCK)
    vlc_c_scan_sq8(const float* __restrict__ rq, const float* __restrict__ qqs, const float* __restrict__ dots,
                   const float* __restrict__ rotA, const float* __restrict__ norms, const unsigned long long* __restrict__ offs,
                   const float* __restrict__ lo8, const float* __restrict__ step, const unsigned* __restrict__ words, int d, int m,
                   int W, int metricIP, int ipCodes, int nprobe, const int* __restrict__ probe, const int* __restrict__ coff,
                   int cap, uint2* __restrict__ cand) {
    extern __shared__ float sm[];
    float* u = sm;
    float* st = sm + d;
    int pair = blockIdx.x, q = pair / nprobe, r = pair % nprobe;
    int a = probe[pair];
    int lo = (int)offs[a], hi = (int)offs[a + 1];
    if (lo == hi) return;
    float qq = qqs[q], qa = dots[(size_t)q * m + a];
    int dot;
    float mul, bias;
    form(qq, qa, norms[a], metricIP, ipCodes, &dot, &mul, &bias);
    const float* x = rq + (size_t)q * d;
    const float* anc = rotA + (size_t)a * d;
    const float* l = lo8 + (size_t)a * d;
    const float* sp = step + (size_t)a * d;
    float b = 0.f;
    for (int j = threadIdx.x; j < d; j += SBLOCK) {
        if (dot) {
            b += x[j] * l[j];
            u[j] = x[j] * sp[j];
        } else {
            u[j] = x[j] - anc[j] - l[j];
        }
        st[j] = sp[j];
    }
    float base = block_sum(b);  // its barriers publish u and st
    uint2* out = cand + (size_t)q * cap + coff[(size_t)q * (nprobe + 1) + r] - lo;
    for (int e = lo + threadIdx.x; e < hi; e += SBLOCK) {
        const unsigned* wp = words + (size_t)(e >> 5) * W * 32 + (e & 31);
        float acc = 0.f;
        for (int w = 0; w < W; w++) {
            unsigned v = __ldg(wp + w * 32);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int j = 4 * w + i;
                if (j >= d) break;
                float f = (float)((v >> (8 * i)) & 255);
                if (dot) {
                    acc += u[j] * f;
                } else {
                    float t = u[j] - st[j] * f;
                    acc += t * t;
                }
            }
        }
        float score = dot ? base + acc : acc;
        out[e] = make_uint2(__float_as_uint(mul * score + bias), (unsigned)e);
    }
}

// vlc_c_topk: one block per query: the keep candidates of least (distance,
// entry), sorted, padded with entry -1 and +Inf.
extern "C" __global__ void vlc_c_topk(const uint2* __restrict__ cand, int cap, const int* __restrict__ coff, int nprobe, int keep,
                                      int* __restrict__ outE, float* __restrict__ outD) {
    __shared__ unsigned long long sel[MAX_KEEP];
    const uint2* c = cand + (size_t)blockIdx.x * cap;
    int n = coff[(size_t)blockIdx.x * (nprobe + 1) + nprobe];
    int size = 1;
    while (size < min(keep, n)) size <<= 1;
    for (int i = threadIdx.x; i < size; i += SBLOCK) sel[i] = ~0ull;
    __syncthreads();
    auto key = [&](int i) { return okey(__uint_as_float(c[i].x)); };
    take_smallest(key, [&](int i) { return c[i].y; }, n, keep,
                  [&](int at, int i) { sel[at] = ((unsigned long long)okey(__uint_as_float(c[i].x)) << 32) | c[i].y; });
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
