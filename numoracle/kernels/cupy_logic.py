"""CuPy targets for ``logic_ca`` in seed 004's parallel design: the backward pass
computes every cell's gradients in parallel (one thread per cell), then merges them.

Kernels (CUDA C, NVRTC, compiled with ``--fmad=false`` so that the per-cell
arithmetic is the same in every mode):

``ca_step_f32``
    forward, one thread per cell: the 3x3 neighbourhood of every channel (periodic
    or zero boundary), the perception trees ``9 -> 4 -> 2 -> 1``, the update layers;
    writes the next grid (every step's grid is kept for the backward pass);
``ca_cell_grads_f32``
    backward of one step, one thread per cell: recomputes the cell's activations
    from the step's grid, then its gradients: of every layer's gate probabilities
    (summed over the cell's channels in channel order), of its own state and of its
    neighbourhood. ``mode`` 0 ("atomic"): the thread adds them with ``atomicAdd``
    into the accumulators and the previous grid's gradient (order varies);
    mode 1 ("ordered"): it writes them to per-cell buffers, merged by
``ca_merge_probs_f32`` / ``ca_merge_grid_f32``
    one thread per accumulator element (per previous-grid element), adding the
    cells' contributions in cell order: the sequential merge order, deterministic;
``ca_serial_f32``
    mode 2 ("serial"): one thread runs the cells one after another, computing and
    merging each in turn: the sequential version the other two are compared with.

The softmax of the logits, the loss and its gradient, and the final softmax
backward are CuPy array operations. Precision: fp32 throughout; ``atomic`` claims
order ``any``; ``ordered`` and ``serial`` claim the sequential merge order
(``deterministic_runs``), so :func:`numoracle.checking.equivalence.check_equivalence`
demands bit-identical results of ``ordered`` against ``serial`` and the two-order
yardstick of ``atomic``. Outputs are poisoned with NaN before every launch that
writes them.
"""

from __future__ import annotations

import functools
import math
from functools import partial
from typing import Any

import numpy as np

from ..errors import InvalidArgument, KernelMismatch
from ..oracle.precision import get_model
from ..targets.backends import get_backend
from ..targets.target import Target

__all__ = ["LOGIC_SOURCE", "logic_ca_cupy", "TARGETS", "MODES"]

MODES = ("atomic", "ordered", "serial")
#: the largest sizes the kernels' local arrays take (the op's limits)
MAX_C, MAX_K, MAX_HIDDEN = 16, 4, 64

