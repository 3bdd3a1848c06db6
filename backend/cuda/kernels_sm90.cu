// Hopper (sm_90a) kernels of the CUDA backend: everything in kernels.cu,
// plus a fused assign on wgmma (warpgroup matrix multiply-accumulate),
// which the compute_80 PTX cannot express. PTX generated with
//
//	nvcc -ptx -arch=compute_90a -O3 -o kernels_sm90.ptx kernels_sm90.cu
//
// and chosen at Open on GPUs of compute capability 9.0 (H100, H200);
// kernels_sm90.cu.sha256 records the hashes of consts.cuh and both source files.
#include "kernels.cu"

// Shared-memory matrix descriptor for wgmma: K-major rows of 128 bytes with
// the 128-byte swizzle (the layout swz<64> writes: 16-byte chunk c of row r
// at chunk c ^ (r & 7)), groups of 8 rows 1024 bytes apart. The leading
// byte offset is unused with this swizzle.
__device__ __forceinline__ unsigned long long wg_desc(unsigned addr) {
    unsigned long long d = (unsigned long long)((addr & 0x3FFFF) >> 4);
    d |= 1ull << 16;
    d |= (unsigned long long)(1024 >> 4) << 32;
    d |= 1ull << 62;
    return d;
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
__device__ __forceinline__ void wg_wait1() { asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory"); }
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// d (128 float32 per thread) = (scale ? d : 0) + A (64 x 16, K-major) * B
// (256 x 16, K-major), A and B from shared memory.
__device__ __forceinline__ void wgmma_m64n256k16(float* d, unsigned long long da, unsigned long long db, int scale) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "r"(scale));
}

// wg_stage issues one stage's products as one wgmma group: acc (+)= the
// 64 x 64 slice of points at xs times the 256 x 64 slice of anchors at as,
// four k16 steps; the first stage of a tile (accumulate false) starts acc
// from 0. The caller waits for the group.
__device__ __forceinline__ void wg_stage(float* acc, unsigned xs, unsigned as, bool accumulate) {
    wg_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ks++)
        wgmma_m64n256k16(acc, wg_desc(xs + ks * 32), wg_desc(as + ks * 32), (accumulate || ks > 0) ? 1 : 0);
    wg_commit();
}

// tile_argmin folds one finished 64 x 256 accumulator tile (x.a of this
// warpgroup's 64 points and anchor tile tile) into the running best of the
// thread's two rows: distance |a|^2 - 2 x.a, the lower anchor on ties.
// Accumulator layout: warp wq of the warpgroup holds rows 16 wq + lane/4
// (+8), and of every 8 columns the two at 2 (lane % 4): acc[4j + 2h + e]
// is row +8h, column 8j + e.
__device__ __forceinline__ void tile_argmin(const float* acc, const float* __restrict__ anorm, int tile, int lane,
                                            float* best, int* bidx) {
    const int cb = tile * 256 + 2 * (lane & 3);
#pragma unroll
    for (int j = 0; j < 32; j++) {
        const float2 nn = __ldg(reinterpret_cast<const float2*>(anorm + cb + j * 8));
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const float v0 = fmaf(-2.f, acc[4 * j + 2 * h], nn.x);  // exact: one rounding, as n - 2 acc
            const float v1 = fmaf(-2.f, acc[4 * j + 2 * h + 1], nn.y);
            if (v0 < best[h]) {
                best[h] = v0;
                bidx[h] = cb + j * 8;
            }
            if (v1 < best[h]) {
                best[h] = v1;
                bidx[h] = cb + j * 8 + 1;
            }
        }
    }
}

