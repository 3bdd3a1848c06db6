// topk: each query's keep best candidates, sorted. One workgroup per
// query.
//
//	items := the round's candidates cand[i*slots + keep ..], as many as
//	         the query has offsets in the window (and, in a later round,
//	         the keep best of the rounds before, cand[i*slots ..])
//	best := the keep least (key, entry) of items, sorted   // threshold
//	out[i*keep + j] = best[j].entry, out[dist_off + i*keep + j] = its distance
//	    (entry NONE, i.e. -1, and +Inf past len(best))
//	when another round follows: cand[i*slots + j] = best[j]
//
// The chosen items are gathered, then sorted by a bitonic
// network (every comparator ascending, so that items past the count act
// as +Inf without being stored): in workgroup memory when they fit
// SORTLEN, else in place in out, with storage barriers.

@group(0) @binding(0) var<uniform> P: SP;
@group(0) @binding(1) var<storage, read> probes: array<u32>;
@group(0) @binding(2) var<storage, read_write> cand: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;

var<private> ibase: u32;
var<workgroup> sk: array<vec2<u32>, SORTLEN>;
var<workgroup> wg_count: u32;
var<workgroup> gathered: atomic<u32>;

fn item(x: u32) -> vec2<u32> {
    return cand[ibase + x];
}

fn less(a: vec2<u32>, b: vec2<u32>) -> bool {
    return a.x < b.x || (a.x == b.x && a.y < b.y);
}

// The comparator (lo, hi) of stage k, step h for pair x of the network
// on p2 items: the first step of a stage compares mirrored positions.
fn pair(x: u32, k: u32, h: u32) -> vec2<u32> {
    if (h == k / 2u) {
        let blk = x / h;
        let off = x % h;
        return vec2<u32>(blk * k + off, blk * k + k - 1u - off);
    }
    let lo = (x / h) * 2u * h + x % h;
    return vec2<u32>(lo, lo + h);
}

fn sort_shared(t: u32, n: u32, p2: u32) {
    for (var k = 2u; k <= p2; k = k * 2u) {
        for (var h = k / 2u; h > 0u; h = h / 2u) {
            for (var x = t; x < p2 / 2u; x += WG) {
                let c = pair(x, k, h);
                if (c.y < n) {
                    let a = sk[c.x];
                    let b = sk[c.y];
                    if (less(b, a)) {
                        sk[c.x] = b;
                        sk[c.y] = a;
                    }
                }
            }
            workgroupBarrier();
        }
    }
}

// sort_global sorts n (key, entry) pairs whose keys are at out[kb ..]
// and entries at out[eb ..].
fn sort_global(t: u32, n: u32, p2: u32, kb: u32, eb: u32) {
    for (var k = 2u; k <= p2; k = k * 2u) {
        for (var h = k / 2u; h > 0u; h = h / 2u) {
            for (var x = t; x < p2 / 2u; x += WG) {
                let c = pair(x, k, h);
                if (c.y < n) {
                    let a = vec2<u32>(out[kb + c.x], out[eb + c.x]);
                    let b = vec2<u32>(out[kb + c.y], out[eb + c.y]);
                    if (less(b, a)) {
                        out[kb + c.x] = b.x;
                        out[eb + c.x] = b.y;
                        out[kb + c.y] = a.x;
                        out[eb + c.y] = a.y;
                    }
                }
            }
            storageBarrier();
        }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = flat(wid, nw);
    if (i >= P.nb) {
        return;
    }
    let front = (P.flags & F_FRONT) != 0u;
    if (t == 0u) {
        // The query's offsets in this round's window; NONE where an
        // earlier round saw them all (its results stand).
        let total = probes[P.co_off + i * (P.nprobe + 1u) + P.nprobe];
        if (front && total <= P.o0) {
            wg_count = NONE;
        } else {
            wg_count = min(total - min(total, P.o0), P.win);
        }
    }
    let tw = workgroupUniformLoad(&wg_count);
    if (tw == NONE) {
        return;
    }
    let keep = P.keep;
    var n = tw;
    ibase = i * P.slots + keep;
    if (front) {
        n = tw + keep;
        ibase = i * P.slots;
    }
    let take = min(n, keep);
    var th = vec2<u32>(NONE, NONE);
    if (n > keep) {
        th = threshold(t, n, keep);
    }
    var p2 = 1u;
    while (p2 < take) {
        p2 = p2 * 2u;
    }
    let in_wg = p2 <= SORTLEN;
    let eb = i * keep;
    let kb = P.dist_off + i * keep;
    // Gathered in any order (neighbouring invocations read neighbouring
    // items): the sort's order is total, so its result is not.
    if (t == 0u) {
        atomicStore(&gathered, 0u);
    }
    workgroupBarrier();
    for (var x = t; x < n; x += WG) {
        let it = item(x);
        if (taken(it, th)) {
            let pos = atomicAdd(&gathered, 1u);
            if (in_wg) {
                sk[pos] = it;
            } else {
                out[kb + pos] = it.x;
                out[eb + pos] = it.y;
            }
        }
    }
    if (in_wg) {
        workgroupBarrier();
        sort_shared(t, take, p2);
    } else {
        storageBarrier();
        sort_global(t, take, p2, kb, eb);
    }
    // Every read of the items is done before any invocation overwrites
    // the region's first slots.
    storageBarrier();
    let more = (P.flags & F_MORE) != 0u;
    for (var j = t; j < keep; j += WG) {
        var it = vec2<u32>(NONE, NONE);
        if (j < take) {
            if (in_wg) {
                it = sk[j];
            } else {
                it = vec2<u32>(out[kb + j], out[eb + j]);
            }
        }
        if (more) {
            cand[i * P.slots + j] = it;
        }
        out[eb + j] = it.y;
        if (j < take) {
            out[kb + j] = bitcast<u32>(unsortable(it.x));
        } else {
            out[kb + j] = INF_BITS;
        }
    }
}
