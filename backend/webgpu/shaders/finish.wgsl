// finish: the energy sum of all assign workgroups' partials, compensated
// (Kahan per invocation, then a tree of two-sums), as hi + lo. One
// workgroup.
//
//	scal[EHI], scal[ELO] = sum of the nparts partials

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> scal: array<atomic<u32>>;

var<workgroup> shi: array<f32, WG>;
var<workgroup> slo: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) t: u32) {
    var hi = 0.0;
    var c = 0.0;
    for (var i = t; i < P.nparts; i += WG) {
        let y = bitcast<f32>(atomicLoad(&scal[SC_PARTS + i])) - c;
        let s = hi + y;
        c = (s - hi) - y;
        hi = s;
    }
    shi[t] = hi;
    slo[t] = -c;
    workgroupBarrier();
    for (var st = WG / 2u; st > 0u; st = st / 2u) {
        if (t < st) {
            let a = shi[t];
            let b = shi[t + st];
            let s = a + b;
            let bb = s - a;
            let err = (a - (s - bb)) + (b - bb);
            shi[t] = s;
            slo[t] = slo[t] + slo[t + st] + err;
        }
        workgroupBarrier();
    }
    if (t == 0u) {
        atomicStore(&scal[SC_EHI], bitcast<u32>(shi[0]));
        atomicStore(&scal[SC_ELO], bitcast<u32>(slo[0]));
    }
}
