// reduce: per anchor, over its points in this chunk (members), added to
// the statistics of earlier chunks. One workgroup per anchor; no float
// atomics (WGSL has none): each anchor's sums belong to one workgroup.
//
//	for each member i of anchor a, r = x_i - a (float32), w = Huber weight:
//		sum[a][j] += w * r_j;  sq[a][j] += r_j^2;  wsum[a] += w;  cnt[a]++
//	counts[a] = 0 (ready for the next chunk's assign)
//
// w = min(1, tau / sqrt(dist_i)) when flags & HUBER, else 1. Threads: 4
// groups of 64 lanes; lane l takes words l, l+64, ... (two dimensions each,
// so a row is read as consecutive words), group g every 4th member.

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(2) var<storage, read> X: array<u32>;
@group(0) @binding(3) var<storage, read> dist: array<f32>;
@group(0) @binding(4) var<storage, read> members: array<u32>;
@group(0) @binding(5) var<storage, read> start: array<u32>;
@group(0) @binding(6) var<storage, read> A: array<vec2<f32>>;
@group(0) @binding(7) var<storage, read_write> stats: array<f32>;
@group(0) @binding(8) var<storage, read_write> counts: array<atomic<u32>>;

const LANES: u32 = 64u;
const GROUPS: u32 = WG / LANES;

var<workgroup> red: array<vec4<f32>, WG>;
var<workgroup> redw: array<f32, WG>;

fn weight(dd: f32) -> f32 {
    if ((P.flags & HUBER) != 0u) {
        let r = sqrt(dd);
        if (r > P.tau) {
            return P.tau / r;
        }
    }
    return 1.0;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let a = flat(wid, nw);
    if (a >= P.m) {
        return;
    }
    let lo = start[a];
    let hi = start[a + 1u];
    let g = t / LANES;
    let lane = t % LANES;
    let words = (P.d + 1u) / 2u;
    let md = P.m * P.dp;
    let wsumOff = 2u * md;
    let cntOff = 2u * md + P.m;
    for (var w0 = 0u; w0 < words; w0 += LANES) {
        let w = w0 + lane;
        var s = vec2<f32>(0.0);
        var q = vec2<f32>(0.0);
        var ws = 0.0;
        if (w < words) {
            let av = A[a * P.dw + w];
            for (var k = lo + g; k < hi; k += GROUPS) {
                let i = members[k];
                let wt = weight(dist[i]);
                let r = unpack2x16float(X[i * P.dw + w]) - av;
                s += wt * r;
                q += r * r;
                ws += wt;
            }
        }
        red[t] = vec4<f32>(s, q);
        redw[t] = ws;
        workgroupBarrier();
        if (g == 0u && w < words) {
            let v = (red[lane] + red[lane + LANES]) + (red[lane + 2u * LANES] + red[lane + 3u * LANES]);
            let j = a * P.dp + 2u * w;
            stats[j] += v.x;
            stats[j + 1u] += v.y;
            stats[md + j] += v.z;
            stats[md + j + 1u] += v.w;
            if (w == 0u) {
                stats[wsumOff + a] += (redw[0] + redw[LANES]) + (redw[2u * LANES] + redw[3u * LANES]);
                stats[cntOff + a] = bitcast<f32>(bitcast<u32>(stats[cntOff + a]) + (hi - lo));
            }
        }
        workgroupBarrier();
    }
    if (t == 0u) {
        atomicStore(&counts[a], 0u);
    }
}
