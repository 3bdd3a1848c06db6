// Shared by every kernel (prepended by Source after the constants).

// Params are the per-Step values, one uniform buffer for all kernels.
struct Params {
    m: u32,        // anchors
    d: u32,        // dimension
    dp: u32,       // padded dimension (multiple of DimPad): row stride in values
    dw: u32,       // dp / 2: row stride of the points in u32 words
    tau: f32,      // Huber threshold (used when flags & HUBER)
    rate: f32,     // fraction of the way to the robust mean
    max_move: f32, // cap on the length of a move (used when flags & CAPPED)
    flags: u32,
    nparts: u32,   // energy partial sums written by the assign workgroups
    n: u32,        // points in all chunks
    _pad0: u32,
    _pad1: u32,
}

const MOVE: u32 = 1u;
const HUBER: u32 = 2u;
const CAPPED: u32 = 4u;

// Chunk describes one binding's worth of points, one uniform buffer each.
struct Chunk {
    rows: u32, // real points in the chunk
    base: u32, // index of its first point in the whole set (a multiple of RowPad)
    np: u32,   // rows padded to RowPad (the buffer's rows)
    _pad: u32,
}

// Layout of the scalars buffer (u32 words): changed, energy (hi, lo as
// float bits), unused, then one energy partial per assign workgroup, in
// order of the points (slot base/TM + workgroup).
const SC_CHANGED: u32 = 0u;
const SC_EHI: u32 = 1u;
const SC_ELO: u32 = 2u;
const SC_PARTS: u32 = 4u;

// flat is the workgroup index of a grid folded into x and y.
fn flat(wid: vec3<u32>, nw: vec3<u32>) -> u32 {
    return wid.x + wid.y * nw.x;
}
