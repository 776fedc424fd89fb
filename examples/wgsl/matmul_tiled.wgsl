// Batched matmul out[s] = a[s] @ b[s] with 16x16 workgroup tiles in workgroup memory.
// a (batch, m, k), b (batch, k, n), out (batch, m, n): f32, row-major.
// Dispatch: (ceil(n / 16), ceil(m / 16), batch). The last tile of each dimension is
// partial (the workgroup tail): loads outside the matrices read 0, and only invocations
// inside the output write.

struct Dims {
  batch: u32,
  m: u32,
  k: u32,
  n: u32,
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> dims: Dims;

const TILE: u32 = 16u;
var<workgroup> ta: array<array<f32, 16>, 16>;
var<workgroup> tb: array<array<f32, 16>, 16>;

@compute @workgroup_size(16, 16, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let row = wg.y * TILE + lid.y;
  let col = wg.x * TILE + lid.x;
  let a0 = wg.z * dims.m * dims.k;
  let b0 = wg.z * dims.k * dims.n;
  var acc = 0.0;
  let tiles = (dims.k + TILE - 1u) / TILE;
  for (var t = 0u; t < tiles; t = t + 1u) {
    let ka = t * TILE + lid.x;
    let kb = t * TILE + lid.y;
    var va = 0.0;
    if (row < dims.m && ka < dims.k) {
      va = a[a0 + row * dims.k + ka];
    }
    var vb = 0.0;
    if (kb < dims.k && col < dims.n) {
      vb = b[b0 + kb * dims.n + col];
    }
    ta[lid.y][lid.x] = va;
    tb[lid.y][lid.x] = vb;
    workgroupBarrier();
    for (var i = 0u; i < TILE; i = i + 1u) {
      acc = acc + ta[lid.y][i] * tb[i][lid.x];
    }
    workgroupBarrier();
  }
  if (row < dims.m && col < dims.n) {
    out[wg.z * dims.m * dims.n + row * dims.n + col] = acc;
  }
}