LOGIC_SOURCE = r"""
#define MAXC 16
#define MAXK 4
#define MAXU 64
#define MAXF (MAXC * (1 + MAXK))

__device__ float gate(int g, float a, float b) {
    const float ab = a * b;
    switch (g) {
        case 0: return 0.0f;
        case 1: return ab;
        case 2: return a - ab;
        case 3: return a;
        case 4: return b - ab;
        case 5: return b;
        case 6: return a + b - 2.0f * a * b;
        case 7: return a + b - ab;
        case 8: return 1.0f - (a + b - ab);
        case 9: return 1.0f - (a + b - 2.0f * a * b);
        case 10: return 1.0f - b;
        case 11: return 1.0f - b + ab;
        case 12: return 1.0f - a;
        case 13: return 1.0f - a + ab;
        case 14: return 1.0f - ab;
        default: return 1.0f;
    }
}

// d gate / d a (da) and d gate / d b (db)
__device__ void dgate(int g, float a, float b, float* da, float* db) {
    switch (g) {
        case 1: *da = b; *db = a; return;
        case 2: *da = 1.0f - b; *db = -a; return;
        case 3: *da = 1.0f; *db = 0.0f; return;
        case 4: *da = -b; *db = 1.0f - a; return;
        case 5: *da = 0.0f; *db = 1.0f; return;
        case 6: *da = 1.0f - 2.0f * b; *db = 1.0f - 2.0f * a; return;
        case 7: *da = 1.0f - b; *db = 1.0f - a; return;
        case 8: *da = b - 1.0f; *db = a - 1.0f; return;
        case 9: *da = 2.0f * b - 1.0f; *db = 2.0f * a - 1.0f; return;
        case 10: *da = 0.0f; *db = -1.0f; return;
        case 11: *da = b; *db = a - 1.0f; return;
        case 12: *da = -1.0f; *db = 0.0f; return;
        case 13: *da = b - 1.0f; *db = a; return;
        case 14: *da = -b; *db = -a; return;
        default: *da = 0.0f; *db = 0.0f; return;
    }
}

__device__ void layer_fwd(const float* in, const int* ia, const int* ib, const float* p,
                          int J, float* out) {
    for (int j = 0; j < J; ++j) {
        const float a = in[ia[j]], b = in[ib[j]];
        float r = 0.0f;
        for (int g = 0; g < 16; ++g) r = r + p[j * 16 + g] * gate(g, a, b);
        out[j] = r;
    }
}

// gin (zeroed by the caller) += input gradient; gp += gradient of the probabilities
__device__ void layer_bwd(const float* in, const int* ia, const int* ib, const float* p,
                          int J, const float* gy, float* gin, float* gp) {
    for (int j = 0; j < J; ++j) {
        const float a = in[ia[j]], b = in[ib[j]];
        float sa = 0.0f, sb = 0.0f;
        for (int g = 0; g < 16; ++g) {
            gp[j * 16 + g] = gp[j * 16 + g] + gy[j] * gate(g, a, b);
            float da, db;
            dgate(g, a, b, &da, &db);
            sa = sa + p[j * 16 + g] * da;
            sb = sb + p[j * 16 + g] * db;
        }
        gin[ia[j]] = gin[ia[j]] + gy[j] * sa;
        gin[ib[j]] = gin[ib[j]] + gy[j] * sb;
    }
}

__device__ int wrap(int v, int n) { return ((v % n) + n) % n; }

__device__ float read(const float* x, int y, int xx, int c, int H, int W, int C, int periodic) {
    if (periodic) return x[(wrap(y, H) * W + wrap(xx, W)) * C + c];
    if (y < 0 || y >= H || xx < 0 || xx >= W) return 0.0f;
    return x[(y * W + xx) * C + c];
}

struct Net {
    const float *pp, *pu;      // probabilities (K*7*16), ((U+C)*16)
    const int *pidx, *uidx;    // (K*7*2), ((U+C)*2)
    int H, W, C, K, U, periodic;
};

// forward of one cell: neighbourhoods nb, perception activations l1, l2, features f, hidden h
__device__ void cell_forward(const Net& n, const float* x, int cell, float nb[MAXC][9],
                             float l1[MAXK][MAXC][4], float l2[MAXK][MAXC][2], float* f,
                             float* h, float* out) {
    const int y = cell / n.W, xx = cell % n.W, C = n.C, F = C * (1 + n.K);
    int ia[64], ib[64];
    for (int c = 0; c < C; ++c) {
        int pos = 0;
        for (int dy = -1; dy <= 1; ++dy)
            for (int dx = -1; dx <= 1; ++dx)
                nb[c][pos++] = read(x, y + dy, xx + dx, c, n.H, n.W, C, n.periodic);
        f[c] = x[cell * C + c];
    }
    for (int k = 0; k < n.K; ++k) {
        for (int j = 0; j < 7; ++j) {
            ia[j] = n.pidx[(k * 7 + j) * 2];
            ib[j] = n.pidx[(k * 7 + j) * 2 + 1];
        }
        for (int c = 0; c < C; ++c) {
            float o;
            layer_fwd(nb[c], ia, ib, n.pp + k * 7 * 16, 4, l1[k][c]);
            layer_fwd(l1[k][c], ia + 4, ib + 4, n.pp + (k * 7 + 4) * 16, 2, l2[k][c]);
            layer_fwd(l2[k][c], ia + 6, ib + 6, n.pp + (k * 7 + 6) * 16, 1, &o);
            f[C * (1 + k) + c] = o;
        }
    }
    for (int j = 0; j < n.U; ++j) { ia[j] = n.uidx[2 * j]; ib[j] = n.uidx[2 * j + 1]; }
    layer_fwd(f, ia, ib, n.pu, n.U, h);
    if (out) {
        for (int j = 0; j < C; ++j) {
            ia[j] = n.uidx[2 * (n.U + j)];
            ib[j] = n.uidx[2 * (n.U + j) + 1];
        }
        layer_fwd(h, ia, ib, n.pu + n.U * 16, C, out);
    }
    (void)F;
}

extern "C" __global__ void ca_step_f32(const float* x, float* xn, const float* pp,
                                       const float* pu, const int* pidx, const int* uidx,
                                       int H, int W, int C, int K, int U, int periodic) {
    const int cell = blockIdx.x * blockDim.x + threadIdx.x;
    if (cell >= H * W) return;
    Net n = {pp, pu, pidx, uidx, H, W, C, K, U, periodic};
    float nb[MAXC][9], l1[MAXK][MAXC][4], l2[MAXK][MAXC][2], f[MAXF], h[MAXU], out[MAXC];
    cell_forward(n, x, cell, nb, l1, l2, f, h, out);
    for (int c = 0; c < C; ++c) xn[cell * C + c] = out[c];
}

// one cell's gradients: gu ((U+C)*16), gpp (K*7*16) (both zeroed by the caller),
// centre (C) and gnb (K*C*9)
__device__ void cell_grads(const Net& n, const float* x, const float* g, int cell, float* gu,
                           float* gpp, float* centre, float* gnb) {
    float nb[MAXC][9], l1[MAXK][MAXC][4], l2[MAXK][MAXC][2], f[MAXF], h[MAXU];
    cell_forward(n, x, cell, nb, l1, l2, f, h, 0);
    const int C = n.C, U = n.U, F = C * (1 + n.K);
    int ia[64], ib[64];
    float gh[MAXU], gf[MAXF];
    for (int j = 0; j < U; ++j) gh[j] = 0.0f;
    for (int j = 0; j < F; ++j) gf[j] = 0.0f;
    for (int j = 0; j < C; ++j) { ia[j] = n.uidx[2 * (U + j)]; ib[j] = n.uidx[2 * (U + j) + 1]; }
    layer_bwd(h, ia, ib, n.pu + U * 16, C, g + cell * C, gh, gu + U * 16);
    for (int j = 0; j < U; ++j) { ia[j] = n.uidx[2 * j]; ib[j] = n.uidx[2 * j + 1]; }
    layer_bwd(f, ia, ib, n.pu, U, gh, gf, gu);
    for (int c = 0; c < C; ++c) centre[c] = gf[c];
    for (int k = 0; k < n.K; ++k) {
        for (int j = 0; j < 7; ++j) {
            ia[j] = n.pidx[(k * 7 + j) * 2];
            ib[j] = n.pidx[(k * 7 + j) * 2 + 1];
        }
        for (int c = 0; c < C; ++c) {
            float gz = gf[C * (1 + k) + c], g2[2] = {0.0f, 0.0f}, g1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            float g0[9];
            for (int q = 0; q < 9; ++q) g0[q] = 0.0f;
            layer_bwd(l2[k][c], ia + 6, ib + 6, n.pp + (k * 7 + 6) * 16, 1, &gz, g2,
                      gpp + (k * 7 + 6) * 16);
            layer_bwd(l1[k][c], ia + 4, ib + 4, n.pp + (k * 7 + 4) * 16, 2, g2, g1,
                      gpp + (k * 7 + 4) * 16);
            layer_bwd(nb[c], ia, ib, n.pp + k * 7 * 16, 4, g1, g0, gpp + k * 7 * 16);
            for (int q = 0; q < 9; ++q) gnb[(k * C + c) * 9 + q] = g0[q];
        }
    }
}

// the cell a neighbourhood position of `cell` reads, or -1 beyond a zero edge
__device__ int neighbour(const Net& n, int cell, int pos) {
    const int y = cell / n.W + pos / 3 - 1, xx = cell % n.W + pos % 3 - 1;
    if (n.periodic) return wrap(y, n.H) * n.W + wrap(xx, n.W);
    if (y < 0 || y >= n.H || xx < 0 || xx >= n.W) return -1;
    return y * n.W + xx;
}

#define NPU ((MAXU + MAXC) * 16)
#define NPP (MAXK * 7 * 16)

// mode 0: atomics into acc_u, acc_p, prev; mode 1: per-cell buffers
extern "C" __global__ void ca_cell_grads_f32(const float* x, const float* g, const float* pp,
        const float* pu, const int* pidx, const int* uidx, int H, int W, int C, int K, int U,
        int periodic, int mode, float* acc_u, float* acc_p, float* prev, float* buf_u,
        float* buf_p, float* buf_c, float* buf_nb) {
    const int cell = blockIdx.x * blockDim.x + threadIdx.x;
    if (cell >= H * W) return;
    Net n = {pp, pu, pidx, uidx, H, W, C, K, U, periodic};
    const int nu = (U + C) * 16, np_ = K * 7 * 16;
    float gu[NPU], gpp[NPP], centre[MAXC], gnb[MAXK * MAXC * 9];
    for (int e = 0; e < nu; ++e) gu[e] = 0.0f;
    for (int e = 0; e < np_; ++e) gpp[e] = 0.0f;
    cell_grads(n, x, g, cell, gu, gpp, centre, gnb);
    if (mode == 0) {
        for (int e = 0; e < nu; ++e) atomicAdd(acc_u + e, gu[e]);
        for (int e = 0; e < np_; ++e) atomicAdd(acc_p + e, gpp[e]);
        for (int c = 0; c < C; ++c) atomicAdd(prev + cell * C + c, centre[c]);
        for (int k = 0; k < K; ++k)
            for (int pos = 0; pos < 9; ++pos) {
                const int d = neighbour(n, cell, pos);
                if (d < 0) continue;
                for (int c = 0; c < C; ++c) atomicAdd(prev + d * C + c, gnb[(k * C + c) * 9 + pos]);
            }
    } else {
        for (int e = 0; e < nu; ++e) buf_u[cell * nu + e] = gu[e];
        for (int e = 0; e < np_; ++e) buf_p[cell * np_ + e] = gpp[e];
        for (int c = 0; c < C; ++c) buf_c[cell * C + c] = centre[c];
        for (int e = 0; e < K * C * 9; ++e) buf_nb[cell * K * C * 9 + e] = gnb[e];
    }
}

// acc[e] += buf[cell][e] for cell = 0, 1, ... (one thread per element)
extern "C" __global__ void ca_merge_probs_f32(const float* buf, float* acc, int cells, int n) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n) return;
    float s = acc[e];
    for (int cell = 0; cell < cells; ++cell) s = s + buf[cell * n + e];
    acc[e] = s;
}

// prev[d][c]: the contributions of the cells in cell order, each cell's own state
// first, then its kernels' neighbourhood positions in order (the serial loop's order)
extern "C" __global__ void ca_merge_grid_f32(const float* buf_c, const float* buf_nb,
        float* prev, int H, int W, int C, int K, int periodic) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= H * W * C) return;
    const int d = t / C, c = t % C;
    Net n = {0, 0, 0, 0, H, W, C, K, 0, periodic};
    float s = prev[t];
    for (int cell = 0; cell < H * W; ++cell) {
        if (cell == d) s = s + buf_c[cell * C + c];
        for (int k = 0; k < K; ++k)
            for (int pos = 0; pos < 9; ++pos)
                if (neighbour(n, cell, pos) == d)
                    s = s + buf_nb[((cell * K + k) * C + c) * 9 + pos];
    }
    prev[t] = s;
}

// mode 2: one thread, the cells one after another, each merged at once
extern "C" __global__ void ca_serial_f32(const float* x, const float* g, const float* pp,
        const float* pu, const int* pidx, const int* uidx, int H, int W, int C, int K, int U,
        int periodic, float* acc_u, float* acc_p, float* prev) {
    if (blockIdx.x * blockDim.x + threadIdx.x != 0) return;
    Net n = {pp, pu, pidx, uidx, H, W, C, K, U, periodic};
    const int nu = (U + C) * 16, np_ = K * 7 * 16;
    float gu[NPU], gpp[NPP], centre[MAXC], gnb[MAXK * MAXC * 9];
    for (int cell = 0; cell < H * W; ++cell) {
        for (int e = 0; e < nu; ++e) gu[e] = 0.0f;
        for (int e = 0; e < np_; ++e) gpp[e] = 0.0f;
        cell_grads(n, x, g, cell, gu, gpp, centre, gnb);
        for (int e = 0; e < nu; ++e) acc_u[e] = acc_u[e] + gu[e];
        for (int e = 0; e < np_; ++e) acc_p[e] = acc_p[e] + gpp[e];
        for (int c = 0; c < C; ++c) prev[cell * C + c] = prev[cell * C + c] + centre[c];
        for (int k = 0; k < K; ++k)
            for (int pos = 0; pos < 9; ++pos) {
                const int d = neighbour(n, cell, pos);
                if (d < 0) continue;
                for (int c = 0; c < C; ++c)
                    prev[d * C + c] = prev[d * C + c] + gnb[(k * C + c) * 9 + pos];
            }
    }
}
"""

