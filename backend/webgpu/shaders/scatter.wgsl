// scatter: the counting sort's placement. The points of anchor a end up in
// members[start[a] : start[a+1]] (chunk-local rows; their order within an
// anchor depends on the atomics' order).
//
//	for i := range rows { a := asg[i]-1; members[start[a]+counts[a]] = i; counts[a]++ }

@group(0) @binding(1) var<uniform> C: Chunk;
@group(0) @binding(2) var<storage, read> asg: array<u32>;
@group(0) @binding(3) var<storage, read> start: array<u32>;
@group(0) @binding(4) var<storage, read_write> counts: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read_write> members: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let row = flat(wid, nw) * WG + t;
    if (row >= C.rows) {
        return;
    }
    let a = asg[row] - 1u;
    members[start[a] + atomicAdd(&counts[a], 1u)] = row;
}
