// rotate: each query of the batch in place, q~ = P q, and its squared
// length. One workgroup per query, the query in workgroup memory.
//
//	qq[i] = sum_j q_j^2
//	for r := range rounds {
//		q[j] *= signs[r][j]                          // every j
//		fwht(q[:rotp]); if rotp != d { fwht(q[d-rotp:]) }
//	}
//
// fwht is devicetest.Rotate's: butterflies (a+b, a-b) with the half
// width h = 1, 2, 4, ..., then every value times rot_scale: the same
// float32 operations on every value, so the result is bit-exact.

@group(0) @binding(0) var<uniform> P: SP;
@group(0) @binding(1) var<storage, read_write> qbuf: array<f32>;
@group(0) @binding(2) var<storage, read> signs: array<f32>;

var<workgroup> x: array<f32, DLEN>;
var<workgroup> red: array<f32, WG>;

fn fwht(t: u32, off: u32) {
    let p = P.rotp;
    for (var h = 1u; h < p; h = h * 2u) {
        for (var k = t; k < p / 2u; k += WG) {
            let i = off + (k / h) * 2u * h + k % h;
            let a = x[i];
            let b = x[i + h];
            x[i] = a + b;
            x[i + h] = a - b;
        }
        workgroupBarrier();
    }
    for (var j = t; j < p; j += WG) {
        x[off + j] = x[off + j] * P.rot_scale;
    }
    workgroupBarrier();
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = flat(wid, nw);
    if (i >= P.nb) {
        return;
    }
    let d = P.d;
    var s = 0.0;
    for (var j = t; j < d; j += WG) {
        let v = qbuf[i * d + j];
        x[j] = v;
        s = s + v * v;
    }
    red[t] = s;
    workgroupBarrier();
    for (var st = WG / 2u; st > 0u; st = st / 2u) {
        if (t < st) {
            red[t] = red[t] + red[t + st];
        }
        workgroupBarrier();
    }
    if (t == 0u) {
        qbuf[P.qq_off + i] = red[0];
    }
    for (var r = 0u; r < P.rounds; r++) {
        for (var j = t; j < d; j += WG) {
            x[j] = x[j] * signs[r * d + j];
        }
        workgroupBarrier();
        fwht(t, 0u);
        if (P.rotp != d) {
            fwht(t, d - P.rotp);
        }
    }
    for (var j = t; j < d; j += WG) {
        qbuf[i * d + j] = x[j];
    }
}
