// Shared by the search kernels (prepended by SearchSource after the
// constants). The search is device.IndexData's; backend/webgpu search.go
// describes the buffers.

// SP are one submission's values (a batch of queries, one round of its
// candidates), one uniform buffer for every search kernel. Mirrored by
// searchParams in backend/webgpu/search.go.
struct SP {
    nb: u32,        // queries in the batch
    d: u32,         // dimension
    lists: u32,     // lists of the index
    nprobe: u32,    // lists probed per query (<= lists)
    keep: u32,      // results per query
    win: u32,       // candidate slots of a query per round (W)
    o0: u32,        // the round's first candidate offset: it scores offsets o0 .. o0+W-1
    slots: u32,     // keep + W: the stride of a query's candidate region
    words: u32,     // level words per entry
    flags: u32,     // F_IP, F_IPCODES, F_FRONT, F_MORE
    slices: u32,    // score workgroups per (query, probed list)
    rounds: u32,    // rotation rounds
    rotp: u32,      // the rotation's Walsh-Hadamard length
    rot_scale: f32, // its scale
    levels: f32,    // L = 2^bits - 1
    qq_off: u32,    // qbuf: |q|^2 of query i at qq_off + i, after the rotated queries
    qa_off: u32,    // coarse: qa of (i, a) at qa_off + i*lists + a, after the probe distances
    co_off: u32,    // probes: candidate offsets of query i at co_off + i*(nprobe+1), after the probed lists
    dist_off: u32,  // out: distances at dist_off + i*keep, after the entries
    pq: u32,        // the pq code: subspaces | tables a query << 16 | the first table's kind << 24
}

// Part is one storage binding's worth of the index: entries e0 .. e1-1
// (e0 a multiple of TILE), their level words in the tiled layout from
// word 0, their scalars from word sc_off.
struct Part {
    e0: u32,
    e1: u32,
    sc_off: u32,
    _pad: u32,
}

const NONE: u32 = 0xffffffffu;
const INF_BITS: u32 = 0x7f800000u;

// sortable maps a float's bits to a u32 whose unsigned order is the
// float's order (-0 just below +0); unsortable undoes it.
fn sortable(f: f32) -> u32 {
    let b = bitcast<u32>(f);
    if ((b & 0x80000000u) != 0u) {
        return ~b;
    }
    return b | 0x80000000u;
}

fn unsortable(k: u32) -> f32 {
    if ((k & 0x80000000u) != 0u) {
        return bitcast<f32>(k & 0x7fffffffu);
    }
    return bitcast<f32>(~k);
}

// flat is the workgroup index of a grid folded into x and y.
fn flat(wid: vec3<u32>, nw: vec3<u32>) -> u32 {
    return wid.x + wid.y * nw.x;
}

// rounded is x, rounded to float32 where it stands: z is zero at run time
// (rounding_zero), which the compiler cannot know, so a product passed
// through it is not fused into a multiply-add with the sum it joins
// (NVIDIA's Vulkan compiler fuses them; one rounding in place of the
// CPU's two moves the pq estimate, whose terms cancel, beyond float
// rounding of the distance: device.CodeData).
fn rounded(x: f32, z: u32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) | z);
}

// rounding_zero is rounded's z: the top bit of SP.pq, always clear (the
// first table's kind is 0 or 1).
fn rounding_zero() -> u32 {
    return P.pq >> 31u;
}
