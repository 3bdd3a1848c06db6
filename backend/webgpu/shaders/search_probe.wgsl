// probe: the lists each query of the batch scans, and where their
// candidates go. One workgroup per query.
//
//	probed := the nprobe least (coarse[i*lists + a], a)  // ties: lower a
//	for p, a := range probed (in increasing a) {
//		probes[i*nprobe + p] = a
//		probes[co_off + i*(nprobe+1) + p] = sum of the sizes of probed[:p]
//	}
//	probes[co_off + i*(nprobe+1) + nprobe] = their total size
//
// The distances are compared as sortable u32 keys; the order inside the
// probed set does not change any result, and increasing a keeps it
// deterministic.

@group(0) @binding(0) var<uniform> P: SP;
@group(0) @binding(1) var<storage, read> coarse: array<f32>;
@group(0) @binding(2) var<storage, read> lists: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> probes: array<u32>;

var<private> qi: u32;

fn item(x: u32) -> vec2<u32> {
    return vec2<u32>(sortable(coarse[qi * P.lists + x]), x);
}

fn size(a: u32) -> u32 {
    return lists[a + 1u].w - lists[a].w;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = flat(wid, nw);
    if (i >= P.nb) {
        return;
    }
    qi = i;
    let n = P.lists;
    var th = vec2<u32>(NONE, NONE);
    if (P.nprobe < n) {
        th = threshold(t, n, P.nprobe);
    }
    // Invocation t takes lists lo .. hi-1, so that the probed ones come
    // out in increasing order.
    let per = (n + WG - 1u) / WG;
    let lo = min(t * per, n);
    let hi = min(lo + per, n);
    var c = 0u;
    var s = 0u;
    for (var a = lo; a < hi; a++) {
        if (taken(item(a), th)) {
            c++;
            s += size(a);
        }
    }
    let pc = wg_scan(t, c);
    let ps = wg_scan(t, s);
    var pos = pc.x;
    var off = ps.x;
    let co = P.co_off + i * (P.nprobe + 1u);
    for (var a = lo; a < hi; a++) {
        if (taken(item(a), th)) {
            probes[i * P.nprobe + pos] = a;
            probes[co + pos] = off;
            pos++;
            off += size(a);
        }
    }
    if (t == 0u) {
        probes[co + P.nprobe] = ps.y;
    }
}
