// Kernels of the CUDA backend for a graph build's exact measuring
// (graph_rows.go; device.RowMeter): every row's distances to its
// candidates, the robust pruning of its lists, and the refinement pass's
// greedy searches (walks). PTX for compute_80,
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
// and for the walks (below):
//   adj    n x r     uint32   the graph's slots (NOROW past a row's last)
//   starts walks     uint32   each walk's first row
//   seen   warps x ceil(n/32) uint32  each warp's seen bits
//   outIds, outD  walks x cap  the expanded rows; counts  walks  int32

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

// Walks: warp w runs walks w, w+W, ... (W warps in all), each a greedy
// search of the graph adj (r slots a row, NOROW past a row's neighbours)
// for row of[i] from row starts[i], as graph's beam search does with
// exact distances (device.DeviceRows.Walk): the pool of the ef nearest
// rows found, nearest first, ties in the order met; each step expands the
// nearest row not yet expanded, its neighbours not yet seen scored and
// merged into the pool, a neighbour after the pool's rows of equal
// distance and the step's rows in slot order. Merging a step's rows at
// once keeps what inserting them one by one keeps: the first ef of the
// stable merge.
//
// Per warp, in shared memory: the pool (ids, dists, done) in two halves
// that a step's merge goes between, and the step's unseen rows; in global
// memory, seen (n bits, zero between walks: a walk clears the words it
// set, from its expanded rows' slots). A walk records its expanded rows
// and their distances in ids/dists[i*cap..]; counts[i] is how many, or
// -1 where the walk would expand more than cap (it stops there).
#define WALK_WARPS 4      // warps a block
#define WALK_EF 256       // device: the widest pool
#define WALK_R 128        // device: the most slots a row

struct walkSmem {
    unsigned id[2][WALK_EF];
    float d[2][WALK_EF];
    unsigned char done[2][WALK_EF];
    unsigned bid[WALK_R];
    float bd[WALK_R];
};