// Fused assign on wgmma: the contract of assign_body (128 points x tiles of
// 256 anchors per block, partial distances |a|^2 - 2 x.a, running argmin
// in registers, 64-bit atomicMin into keys). 8 warps as 2 warpgroups, each
// 64 points x 256 anchors (128 float32 accumulators a thread); the
// dimension in stages of 64 through a 3-deep cp.async pipeline in the
// swizzled layout wgmma reads (3 stages measured faster than 4 here).
extern "C" __global__ void __launch_bounds__(ATHREADS)
    vlc_assign_wgmma(const unsigned short* __restrict__ X, const unsigned short* __restrict__ A,
                     const float* __restrict__ anorm, unsigned long long* __restrict__ keys, int dp, int ntiles,
                     int tilesPerSplit) {
    constexpr int BNW = WGMMA_BN, BKW = WGMMA_BK;
    static_assert(BNW == 256 && BKW == 64, "written for m64n256k16 tiles, 64 dimensions a stage");
    constexpr int STAGE = (BM + BNW) * BKW * 2;
    extern __shared__ __align__(128) unsigned char wsmem[];
    __shared__ unsigned long long rowkey[BM];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wg = warp >> 2, wq = warp & 3;
    const int rowBase = blockIdx.x * BM;
    const int t0 = blockIdx.y * tilesPerSplit, t1 = min(t0 + tilesPerSplit, ntiles);
    if (t0 >= t1) return;
    const int KT = dp / BKW, T = (t1 - t0) * KT;
    for (int i = tid; i < BM; i += ATHREADS) rowkey[i] = ~0ull;
    // The swizzle works on address bits: stages start 1024-byte aligned
    // (the Go side asks for 1 KiB more than the stages need).
    const unsigned sbase = (smem_u32(wsmem) + 1023u) & ~1023u;

    float acc[128];
    float best[2] = {__int_as_float(0x7f800000), __int_as_float(0x7f800000)};
    int bidx[2] = {0x7fffffff, 0x7fffffff};

#pragma unroll
    for (int s = 0; s < WGMMA_STAGES - 1; s++) {
        if (s < T) assign_load<BNW, BKW>(X, A, sbase + s * STAGE, rowBase, t0 + s / KT, s % KT, dp, tid);
        cp_async_commit();
    }
    // Within an anchor tile one wgmma group stays in flight (wait 1) while
    // the next stage is issued; a barrier then lets the stage the finished
    // group read take the next load. The tile's last stage waits for all,
    // unconditionally before the argmin (a conditional wait there made the
    // compiler insert its own and measured slower).
    int it = 0;
    for (int tile = t0; tile < t1; tile++) {
        for (int kc = 0; kc < KT; kc++, it++) {
            cp_async_wait<WGMMA_STAGES - 2>();
            fence_async_smem();  // the copies, visible to wgmma's (async) reads
            __syncthreads();
            const unsigned xs = sbase + (it % WGMMA_STAGES) * STAGE + wg * 64 * 128;
            const unsigned as = sbase + (it % WGMMA_STAGES) * STAGE + BM * BKW * 2;
            wg_stage(acc, xs, as, kc > 0);
            if (kc + 1 < KT) {
                wg_wait1();
            } else {
                wg_wait0();
            }
            __syncthreads();  // every warpgroup is done with the previous stage
            {
                int nx = it + WGMMA_STAGES - 1;
                if (nx < T) assign_load<BNW, BKW>(X, A, sbase + (nx % WGMMA_STAGES) * STAGE, rowBase, t0 + nx / KT, nx % KT, dp, tid);
                cp_async_commit();
            }
        }
        wg_wait0();
        tile_argmin(acc, anorm, tile, lane, best, bidx);
    }
    cp_async_wait<0>();
#pragma unroll
    for (int h = 0; h < 2; h++) row_min(best[h], bidx[h], rowkey, wg * 64 + wq * 16 + (lane >> 2) + 8 * h, lane);
    rows_to_keys(rowkey, keys, rowBase, tid);
}

// A tensor map (CUtensorMap): 128 opaque bytes that the driver's
// cuTensorMapEncodeTiled fills and the kernel takes by value.
struct __align__(64) TensorMap {
    unsigned long long v[16];
};

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    asm volatile(
        "{\n.reg .pred p;\nWAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
        "@!p bra WAIT_%=;\n}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}
// Bulk tensor copy of one box (64 columns x rows) at (col, row) into
// shared memory, completing on mbarrier bar.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TensorMap* map, int col, int row, unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
        "l"(map), "r"(col), "r"(row), "r"(bar)
        : "memory");
}

