// lut: the pq code's lookup tables (device.CodeData), ntab a query, the
// kinds first .. first+ntab-1 (0: the L2 form's, 1: the dot form's).
// Workgroup g is query i = g / ntab, table tb = g % ntab; invocation k
// computes centroid k's value in every subspace s (dimensions lo .. hi-1,
// lo = s*d/nsub):
//
//	x := q~ - mean (kind 0) or q~ (kind 1)
//	lut[(i*ntab + tb)*nsub*256 + s*256 + k] = sum_j x[lo+j] * cb[256*lo + k*(hi-lo) + j]
//
// in order of j, each product rounded on its own, as the CPU's scorer
// sums it.

@group(0) @binding(0) var<uniform> P: SP;
@group(0) @binding(1) var<storage, read> qbuf: array<f32>;
@group(0) @binding(2) var<storage, read> cbuf: array<f32>; // the centroids (256*d), then mean (d)
@group(0) @binding(3) var<storage, read_write> lut: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) k: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let g = flat(wid, nw);
    let nsub = P.pq & 0xffffu;
    let ntab = (P.pq >> 16u) & 0xffu;
    let first = P.pq >> 24u;
    let i = g / ntab;
    if (i >= P.nb) {
        return;
    }
    let tb = g % ntab;
    let kind = first + tb;
    let d = P.d;
    let base = (i * ntab + tb) * nsub * 256u;
    let z = rounding_zero();
    for (var s = 0u; s < nsub; s++) {
        let lo = s * d / nsub;
        let w = (s + 1u) * d / nsub - lo;
        let c0 = 256u * lo + k * w;
        var p = 0.0;
        for (var j = 0u; j < w; j++) {
            var x = qbuf[i * d + lo + j];
            if (kind == 0u) {
                x = x - cbuf[256u * d + lo + j];
            }
            p = p + rounded(cbuf[c0 + j] * x, z);
        }
        lut[base + s * 256u + k] = p;
    }
}
