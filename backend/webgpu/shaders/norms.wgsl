// norms: |x|^2 of every point row of a chunk (padding rows give 0), in
// float32, summed in order of the dimension. Run once per Load.
//
//	for row := range np { xnorm[row] = sum_j x[row][j]^2 }

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> C: Chunk;
@group(0) @binding(2) var<storage, read> X: array<u32>;
@group(0) @binding(3) var<storage, read_write> xnorm: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let row = flat(wid, nw) * WG + t;
    if (row >= C.np) {
        return;
    }
    var s = 0.0;
    for (var w = 0u; w < P.dw; w++) {
        let h = unpack2x16float(X[row * P.dw + w]);
        s += h.x * h.x;
        s += h.y * h.y;
    }
    xnorm[row] = s;
}