// Fused assign on wgmma fed by the bulk tensor copy engine: the contract
// of vlc_assign_wgmma, with warp specialization. Warpgroup 0 is the
// producer: one thread issues the copies of each stage (128 points and 256
// anchors by 64 dimensions, 128-byte swizzled by the copy engine itself)
// onto a "full" mbarrier. Warpgroups 1 and 2 consume, 64 points each,
// and free a stage on its "empty" mbarrier once their wgmma group that read
// it has completed. No block-wide barrier in the loop: the producer runs up
// to TMA_STAGES stages ahead, through the argmin at each tile's end too.
extern "C" __global__ void __launch_bounds__(TMA_THREADS, 1)
    vlc_assign_tma(const __grid_constant__ TensorMap tx, const __grid_constant__ TensorMap ta,
                   const float* __restrict__ anorm, unsigned long long* __restrict__ keys, int dp, int ntiles,
                   int tilesPerSplit) {
    constexpr int BNW = TMA_BN, BKW = TMA_BK;
    static_assert(BNW == 256 && BKW == 64, "written for m64n256k16 tiles, 64 dimensions a stage");
    static_assert(TMA_THREADS == ATHREADS + 128, "8 consumer warps and a producer warpgroup");
    constexpr int XBYTES = BM * BKW * 2, STAGE = (BM + BNW) * BKW * 2;
    extern __shared__ __align__(128) unsigned char wsmem[];
    __shared__ unsigned long long rowkey[BM];
    __shared__ __align__(8) unsigned long long bars[2 * TMA_STAGES];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wg = warp >> 2, wq = warp & 3;
    const int rowBase = blockIdx.x * BM;
    const int t0 = blockIdx.y * tilesPerSplit, t1 = min(t0 + tilesPerSplit, ntiles);
    if (t0 >= t1) return;
    const int KT = dp / BKW, T = (t1 - t0) * KT;
    const unsigned sbase = (smem_u32(wsmem) + 1023u) & ~1023u;
    const unsigned full = smem_u32(&bars[0]), empty = smem_u32(&bars[TMA_STAGES]);
    for (int i = tid; i < BM; i += TMA_THREADS) rowkey[i] = ~0ull;
    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < TMA_STAGES; s++) {
            mbar_init(full + 8 * s, 1);
            mbar_init(empty + 8 * s, 8);  // one lane of each consumer warp
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        if (tid == 0) {
            for (int it = 0; it < T; it++) {
                const int s = it % TMA_STAGES;
                if (it >= TMA_STAGES) mbar_wait(empty + 8 * s, ((it / TMA_STAGES) & 1) ^ 1);
                const unsigned dst = sbase + s * STAGE;
                mbar_expect_tx(full + 8 * s, STAGE);
                const int kc = it % KT, tile = t0 + it / KT;
                tma_load_2d(dst, &tx, kc * BKW, rowBase, full + 8 * s);
                tma_load_2d(dst + XBYTES, &ta, kc * BKW, tile * BNW, full + 8 * s);
            }
        }
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int cg = wg - 1;  // consumer warpgroup: points 64 cg .. 64 cg + 63
    float acc[128];
    float best[2] = {__int_as_float(0x7f800000), __int_as_float(0x7f800000)};
    int bidx[2] = {0x7fffffff, 0x7fffffff};
    int it = 0;
    for (int tile = t0; tile < t1; tile++) {
        for (int kc = 0; kc < KT; kc++, it++) {
            const int s = it % TMA_STAGES;
            mbar_wait(full + 8 * s, (it / TMA_STAGES) & 1);
            const unsigned xs = sbase + s * STAGE + cg * 64 * 128;
            const unsigned as = sbase + s * STAGE + XBYTES;
            wg_stage(acc, xs, as, kc > 0);
            // The group before this one has read its stage: free it.
            if (kc + 1 < KT) {
                wg_wait1();
                if (kc > 0 && lane == 0) mbar_arrive(empty + 8 * ((it - 1) % TMA_STAGES));
            } else {
                wg_wait0();
                if (lane == 0) {
                    if (kc > 0) mbar_arrive(empty + 8 * ((it - 1) % TMA_STAGES));
                    mbar_arrive(empty + 8 * s);
                }
            }
        }
        tile_argmin(acc, anorm, tile, lane, best, bidx);
    }
#pragma unroll
    for (int h = 0; h < 2; h++) row_min(best[h], bidx[h], rowkey, cg * 64 + wq * 16 + (lane >> 2) + 8 * h, lane);
    asm volatile("bar.sync 1, 256;" ::: "memory");  // the consumers only: the producer may be gone
    for (int i = tid - 128; i < BM; i += 256) atomicMin(&keys[rowBase + i], rowkey[i]);
}
