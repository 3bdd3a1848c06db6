// The selection shared by probe and topk: of n items (key, id), each
// from the kernel's own fn item(x: u32) -> vec2<u32>, the need least in
// the order of (key, id). ids are distinct, so exactly need items are
// taken. A radix select: up to four passes of 8-bit digits over the key,
// then, only where the last key value is tied beyond need, up to four
// over the id; each pass counts the items that share the digits fixed so
// far into a 256-bin histogram (an invocation per bin, so WG is 256).

var<workgroup> hist: array<atomic<u32>, 256>;
var<workgroup> pick: vec4<u32>;         // digit, items still wanted, items at the digit
var<workgroup> scan_sh: array<u32, WG>; // wg_scan
var<workgroup> scan_total: u32;

// threshold returns (K, E): an item is taken iff taken(item, (K, E)).
// Called by every invocation, in uniform control flow, with need < n.
fn threshold(t: u32, n: u32, need: u32) -> vec2<u32> {
    var kpre = 0u;
    var kmask = 0u;
    var ipre = 0u;
    var imask = 0u;
    var rem = need;
    for (var ps = 0u; ps < 8u; ps++) {
        let on_id = ps >= 4u;
        let shift = 24u - 8u * (ps % 4u);
        atomicStore(&hist[t], 0u);
        workgroupBarrier();
        for (var x = t; x < n; x += WG) {
            let it = item(x);
            if (!on_id) {
                if ((it.x & kmask) == kpre) {
                    atomicAdd(&hist[(it.x >> shift) & 255u], 1u);
                }
            } else if (it.x == kpre && (it.y & imask) == ipre) {
                atomicAdd(&hist[(it.y >> shift) & 255u], 1u);
            }
        }
        workgroupBarrier();
        if (t == 0u) {
            var below = 0u;
            var dg = 0u;
            loop {
                let h = atomicLoad(&hist[dg]);
                if (below + h >= rem || dg == 255u) {
                    pick = vec4<u32>(dg, rem - below, h, 0u);
                    break;
                }
                below += h;
                dg++;
            }
        }
        let pk = workgroupUniformLoad(&pick);
        rem = pk.y;
        if (!on_id) {
            kpre |= pk.x << shift;
            kmask |= 255u << shift;
            if (pk.z == rem) {
                // Every item with these digits is taken.
                return vec2<u32>(kpre | ~kmask, NONE);
            }
        } else {
            ipre |= pk.x << shift;
            imask |= 255u << shift;
            if (pk.z == rem) {
                return vec2<u32>(kpre, ipre | ~imask);
            }
        }
    }
    return vec2<u32>(kpre, ipre);
}

fn taken(it: vec2<u32>, th: vec2<u32>) -> bool {
    return it.x < th.x || (it.x == th.x && it.y <= th.y);
}

// wg_scan returns the exclusive prefix sum of v over the invocations and
// the total. Called by every invocation, in uniform control flow.
fn wg_scan(t: u32, v: u32) -> vec2<u32> {
    workgroupBarrier();
    scan_sh[t] = v;
    workgroupBarrier();
    for (var off = 1u; off < WG; off = off * 2u) {
        var u = 0u;
        if (t >= off) {
            u = scan_sh[t - off];
        }
        workgroupBarrier();
        scan_sh[t] += u;
        workgroupBarrier();
    }
    let incl = scan_sh[t];
    if (t == WG - 1u) {
        scan_total = incl;
    }
    return vec2<u32>(incl - v, workgroupUniformLoad(&scan_total));
}
