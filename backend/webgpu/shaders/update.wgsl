// update: move each anchor toward the robust mean of its points and
// refresh its squared norm. One workgroup per anchor. With flags & MOVE
// off (SetAnchors, Assign) only the norm is computed.
//
//	if move && cnt[a] > 0 {
//		delta_j = rate * sum[a][j] / wsum[a]
//		scale = min(1, max_move / |delta|) when flags & CAPPED, else 1
//		a_j += scale * delta_j
//	}
//	anorm[a] = sum_j a_j^2

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(2) var<storage, read_write> A: array<f32>;
@group(0) @binding(3) var<storage, read_write> anorm: array<f32>;
@group(0) @binding(4) var<storage, read> stats: array<f32>;

var<workgroup> red: array<f32, WG>;

fn total(t: u32, v: f32) -> f32 {
    red[t] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if (t < s) {
            red[t] += red[t + s];
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let a = flat(wid, nw);
    if (a >= P.m) {
        return;
    }
    let md = P.m * P.dp;
    let base = a * P.dp;
    let cnt = bitcast<u32>(stats[2u * md + P.m + a]);
    let ws = stats[2u * md + a];
    let mv = (P.flags & MOVE) != 0u && cnt > 0u;
    var n2 = 0.0;
    if (mv) {
        for (var j = t; j < P.d; j += WG) {
            let dl = P.rate * stats[base + j] / ws;
            n2 += dl * dl;
        }
    }
    let norm = sqrt(total(t, n2));
    var scale = 1.0;
    if ((P.flags & CAPPED) != 0u && norm > P.max_move) {
        scale = P.max_move / norm;
    }
    var s = 0.0;
    for (var j = t; j < P.d; j += WG) {
        var v = A[base + j];
        if (mv) {
            v += scale * (P.rate * stats[base + j] / ws);
            A[base + j] = v;
        }
        s += v * v;
    }
    let an = total(t, s);
    if (t == 0u) {
        anorm[a] = an;
    }
}
