// coarse: every rotated query of the batch against every list's rotated
// anchor, a tiled matrix product.
//
//	for i < nb, a < lists {
//		qa := sum_j q~[i][j] * anchors[a][j]  // float32, in order of j
//		coarse[i*lists + a] = norms[a] - 2*qa  // -qa under ip
//		coarse[qa_off + i*lists + a] = qa
//	}
//
// A workgroup of 256 takes CQ queries x CA lists, CK dimensions at a
// time through workgroup memory (zeros past d: they add nothing); each
// invocation holds 2 queries x 4 lists of sums.

@group(0) @binding(0) var<uniform> P: SP;
@group(0) @binding(1) var<storage, read> qbuf: array<f32>;
@group(0) @binding(2) var<storage, read> anchors: array<f32>;
@group(0) @binding(3) var<storage, read> lists: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> coarse: array<f32>;

var<workgroup> qs: array<f32, 512>;  // CK * CQ: qs[k*CQ + q]
var<workgroup> as_: array<f32, 1024>; // CK * CA: as_[k*CA + a]

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let g = flat(wid, nw);
    let atiles = (P.lists + CA - 1u) / CA;
    let q0 = (g / atiles) * CQ;
    let a0 = (g % atiles) * CA;
    if (q0 >= P.nb) {
        return;
    }
    let d = P.d;
    let tx = t % 16u; // lists tx + 16c
    let ty = t / 16u; // queries ty + 16r
    var acc: array<f32, 8>;
    for (var c = 0u; c < 8u; c++) {
        acc[c] = 0.0;
    }
    for (var k0 = 0u; k0 < d; k0 += CK) {
        for (var l = t; l < CQ * CK; l += 256u) {
            let q = l / CK;
            let k = l % CK;
            var v = 0.0;
            if (q0 + q < P.nb && k0 + k < d) {
                v = qbuf[(q0 + q) * d + k0 + k];
            }
            qs[k * CQ + q] = v;
        }
        for (var l = t; l < CA * CK; l += 256u) {
            let a = l / CK;
            let k = l % CK;
            var v = 0.0;
            if (a0 + a < P.lists && k0 + k < d) {
                v = anchors[(a0 + a) * d + k0 + k];
            }
            as_[k * CA + a] = v;
        }
        workgroupBarrier();
        for (var k = 0u; k < CK; k++) {
            for (var r = 0u; r < 2u; r++) {
                let qv = qs[k * CQ + ty + 16u * r];
                for (var c = 0u; c < 4u; c++) {
                    acc[r * 4u + c] = acc[r * 4u + c] + qv * as_[k * CA + tx + 16u * c];
                }
            }
        }
        workgroupBarrier();
    }
    for (var r = 0u; r < 2u; r++) {
        let q = q0 + ty + 16u * r;
        for (var c = 0u; c < 4u; c++) {
            let a = a0 + tx + 16u * c;
            if (q < P.nb && a < P.lists) {
                let qa = acc[r * 4u + c];
                var dist = bitcast<f32>(lists[a].x) - 2.0 * qa;
                if ((P.flags & F_IP) != 0u) {
                    dist = -qa;
                }
                coarse[q * P.lists + a] = dist;
                coarse[P.qa_off + q * P.lists + a] = qa;
            }
        }
    }
}
