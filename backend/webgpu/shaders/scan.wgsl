// scan: the counting sort's offsets. One workgroup.
//
//	start[0] = 0; start[a+1] = start[a] + counts[a]; counts[a] = 0
//
// (counts is then the fill pointer of scatter.)

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(2) var<storage, read_write> counts: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read_write> start: array<u32>;

var<workgroup> sh: array<u32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) t: u32) {
    let per = (P.m + WG - 1u) / WG;
    let lo = min(t * per, P.m);
    let hi = min(lo + per, P.m);
    var s = 0u;
    for (var i = lo; i < hi; i++) {
        s += atomicLoad(&counts[i]);
    }
    sh[t] = s;
    workgroupBarrier();
    for (var off = 1u; off < WG; off = off * 2u) {
        var v = 0u;
        if (t >= off) {
            v = sh[t - off];
        }
        workgroupBarrier();
        sh[t] += v;
        workgroupBarrier();
    }
    var o = sh[t] - s;
    for (var i = lo; i < hi; i++) {
        let c = atomicLoad(&counts[i]);
        start[i] = o;
        o += c;
        atomicStore(&counts[i], 0u);
    }
    if (t == WG - 1u) {
        start[P.m] = sh[WG - 1u];
    }
}