template <typename T>
__device__ void walk(const T* rows, int d, const unsigned* adj, int r, const unsigned* of, const unsigned* starts,
                     int walks, int ef, int cap, unsigned* seenAll, long long seenWords, unsigned* outIds,
                     float* outD, int* counts) {
    __shared__ walkSmem sm[WALK_WARPS];
    int wl = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 3, l = lane & 7;
    walkSmem& s = sm[wl];
    unsigned* seen = seenAll + (long long)(blockIdx.x * WALK_WARPS + wl) * seenWords;
    int warps = gridDim.x * WALK_WARPS;
    for (int i = blockIdx.x * WALK_WARPS + wl; i < walks; i += warps) {
        unsigned p = of[i], st = starts[i];
        unsigned* oid = outIds + (long long)i * cap;
        float* od = outD + (long long)i * cap;
        float sd = dist(rows, d, p, st, l);
        sd = __shfl_sync(FULL, sd, 0);
        if (lane == 0) {
            seen[st >> 5] |= 1u << (st & 31);
            s.id[0][0] = st;
            s.d[0][0] = sd;
            s.done[0][0] = 0;
        }
        __syncwarp();
        int cur = 0, len = 1, next = 0, count = 0;
        bool over = false;
        while (next < len) {
            if (count == cap) {
                over = true;
                break;
            }
            unsigned c = s.id[cur][next];
            float cdist = s.d[cur][next];
            if (lane == 0) {
                s.done[cur][next] = 1;
                oid[count] = c;
                od[count] = cdist;
            }
            count++;
            // The unseen neighbours, in slot order.
            int nb = 0;
            const unsigned* row = adj + (long long)c * r;
            for (int base = 0; base < r; base += 32) {
                int k = base + lane;
                unsigned v = k < r ? row[k] : NOROW;
                unsigned ends = __ballot_sync(FULL, v == NOROW);
                int stop = ends ? __ffs(ends) - 1 : 32; // the first empty slot
                bool valid = lane < stop;
                unsigned same = __match_any_sync(FULL, valid ? v : NOROW - 1 - lane);
                bool first = valid && (__ffs(same) - 1) == lane; // a row twice in a list counts once
                bool fresh = false;
                if (first) {
                    unsigned bit = 1u << (v & 31);
                    fresh = (atomicOr(&seen[v >> 5], bit) & bit) == 0;
                }
                unsigned fm = __ballot_sync(FULL, fresh);
                if (fresh) s.bid[nb + __popc(fm & ((1u << lane) - 1))] = v;
                nb += __popc(fm);
                if (stop < 32) break;
            }
            __syncwarp();
            for (int e = 0; e < nb; e += 4) {
                int k = e + g;
                unsigned q = k < nb ? s.bid[k] : p;
                float v = dist(rows, d, p, q, l);
                if (l == 0 && k < nb) s.bd[k] = v;
            }
            __syncwarp();
            // Merge: the step's rows ranked among themselves (distance,
            // then slot order) and against the pool (after equal ones).
            int nxt = cur ^ 1, nlen = min(ef, len + nb);
            for (int j = lane; j < nb; j += 32) {
                float dj = s.bd[j];
                int rank = 0;
                for (int k = 0; k < nb; k++) {
                    float dk = s.bd[k];
                    rank += dk < dj || (dk == dj && k < j);
                }
                int lo = 0, hi = len; // pool rows at or below dj
                while (lo < hi) {
                    int mid = (lo + hi) >> 1;
                    if (s.d[cur][mid] <= dj) lo = mid + 1; else hi = mid;
                }
                int at = rank + lo;
                if (at < nlen) {
                    s.id[nxt][at] = s.bid[j];
                    s.d[nxt][at] = dj;
                    s.done[nxt][at] = 0;
                }
            }
            for (int k = lane; k < len; k += 32) {
                float dk = s.d[cur][k];
                int below = 0;
                for (int j = 0; j < nb; j++) below += s.bd[j] < dk;
                int at = k + below;
                if (at < nlen) {
                    s.id[nxt][at] = s.id[cur][k];
                    s.d[nxt][at] = dk;
                    s.done[nxt][at] = s.done[cur][k];
                }
            }
            __syncwarp();
            cur = nxt;
            len = nlen;
            next = len; // the first row not expanded
            for (int base = 0; base < len; base += 32) {
                int k = base + lane;
                unsigned m = __ballot_sync(FULL, k < len && !s.done[cur][k]);
                if (m) {
                    next = base + __ffs(m) - 1;
                    break;
                }
            }
        }
        if (lane == 0) counts[i] = over ? -1 : count;
        // Clear the words set: the start's and every expanded row's slots.
        __syncwarp();
        if (lane == 0) seen[st >> 5] = 0;
        for (int e = 0; e < count; e++) {
            const unsigned* row = adj + (long long)oid[e] * r;
            for (int k = lane; k < r; k += 32) {
                unsigned v = row[k];
                if (v != NOROW) seen[v >> 5] = 0;
            }
        }
        __syncwarp();
    }
}

extern "C" __global__ void vlc_g_walk_h(const unsigned short* rows, int d, const unsigned* adj, int r,
                                        const unsigned* of, const unsigned* starts, int walks, int ef, int cap,
                                        unsigned* seen, long long seenWords, unsigned* outIds, float* outD,
                                        int* counts) {
    walk(rows, d, adj, r, of, starts, walks, ef, cap, seen, seenWords, outIds, outD, counts);
}

extern "C" __global__ void vlc_g_walk_f(const float* rows, int d, const unsigned* adj, int r, const unsigned* of,
                                        const unsigned* starts, int walks, int ef, int cap, unsigned* seen,
                                        long long seenWords, unsigned* outIds, float* outD, int* counts) {
    walk(rows, d, adj, r, of, starts, walks, ef, cap, seen, seenWords, outIds, outD, counts);
}
