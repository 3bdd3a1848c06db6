// score_sq8: score (search_score.wgsl) for the sq8 code (device.CodeData):
// the same workgroups, windows and parts; with the list's ranges lo and
// step (ranges[a*2d ..], then d values on) and byte j of entry e its
// level l_j,
//
//	L2 form:  score = sum_j ((q_j - anchors[a*d+j] - lo_j) - step_j*l_j)^2
//	dot form: score = sum_j q_j*lo_j + sum_j (q_j*step_j)*l_j
//
// the per-dimension terms in workgroup memory (zeros past d, where the
// levels are zero too).

@group(0) @binding(0) var<uniform> P: SP;
@group(0) @binding(1) var<uniform> C: Part;
@group(0) @binding(2) var<storage, read> W: array<u32>;
@group(0) @binding(3) var<storage, read> qbuf: array<f32>;
@group(0) @binding(4) var<storage, read> coarse: array<f32>;
@group(0) @binding(5) var<storage, read> probes: array<u32>;
@group(0) @binding(6) var<storage, read> lists: array<vec4<u32>>;
@group(0) @binding(7) var<storage, read> anchors: array<f32>;
@group(0) @binding(8) var<storage, read_write> cand: array<vec2<u32>>;
@group(0) @binding(9) var<storage, read> ranges: array<f32>;

var<workgroup> us: array<f32, QLEN>;
var<workgroup> ss: array<f32, QLEN>;
var<workgroup> rsum: array<f32, SWG>;
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
    let norm = bitcast<f32>(lists[a].x);
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
    var b = 0.0;
    for (var j = t; j < QLEN; j += SWG) {
        var u = 0.0;
        var sp = 0.0;
        if (j < d) {
            let q = qbuf[i * d + j];
            let lo = ranges[a * 2u * d + j];
            sp = ranges[a * 2u * d + d + j];
            if (dot_form) {
                b = b + q * lo;
                u = q * sp;
            } else {
                u = q - anchors[a * d + j] - lo;
            }
        }
        us[j] = u;
        ss[j] = sp;
    }
    rsum[t] = b;
    workgroupBarrier();
    for (var st = SWG / 2u; st > 0u; st = st / 2u) {
        if (t < st) {
            rsum[t] = rsum[t] + rsum[t + st];
        }
        workgroupBarrier();
    }
    let base = rsum[0];
    let words = P.words;
    let slot0 = i * P.slots + P.keep + co - P.o0;
    for (var e = jb.x + sl * SWG + t; e < jb.y; e += P.slices * SWG) {
        let le = e - C.e0;
        let tb = (le / TILE) * words * TILE + le % TILE;
        var acc = 0.0;
        for (var w = 0u; w < words; w++) {
            let word = W[tb + w * TILE];
            for (var k = 0u; k < 4u; k++) {
                let j = 4u * w + k;
                let l = f32((word >> (8u * k)) & 255u);
                if (dot_form) {
                    acc = acc + us[j] * l;
                } else {
                    let x = us[j] - ss[j] * l;
                    acc = acc + x * x;
                }
            }
        }
        var score = acc;
        if (dot_form) {
            score = base + acc;
        }
        cand[slot0 + (e - start)] = vec2<u32>(sortable(mul * score + bias), e);
    }
}
