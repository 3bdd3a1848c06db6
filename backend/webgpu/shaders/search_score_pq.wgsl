// score_pq: score (search_score.wgsl) for the pq code (device.CodeData):
// the same workgroups, windows and parts; for each entry e of list a,
//
//	t_r := sum of lut[tab + s*256 + byte s of e] over s = r mod 4, in order of s
//	ip := (t0 + t1) + (t2 + t3)         // tab: the table of the list's form
//	beta := B0 + B*BStep; c := C0 + C*CStep   // grids: lists[lists+1+a]
//	score := beta*ip (dot form), else |q~ - anchors[a]|^2 + c - 2*beta*ip
//
// B and C are bits 8-15 and 0-7 of the entry's scalar word; each product
// is rounded before it is added (rounded).

@group(0) @binding(0) var<uniform> P: SP;
@group(0) @binding(1) var<uniform> C: Part;
@group(0) @binding(2) var<storage, read> W: array<u32>;
@group(0) @binding(3) var<storage, read> qbuf: array<f32>;
@group(0) @binding(4) var<storage, read> coarse: array<f32>;
@group(0) @binding(5) var<storage, read> probes: array<u32>;
@group(0) @binding(6) var<storage, read> lists: array<vec4<u32>>;
@group(0) @binding(7) var<storage, read> anchors: array<f32>;
@group(0) @binding(8) var<storage, read_write> cand: array<vec2<u32>>;
@group(0) @binding(9) var<storage, read> lut: array<f32>;

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
    var s2 = 0.0;
    if (!dot_form) {
        for (var j = t; j < d; j += SWG) {
            let v = qbuf[i * d + j] - anchors[a * d + j];
            s2 = s2 + v * v;
        }
    }
    rsq[t] = s2;
    workgroupBarrier();
    for (var st = SWG / 2u; st > 0u; st = st / 2u) {
        if (t < st) {
            rsq[t] = rsq[t] + rsq[t + st];
        }
        workgroupBarrier();
    }
    let qqa = rsq[0];
    let gr = lists[P.lists + 1u + a];
    let b0 = bitcast<f32>(gr.x);
    let bstep = bitcast<f32>(gr.y);
    let c0 = bitcast<f32>(gr.z);
    let cstep = bitcast<f32>(gr.w);
    let nsub = P.pq & 0xffffu;
    let ntab = (P.pq >> 16u) & 0xffu;
    let first = P.pq >> 24u;
    var kind = 0u;
    if (dot_form) {
        kind = 1u;
    }
    let tab = (i * ntab + kind - first) * nsub * 256u;
    let words = P.words;
    let slot0 = i * P.slots + P.keep + co - P.o0;
    let z = rounding_zero();
    for (var e = jb.x + sl * SWG + t; e < jb.y; e += P.slices * SWG) {
        let le = e - C.e0;
        let tb = (le / TILE) * words * TILE + le % TILE;
        var t0 = 0.0;
        var t1 = 0.0;
        var t2 = 0.0;
        var t3 = 0.0;
        for (var w = 0u; w < words; w++) {
            let word = W[tb + w * TILE];
            let s = 4u * w;
            let at = tab + s * 256u;
            t0 = t0 + lut[at + (word & 255u)];
            if (s + 1u < nsub) {
                t1 = t1 + lut[at + 256u + ((word >> 8u) & 255u)];
            }
            if (s + 2u < nsub) {
                t2 = t2 + lut[at + 512u + ((word >> 16u) & 255u)];
            }
            if (s + 3u < nsub) {
                t3 = t3 + lut[at + 768u + (word >> 24u)];
            }
        }
        let ipq = (t0 + t1) + (t2 + t3);
        let sc = W[C.sc_off + le];
        let beta = b0 + rounded(f32((sc >> 8u) & 255u) * bstep, z);
        var score = beta * ipq;
        if (!dot_form) {
            let c = c0 + rounded(f32(sc & 255u) * cstep, z);
            score = qqa + c - rounded(2.0 * beta * ipq, z);
        }
        cand[slot0 + (e - start)] = vec2<u32>(sortable(mul * score + bias), e);
    }
}
