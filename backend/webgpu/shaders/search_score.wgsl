// score: the estimate of every entry of every probed list, for one part
// of the index and one round of candidates. Workgroup g is slice
// g % slices of (query i, probed list p) = g / slices.
//
//	a := probes[i*nprobe + p]; co := its candidate offset (probe)
//	q' := q~ - anchors[a] (the L2 form) or q~ (the dot form), zeros past d
//	qsum := (sum q') * L / 2; sq := sum q'^2
//	for each entry e of list a in this part whose offset o = co + e - start(a)
//	    is in this round's window o0 .. o0+win-1:
//		qu := sum_j q'_j * level_j(e) - qsum        // float32, in order of j
//		n16, b16 := the entry's scalars; beta := b16 * sqrt_scale[a]
//		score := beta*qu (dot form), else sq + n16*scale[a] - 2*beta*qu
//		cand[i*slots + keep + o - o0] = (sortable(mul*score + bias), e)
//
// with mul and bias as device.IndexData says: ip with IPCodes takes the
// L2 form, mul 0.5, bias -(qq + norm[a])/2 where qq - 2qa + norm[a] < qq;
// else ip the dot form, mul -1, bias -qa; else the L2 form, mul 1, bias 0.
// q' sits in workgroup memory (read by every invocation at once); each
// invocation scores entries e = first + slice*SWG + t, then every
// slices*SWG, so that neighbouring invocations read neighbouring words of
// the tiled layout.

@group(0) @binding(0) var<uniform> P: SP;
@group(0) @binding(1) var<uniform> C: Part;
@group(0) @binding(2) var<storage, read> W: array<u32>;
@group(0) @binding(3) var<storage, read> qbuf: array<f32>;
@group(0) @binding(4) var<storage, read> coarse: array<f32>;
@group(0) @binding(5) var<storage, read> probes: array<u32>;
@group(0) @binding(6) var<storage, read> lists: array<vec4<u32>>;
@group(0) @binding(7) var<storage, read> anchors: array<f32>;
@group(0) @binding(8) var<storage, read_write> cand: array<vec2<u32>>;

var<workgroup> qs: array<f32, QLEN>;
var<workgroup> rsum: array<f32, SWG>;
var<workgroup> rsq: array<f32, SWG>;
var<workgroup> job: vec4<u32>; // first entry, end, its slot, live

@compute @workgroup_size(SWG)
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let g = flat(wid, nw);
    let sl = g % P.slices;
    let ip = g / P.slices;
    let i = ip / P.nprobe;
    if (i >= P.nb) {
        return;
    }
    let a = probes[ip];
    let start = lists[a].w;
    let size = lists[a + 1u].w - start;
    let co = probes[P.co_off + i * (P.nprobe + 1u) + ip % P.nprobe];
    if (t == 0u) {
        // The list's offsets co .. co+size-1, cut to the round's window,
        // then its entries cut to this part.
        let olo = max(co, P.o0);
        let ohi = min(co + size, P.o0 + P.win);
        var e_lo = 0u;
        var e_hi = 0u;
        if (olo < ohi) {
            e_lo = max(start + (olo - co), C.e0);
            e_hi = min(start + (ohi - co), C.e1);
        }
        job = vec4<u32>(e_lo, e_hi, 0u, u32(e_lo < e_hi));
    }
    let jb = workgroupUniformLoad(&job);
    if (jb.w == 0u) {
        return;
    }
    let d = P.d;
    let qq = qbuf[P.qq_off + i];
    let qa = coarse[P.qa_off + i * P.lists + a];
    let la = lists[a];
    let norm = bitcast<f32>(la.x);
    var dot_form = false;
    var mul = 1.0;
    var bias = 0.0;
    if ((P.flags & F_IPCODES) != 0u && qq - 2.0 * qa + norm < qq) {
        mul = 0.5;
        bias = -(qq + norm) / 2.0;
    } else if ((P.flags & F_IP) != 0u) {
        dot_form = true;
        mul = -1.0;
        bias = -qa;
    }
    var s = 0.0;
    var s2 = 0.0;
    for (var j = t; j < QLEN; j += SWG) {
        var v = 0.0;
        if (j < d) {
            v = qbuf[i * d + j];
            if (!dot_form) {
                v = v - anchors[a * d + j];
            }
        }
        qs[j] = v;
        s = s + v;
        s2 = s2 + v * v;
    }
    rsum[t] = s;
    rsq[t] = s2;
    workgroupBarrier();
    for (var st = SWG / 2u; st > 0u; st = st / 2u) {
        if (t < st) {
            rsum[t] = rsum[t] + rsum[t + st];
            rsq[t] = rsq[t] + rsq[t + st];
        }
        workgroupBarrier();
    }
    let qsum = rsum[0] * P.levels / 2.0;
    let sq = rsq[0];
    let scale = bitcast<f32>(la.y);
    let sqrt_scale = bitcast<f32>(la.z);
    let words = P.words;
    let slot0 = i * P.slots + P.keep + co - P.o0; // slot of offset o is slot0 + o - co
    for (var e = jb.x + sl * SWG + t; e < jb.y; e += P.slices * SWG) {
        let le = e - C.e0;
        let tb = (le / TILE) * words * TILE + le % TILE;
        var acc = 0.0;
        for (var w = 0u; w < words; w++) {
            let word = W[tb + w * TILE];
            let j0 = w * PER;
            for (var k = 0u; k < PER; k++) {
                acc = acc + qs[j0 + k] * f32((word >> (k * BITS)) & MASK);
            }
        }
        let qu = acc - qsum;
        let h = unpack2x16float(W[C.sc_off + le]); // x: N16, y: B16
        let beta = h.y * sqrt_scale;
        var score = beta * qu;
        if (!dot_form) {
            let nrm = h.x * scale;
            score = sq + nrm - 2.0 * beta * qu;
        }
        cand[slot0 + (e - start)] = vec2<u32>(sortable(mul * score + bias), e);
    }
}
