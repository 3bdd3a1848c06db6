// assign: every point of a chunk to its nearest anchor, tiled through
// workgroup memory, with everything the reduce needs gathered on the way.
//
//	for i := range rows {
//		best := argmin over a < m of anorm[a] - 2 x_i.a  (ties: lowest a)
//		dist[i] = max(that minimum + xnorm[i], 0)
//		if asg[i] != best+1 { changed++ }; asg[i] = best+1  (0: no anchor yet)
//		counts[best]++
//	}
//	energy partial of the workgroup = sum of its dist
//
// A workgroup takes TM points and walks all anchors TN at a time; each
// invocation holds RM points x RN anchors of dot products in registers,
// accumulated in float32 over the dimension BK values at a time (points
// float16 -> float32 exactly, anchors float32), and keeps a running
// argmin of its RM points over the anchors it sees. At the end the TX
// invocations that share a point combine their candidates. Lines that
// hold only a marker (two slashes, an at sign and a name) are filled in by
// assign.go, unrolled for the tile.

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> C: Chunk;
@group(0) @binding(2) var<storage, read> X: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> xnorm: array<f32>;
@group(0) @binding(4) var<storage, read> A: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> anorm: array<f32>;
@group(0) @binding(6) var<storage, read_write> asg: array<u32>;
@group(0) @binding(7) var<storage, read_write> dist: array<f32>;
@group(0) @binding(8) var<storage, read_write> counts: array<atomic<u32>>;
@group(0) @binding(9) var<storage, read_write> scal: array<atomic<u32>>;

// xs[k][p] and as_[k][a], four to a vec4. After the tile loop they hold
// the candidates (values in xs, indices as float bits in as_) and then the
// energy tree: TX <= BK and TM <= TN make them large enough.
var<workgroup> xs: array<vec4<f32>, XS_LEN>;
var<workgroup> as_: array<vec4<f32>, AS_LEN>;

const NONE: u32 = 0xffffffffu;

@compute @workgroup_size(ATHREADS)
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let g = flat(wid, nw);
    let row0 = g * TM;
    if (row0 >= C.rows) {
        return;
    }
    let tx = t % TX;
    let ty = t / TX;
    let xrow = P.dp / 8u; // vec4<u32> per point row
    let arow = P.dp / 4u; // vec4<f32> per anchor row

    var bv: array<f32, RM>;
    var bi: array<u32, RM>;
    //@BEST_INIT
    //@ACC_DECL
    let tiles = (P.m + TN - 1u) / TN;
    for (var at = 0u; at < tiles; at++) {
        //@ACC_ZERO
        for (var k0 = 0u; k0 < P.dp; k0 += BK) {
            for (var l = t; l < TM * BK / 8u; l += ATHREADS) {
                let p = l / (BK / 8u);
                let part = l % (BK / 8u);
                let v = X[(row0 + p) * xrow + k0 / 8u + part];
                for (var c = 0u; c < 4u; c++) {
                    let h = unpack2x16float(v[c]);
                    let k = part * 8u + 2u * c;
                    xs[k * (TM / 4u) + p / 4u][p % 4u] = h.x;
                    xs[(k + 1u) * (TM / 4u) + p / 4u][p % 4u] = h.y;
                }
            }
            for (var l = t; l < TN * BK / 4u; l += ATHREADS) {
                let a = l / (BK / 4u);
                let part = l % (BK / 4u);
                let v = A[(at * TN + a) * arow + k0 / 4u + part];
                for (var c = 0u; c < 4u; c++) {
                    as_[(part * 4u + c) * (TN / 4u) + a / 4u][a % 4u] = v[c];
                }
            }
            workgroupBarrier();
            for (var k = 0u; k < BK; k++) {
                //@FMA
            }
            workgroupBarrier();
        }
        //@ARGMIN
    }

    // Candidates of point p from invocation column tx at slot p*TX + tx.
    //@CANDIDATES
    workgroupBarrier();
    var e = 0.0;
    var changed = 0u;
    if (t < TM) {
        var best = NONE;
        var bval = 0.0;
        for (var c = 0u; c < TX; c++) {
            let s = t * TX + c;
            let v = xs[s / 4u][s % 4u];
            let a = bitcast<u32>(as_[s / 4u][s % 4u]);
            if (a != NONE && (best == NONE || v < bval || (v == bval && a < best))) {
                bval = v;
                best = a;
            }
        }
        let row = row0 + t;
        if (row < C.rows) {
            e = max(bval + xnorm[row], 0.0);
            dist[row] = e;
            if (asg[row] != best + 1u) {
                changed = 1u;
                asg[row] = best + 1u;
            }
            atomicAdd(&counts[best], 1u);
        }
    }
    workgroupBarrier();
    // Energy and changed count of the workgroup: trees over its TM points
    // in xs and as_ (counts as floats: exact, TM < 2^24).
    if (t < TM) {
        xs[t / 4u][t % 4u] = e;
        as_[t / 4u][t % 4u] = f32(changed);
    }
    workgroupBarrier();
    for (var s = TM / 2u; s > 0u; s = s / 2u) {
        if (t < s) {
            xs[t / 4u][t % 4u] = xs[t / 4u][t % 4u] + xs[(t + s) / 4u][(t + s) % 4u];
            as_[t / 4u][t % 4u] = as_[t / 4u][t % 4u] + as_[(t + s) / 4u][(t + s) % 4u];
        }
        workgroupBarrier();
    }
    if (t == 0u) {
        atomicAdd(&scal[SC_CHANGED], u32(as_[0].x));
        atomicStore(&scal[SC_PARTS + C.base / TM + g], bitcast<u32>(xs[0].x));
    }
}
