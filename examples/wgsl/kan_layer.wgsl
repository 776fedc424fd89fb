// One KAN layer (efficient-kan's), forward and backward, f32:
//
//   y[b,j] = sum_i base_weight[j,i] silu(x[b,i])
//          + sum_i sum_c coef[j,i,c] spline_weight[j,i] B_c(x[b,i])
//
// B_c: the B-splines of order k (the polynomial degree) on the knots grid[i, :]
// (G + 2k + 1 of them), by the Cox-de Boor recursion on the k + 1 bases that are
// non-zero at x (outside the knots every basis is 0). Arrays are row-major:
// x (B, I), grid (I, G + 2k + 1), coef (O, I, G + k), base_weight and
// spline_weight (O, I), grad_output (B, O); outputs y (B, O), grad_input (B, I),
// grad_coef (O, I, G + k), grad_base_weight and grad_spline_weight (O, I).
//
// Three passes, 64 invocations a workgroup:
//   forward      one invocation per (b, j): y
//   input_grad   one invocation per (b, i): grad_input (written as 0 where the
//                network says the layer needs no input gradient)
//   param_grad   one invocation per (j, i): grad_coef, grad_base_weight,
//                grad_spline_weight

struct Dims {
  batch: u32,
  in_features: u32,
  out_features: u32,
  grid_size: u32,
  spline_order: u32,
  compute_input_grad: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> grid: array<f32>;
@group(0) @binding(2) var<storage, read> coef: array<f32>;
@group(0) @binding(3) var<storage, read> base_weight: array<f32>;
@group(0) @binding(4) var<storage, read> spline_weight: array<f32>;
@group(0) @binding(5) var<storage, read> grad_output: array<f32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;
@group(0) @binding(7) var<storage, read_write> grad_input: array<f32>;
@group(0) @binding(8) var<storage, read_write> grad_coef: array<f32>;
@group(0) @binding(9) var<storage, read_write> grad_base_weight: array<f32>;
@group(0) @binding(10) var<storage, read_write> grad_spline_weight: array<f32>;
@group(0) @binding(11) var<uniform> dims: Dims;

const MAX_K: u32 = 5u;

// The non-zero bases at x of one feature: value[r] = B_{first + r, k}(x) for
// r = 0..k (bases that do not exist are 0), and deriv[r] their derivatives.
struct Bases {
  first: i32,
  value: array<f32, 6>,
  deriv: array<f32, 6>,
}

fn knot(i: u32, m: i32) -> f32 {
  let knots = dims.grid_size + 2u * dims.spline_order + 1u;
  return grid[i * knots + u32(m)];
}

fn bases(xv: f32, i: u32, with_deriv: bool) -> Bases {
  let k = dims.spline_order;
  let knots = i32(dims.grid_size + 2u * k + 1u);
  var out: Bases;
  out.first = 0;
  for (var r = 0u; r <= MAX_K; r = r + 1u) {
    out.value[r] = 0.0;
    out.deriv[r] = 0.0;
  }
  // the order-0 cell: t_cell <= x < t_{cell+1}
  var cell = -1;
  for (var m = 0; m < knots - 1; m = m + 1) {
    if (xv >= knot(i, m) && xv < knot(i, m + 1)) {
      cell = m;
    }
  }
  if (cell < 0) {
    return out;
  }
  // level p holds B_{cell - p + r, p} at index r = 0..p
  var cur: array<f32, 6>;
  var prev: array<f32, 6>;
  for (var r = 0u; r <= MAX_K; r = r + 1u) {
    cur[r] = 0.0;
    prev[r] = 0.0;
  }
  cur[0] = 1.0;
  for (var p = 1u; p <= k; p = p + 1u) {
    prev = cur;
    for (var r = 0u; r <= p; r = r + 1u) {
      let m = cell - i32(p) + i32(r);
      var v = 0.0;
      if (m >= 0 && m + i32(p) + 1 <= knots - 1) {
        if (r >= 1u) {
          let q1 = (xv - knot(i, m)) / (knot(i, m + i32(p)) - knot(i, m));
          v = q1 * prev[r - 1u];
        }
        if (r <= p - 1u) {
          let q2 = (knot(i, m + i32(p) + 1) - xv) / (knot(i, m + i32(p) + 1) - knot(i, m + 1));
          v = v + q2 * prev[r];
        }
      }
      cur[r] = v;
    }
  }
  out.first = cell - i32(k);
  out.value = cur;
  if (with_deriv) {
    // B'_{m,k} = k B_{m,k-1} / (t_{m+k} - t_m) - k B_{m+1,k-1} / (t_{m+k+1} - t_{m+1})
    let factor = f32(k);
    for (var r = 0u; r <= k; r = r + 1u) {
      let m = cell - i32(k) + i32(r);
      var d = 0.0;
      if (m >= 0 && m + i32(k) + 1 <= knots - 1) {
        if (r >= 1u) {
          d = factor * (prev[r - 1u] / (knot(i, m + i32(k)) - knot(i, m)));
        }
        if (r <= k - 1u) {
          d = d - factor * (prev[r] / (knot(i, m + i32(k) + 1) - knot(i, m + 1)));
        }
      }
      out.deriv[r] = d;
    }
  }
  return out;
}

fn silu(v: f32) -> f32 {
  return v / (1.0 + exp(-v));
}

fn silu_grad(v: f32) -> f32 {
  let s = 1.0 / (1.0 + exp(-v));
  return s * (1.0 + v * (1.0 - s));
}

fn coefs() -> u32 {
  return dims.grid_size + dims.spline_order;
}

@compute @workgroup_size(64)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>) {
  let idx = gid.x;
  if (idx >= dims.batch * dims.out_features) {
    return;
  }
  let b = idx / dims.out_features;
  let j = idx % dims.out_features;
  let n_in = dims.in_features;
  let nc = coefs();
  var acc = 0.0;
  for (var i = 0u; i < n_in; i = i + 1u) {
    let xv = x[b * n_in + i];
    let bs = bases(xv, i, false);
    let w = spline_weight[j * n_in + i];
    for (var r = 0u; r <= dims.spline_order; r = r + 1u) {
      let c = bs.first + i32(r);
      if (c >= 0 && c < i32(nc)) {
        acc = acc + bs.value[r] * (coef[(j * n_in + i) * nc + u32(c)] * w);
      }
    }
    acc = acc + silu(xv) * base_weight[j * n_in + i];
  }
  y[idx] = acc;
}