_BLOCK = 64
_NAMES = ("ca_step_f32", "ca_cell_grads_f32", "ca_merge_probs_f32", "ca_merge_grid_f32",
          "ca_serial_f32")


@functools.cache
def _kernels(device_id: int) -> dict[str, Any]:
    import cupy

    with cupy.cuda.Device(device_id):
        module = cupy.RawModule(code=LOGIC_SOURCE, options=("--std=c++14", "--fmad=false"))
        return {n: module.get_function(n) for n in _NAMES}


def _launch(name: str, count: int, args: tuple) -> None:
    import cupy

    device = cupy.cuda.Device()
    grid = (max(1, math.ceil(count / _BLOCK)),)
    errors = (cupy.cuda.driver.CUDADriverError, cupy.cuda.runtime.CUDARuntimeError)
    try:
        _kernels(device.id)[name](grid, (_BLOCK,), args)
        cupy.cuda.get_current_stream().synchronize()
    except errors as exc:
        raise KernelMismatch(f"cupy kernel {name} failed on device {device.id} with "
                             f"grid={grid}: {exc}") from exc


def _softmax(w: Any) -> Any:
    import cupy

    e = cupy.exp(w - w.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def logic_ca_cupy(grid: Any, target: Any, perception: Any, perception_idx: Any, update: Any,
                  update_idx: Any, *, params: dict[str, Any], mode: str) -> dict[str, Any]:
    """The automaton's outputs with the backward pass merged in ``mode`` (module docstring)."""
    import cupy

    if mode not in MODES:
        raise InvalidArgument(f"{mode=} must be one of {MODES}")
    h, w, c = (int(params[k]) for k in ("height", "width", "channels"))
    k_count, u = int(params["kernels"]), int(params["hidden"])
    steps, periodic = int(params["steps"]), int(bool(params["periodic"]))
    if c > MAX_C or k_count > MAX_K or u > MAX_HIDDEN:
        raise InvalidArgument(f"cupy logic_ca: channels={c}, kernels={k_count}, hidden={u} "
                              f"exceed the kernels' limits {MAX_C}, {MAX_K}, {MAX_HIDDEN}")
    f32, i32 = np.float32, np.int32
    cells = h * w
    x = cupy.ascontiguousarray(grid, dtype=f32).reshape(-1)
    pp = cupy.ascontiguousarray(_softmax(cupy.asarray(perception, f32)).reshape(-1))
    pu = cupy.ascontiguousarray(_softmax(cupy.asarray(update, f32)).reshape(-1))
    pidx = cupy.ascontiguousarray(cupy.asarray(perception_idx).astype(cupy.int32).reshape(-1))
    uidx = cupy.ascontiguousarray(cupy.asarray(update_idx).astype(cupy.int32).reshape(-1))
    dims = (i32(h), i32(w), i32(c), i32(k_count), i32(u), i32(periodic))
    grids = [x]
    for _ in range(steps):
        nxt = cupy.full(cells * c, np.nan, f32)
        _launch("ca_step_f32", cells, (grids[-1], nxt, pp, pu, pidx, uidx) + dims)
        grids.append(nxt)
    n_val = f32(cells * c)
    d = grids[-1] - cupy.asarray(target, f32).reshape(-1)
    loss = cupy.sum(d * d) / n_val
    g = (f32(2) * d) / n_val
    nu, np_ = (u + c) * 16, k_count * 7 * 16
    acc_u = cupy.zeros(nu, f32)
    acc_p = cupy.zeros(np_, f32)
    for t in reversed(range(steps)):
        prev = cupy.zeros(cells * c, f32)
        if mode == "serial":
            _launch("ca_serial_f32", 1, (grids[t], g, pp, pu, pidx, uidx) + dims
                    + (acc_u, acc_p, prev))
        elif mode == "atomic":
            dummy = cupy.zeros(1, f32)
            _launch("ca_cell_grads_f32", cells, (grids[t], g, pp, pu, pidx, uidx) + dims
                    + (i32(0), acc_u, acc_p, prev, dummy, dummy, dummy, dummy))
        else:
            buf_u = cupy.full(cells * nu, np.nan, f32)
            buf_p = cupy.full(cells * np_, np.nan, f32)
            buf_c = cupy.full(cells * c, np.nan, f32)
            buf_nb = cupy.full(cells * k_count * c * 9, np.nan, f32)
            _launch("ca_cell_grads_f32", cells, (grids[t], g, pp, pu, pidx, uidx) + dims
                    + (i32(1), acc_u, acc_p, prev, buf_u, buf_p, buf_c, buf_nb))
            _launch("ca_merge_probs_f32", nu, (buf_u, acc_u, i32(cells), i32(nu)))
            _launch("ca_merge_probs_f32", np_, (buf_p, acc_p, i32(cells), i32(np_)))
            _launch("ca_merge_grid_f32", cells * c, (buf_c, buf_nb, prev, i32(h), i32(w), i32(c),
                                                    i32(k_count), i32(periodic)))
        g = prev
    au, ap = acc_u.reshape(u + c, 16), acc_p.reshape(k_count, 7, 16)
    pu2, pp2 = pu.reshape(u + c, 16), pp.reshape(k_count, 7, 16)
    return {"y": grids[-1].reshape(h, w, c), "loss": loss.reshape(1),
            "grad_grid": g.reshape(h, w, c),
            "grad_perception": pp2 * (ap - cupy.sum(ap * pp2, axis=-1, keepdims=True)),
            "grad_update": pu2 * (au - cupy.sum(au * pu2, axis=-1, keepdims=True))}


def _targets() -> tuple[Target, ...]:
    available = partial(get_backend("cupy").available)
    out = []
    for mode in MODES:
        model = get_model("fp32") if mode == "atomic" else \
            get_model("fp32", order="sequential", deterministic_runs=True)
        how = {"atomic": "with atomics", "ordered": "in cell order",
               "serial": "by one thread, cell after cell (the sequential version)"}[mode]
        out.append(Target(
            name=f"cupy-{mode}-fp32", op="logic_ca", backend="cupy", precision=model,
            fn=partial(logic_ca_cupy, mode=mode), available=available,
            description=f"CUDA kernels in seed 004's design: per-cell gradients in parallel, "
                        f"merged {how}"))
    return tuple(out)


#: the CuPy logic automaton targets: atomic, ordered and serial merges (fp32)
TARGETS: tuple[Target, ...] = _targets()