@compute @workgroup_size(64)
fn input_grad(@builtin(global_invocation_id) gid: vec3<u32>) {
  let idx = gid.x;
  if (idx >= dims.batch * dims.in_features) {
    return;
  }
  if (dims.compute_input_grad == 0u) {
    grad_input[idx] = 0.0;
    return;
  }
  let b = idx / dims.in_features;
  let i = idx % dims.in_features;
  let n_in = dims.in_features;
  let nc = coefs();
  let xv = x[idx];
  let bs = bases(xv, i, true);
  let sg = silu_grad(xv);
  var acc = 0.0;
  for (var j = 0u; j < dims.out_features; j = j + 1u) {
    let w = spline_weight[j * n_in + i];
    var inner = 0.0;
    for (var r = 0u; r <= dims.spline_order; r = r + 1u) {
      let c = bs.first + i32(r);
      if (c >= 0 && c < i32(nc)) {
        inner = inner + (coef[(j * n_in + i) * nc + u32(c)] * w) * bs.deriv[r];
      }
    }
    inner = inner + base_weight[j * n_in + i] * sg;
    acc = acc + grad_output[b * dims.out_features + j] * inner;
  }
  grad_input[idx] = acc;
}

@compute @workgroup_size(64)
fn param_grad(@builtin(global_invocation_id) gid: vec3<u32>) {
  let idx = gid.x;
  if (idx >= dims.out_features * dims.in_features) {
    return;
  }
  let j = idx / dims.in_features;
  let i = idx % dims.in_features;
  let n_in = dims.in_features;
  let nc = coefs();
  var gc: array<f32, 40>;
  for (var c = 0u; c < nc; c = c + 1u) {
    gc[c] = 0.0;
  }
  var gbw = 0.0;
  var gsw = 0.0;
  for (var b = 0u; b < dims.batch; b = b + 1u) {
    let xv = x[b * n_in + i];
    let g = grad_output[b * dims.out_features + j];
    let bs = bases(xv, i, false);
    var inner = 0.0;
    for (var r = 0u; r <= dims.spline_order; r = r + 1u) {
      let c = bs.first + i32(r);
      if (c >= 0 && c < i32(nc)) {
        gc[u32(c)] = gc[u32(c)] + g * bs.value[r];
        inner = inner + bs.value[r] * coef[idx * nc + u32(c)];
      }
    }
    gsw = gsw + g * inner;
    gbw = gbw + g * silu(xv);
  }
  let w = spline_weight[idx];
  for (var c = 0u; c < nc; c = c + 1u) {
    grad_coef[idx * nc + c] = gc[c] * w;
  }
  grad_base_weight[idx] = gbw;
  grad_spline_weight[idx] = gsw;
}
