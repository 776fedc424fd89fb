"""CuPy target for ``kan``: hand-written CUDA kernels for a KAN layer's forward and backward pass.

Three kernels, compiled with NVRTC through :class:`cupy.RawModule`:

``kan_basis_f32``
    one thread per ``(b, i)``: finds the cell ``t_j <= x < t_{j+1}`` by comparisons
    with the knots, runs the Cox–de Boor recursion over the ``k + 1`` nonzero
    bases (efficient-kan's formulas, so the zero terms it skips are exact zeros),
    and writes the dense bases, their closed-form derivative, ``silu(x)`` and
    ``silu'(x)``;
``kan_forward_f32``
    one thread per ``(b, j)``: ``sum_i base_weight silu + spline_weight sum_c coef B_c``;
``kan_backward_f32``
    one thread per ``(b, i)``: the input gradient ``silu' sum_j g w_base + sum_c
    (sum_j g w_spline coef_c) B'_c``, and ``atomicAdd`` of every sample's share
    into ``grad_coef``, ``grad_base_weight`` and ``grad_spline_weight`` (zeroed
    before the launch).

Precision: fp32 storage, compute and accumulation; the atomics make the batch
sums' order arbitrary (order ``any``, not deterministic). CuPy compiles with
``-ftz=true``: subnormal inputs are read as zero. ``y`` and ``grad_input`` are
poisoned with NaN before their launches; every launch is synchronised and
its errors raised. The ``kan_chain`` target runs the same kernels layer by
layer: forward through every layer, then backward from the last.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ..errors import InvalidArgument, KernelMismatch
from ..oracle.precision import get_model
from ..targets.backends import get_backend
from ..targets.target import Target

__all__ = ["KAN_SOURCE", "kan", "kan_chain", "TARGETS", "MAX_ORDER"]

#: highest spline order the kernels take (local arrays of MAX_ORDER + 1)
MAX_ORDER = 7

KAN_SOURCE = r"""
#define MAXK 8

__device__ float silu_f(float x) { return x / (1.0f + expf(-x)); }
__device__ float dsilu_f(float x) {
    const float s = 1.0f / (1.0f + expf(-x));
    return s * (1.0f + x * (1.0f - s));
}

// For x and the M knots t of its feature: the cell j (t[j] <= x < t[j+1]),
// or -1, and the k + 1 bases of order k (vals[r] = B_{j-k+r,k}) and of order
// k - 1 (prev[r] = B_{j-k+1+r,k-1}), by Cox-de Boor on the nonzero triangle.
__device__ int local_bases(float x, const float* t, int M, int k, float* vals, float* prev) {
    int j = -1;
    for (int m = 0; m + 1 < M; ++m)
        if (x >= t[m] && x < t[m + 1]) { j = m; break; }
    if (j < 0) return -1;
    float cur[MAXK + 1];
    cur[0] = 1.0f;                       // B_{j,0}
    for (int r = 0; r <= k; ++r) prev[r] = 0.0f;
    if (k == 0) { vals[0] = 1.0f; return j; }
    for (int p = 1; p <= k; ++p) {
        // level p: bases m = j-p .. j, from level p-1: m = j-p+1 .. j (cur[0..p-1])
        float nxt[MAXK + 1];
        const int top = M - 2 - p;       // last valid basis index at level p
        for (int r = 0; r <= p; ++r) {
            const int m = j - p + r;
            float v = 0.0f;
            if (m >= 0 && m <= top) {
                const float lo = (r - 1 >= 0) ? cur[r - 1] : 0.0f;   // B_{m,p-1}
                const float hi = (r <= p - 1) ? cur[r] : 0.0f;       // B_{m+1,p-1}
                v = (x - t[m]) / (t[m + p] - t[m]) * lo
                  + (t[m + p + 1] - x) / (t[m + p + 1] - t[m + 1]) * hi;
            }
            nxt[r] = v;
        }
        if (p == k) for (int r = 0; r < p; ++r) prev[r] = cur[r];
        for (int r = 0; r <= p; ++r) cur[r] = nxt[r];
    }
    for (int r = 0; r <= k; ++r) vals[r] = cur[r];
    return j;
}

extern "C" __global__ void kan_basis_f32(
    const float* __restrict__ x, const float* __restrict__ grid,
    float* __restrict__ bases, float* __restrict__ dbases,
    float* __restrict__ s, float* __restrict__ ds,
    const int B, const int I, const int M, const int k)
{
    const int C = M - k - 1;
    const long long total = (long long)B * I;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        const int i = (int)(e % I);
        const float xv = x[e];
        const float* t = grid + (long long)i * M;
        float vals[MAXK + 1], prev[MAXK + 1];
        const int j = local_bases(xv, t, M, k, vals, prev);
        float* bo = bases + e * C;
        float* dbo = dbases + e * C;
        for (int c = 0; c < C; ++c) { bo[c] = 0.0f; dbo[c] = 0.0f; }
        if (j >= 0) {
            for (int r = 0; r <= k; ++r) {
                const int c = j - k + r;
                if (c < 0 || c >= C) continue;
                bo[c] = vals[r];
                // B'_{c,k} = k B_{c,k-1} / (t[c+k] - t[c]) - k B_{c+1,k-1} / (t[c+k+1] - t[c+1])
                const float lo = (r - 1 >= 0) ? prev[r - 1] : 0.0f;
                const float hi = (r <= k - 1) ? prev[r] : 0.0f;
                dbo[c] = k * lo / (t[c + k] - t[c]) - k * hi / (t[c + k + 1] - t[c + 1]);
            }
        }
        s[e] = silu_f(xv);
        ds[e] = dsilu_f(xv);
    }
}

extern "C" __global__ void kan_forward_f32(
    const float* __restrict__ bases, const float* __restrict__ s,
    const float* __restrict__ coef, const float* __restrict__ wb,
    const float* __restrict__ ws, float* __restrict__ y,
    const int B, const int I, const int O, const int C)
{
    const long long total = (long long)B * O;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        const int b = (int)(e / O), jo = (int)(e % O);
        float acc = 0.0f;
        for (int i = 0; i < I; ++i) {
            const float* bb = bases + ((long long)b * I + i) * C;
            const float* cc = coef + ((long long)jo * I + i) * C;
            float sp = 0.0f;
            for (int c = 0; c < C; ++c) sp += cc[c] * bb[c];
            acc += wb[(long long)jo * I + i] * s[(long long)b * I + i];
            acc += ws[(long long)jo * I + i] * sp;
        }
        y[e] = acc;
    }
}

extern "C" __global__ void kan_backward_f32(
    const float* __restrict__ bases, const float* __restrict__ dbases,
    const float* __restrict__ s, const float* __restrict__ ds,
    const float* __restrict__ coef, const float* __restrict__ wb,
    const float* __restrict__ ws, const float* __restrict__ g,
    float* __restrict__ gx, float* __restrict__ gcoef,
    float* __restrict__ gwb, float* __restrict__ gws,
    const int B, const int I, const int O, const int C)
{
    const long long total = (long long)B * I;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        const int b = (int)(e / I), i = (int)(e % I);
        const float* bb = bases + e * C;
        const float* db = dbases + e * C;
        const float sv = s[e];
        float gbase = 0.0f, gspl = 0.0f;
        for (int jo = 0; jo < O; ++jo) {
            const float gv = g[(long long)b * O + jo];
            const long long w = (long long)jo * I + i;
            const float* cc = coef + w * C;
            const float gw = gv * ws[w];
            float sp = 0.0f, dsp = 0.0f;
            for (int c = 0; c < C; ++c) {
                if (bb[c] != 0.0f || db[c] != 0.0f) {
                    sp += cc[c] * bb[c];
                    dsp += cc[c] * db[c];
                    atomicAdd(gcoef + w * C + c, gw * bb[c]);
                }
            }
            gbase += gv * wb[w];
            gspl += gw * dsp;
            atomicAdd(gwb + w, gv * sv);
            atomicAdd(gws + w, gv * sp);
        }
        gx[e] = ds[e] * gbase + gspl;
    }
}
"""

_BLOCK = 128
_GRID_MAX = 65535


@functools.cache
def _kernels(device_id: int) -> dict[str, Any]:
    import cupy

    with cupy.cuda.Device(device_id):
        module = cupy.RawModule(code=KAN_SOURCE, options=("--std=c++14",))
        return {n: module.get_function(n)
                for n in ("kan_basis_f32", "kan_forward_f32", "kan_backward_f32")}


def _launch(name: str, count: int, args: tuple) -> None:
    import cupy

    device = cupy.cuda.Device()
    grid = (max(1, min(math.ceil(count / _BLOCK), _GRID_MAX)),)
    errors = (cupy.cuda.driver.CUDADriverError, cupy.cuda.runtime.CUDARuntimeError)
    try:
        _kernels(device.id)[name](grid, (_BLOCK,), args)
        cupy.cuda.get_current_stream().synchronize()
    except errors as exc:
        raise KernelMismatch(f"cupy kernel {name} failed on device {device.id} with "
                             f"grid={grid}: {exc}") from exc


def _f32(arr: Any, name: str) -> Any:
    import cupy

    if not isinstance(arr, cupy.ndarray) or arr.dtype != np.float32:
        got = f"{arr.dtype}" if isinstance(arr, cupy.ndarray) else type(arr).__name__
        raise InvalidArgument(f"cupy-fp32 kan: input {name!r} must be a float32 cupy array, "
                              f"got {got}; make it with get_backend('cupy').to_device(host, "
                              "'fp32', 'C')")
    return cupy.ascontiguousarray(arr)


def _layer_forward(x: Any, grid: Any, coef: Any, wb: Any, ws: Any) -> tuple[Any, ...]:
    """The basis and forward kernels of one layer: ``(bases, dbases, s, ds, y)``."""
    import cupy

    bsz, n_in = x.shape
    n_out, _, n_c = coef.shape
    m = grid.shape[1]
    k = m - n_c - 1
    if not 0 <= k <= MAX_ORDER or grid.shape[0] != n_in or wb.shape != (n_out, n_in) \
            or ws.shape != (n_out, n_in):
        raise InvalidArgument(f"cupy kan: shapes x{x.shape}, grid{grid.shape}, coef{coef.shape}, "
                              f"base_weight{wb.shape} do not make a KAN layer of order <= "
                              f"{MAX_ORDER}")
    i32 = np.int32
    bases = cupy.full((bsz, n_in, n_c), np.nan, np.float32)
    dbases = cupy.full_like(bases, np.nan)
    s = cupy.full((bsz, n_in), np.nan, np.float32)
    ds = cupy.full_like(s, np.nan)
    _launch("kan_basis_f32", bsz * n_in, (x, grid, bases, dbases, s, ds, i32(bsz), i32(n_in),
                                          i32(m), i32(k)))
    y = cupy.full((bsz, n_out), np.nan, np.float32)
    _launch("kan_forward_f32", bsz * n_out, (bases, s, coef, wb, ws, y, i32(bsz), i32(n_in),
                                             i32(n_out), i32(n_c)))
    return bases, dbases, s, ds, y


def _layer_backward(saved: tuple[Any, ...], coef: Any, wb: Any, ws: Any,
                    g: Any) -> dict[str, Any]:
    """The backward kernel of one layer, from its forward pass's ``saved`` arrays."""
    import cupy

    bases, dbases, s, ds, y = saved
    bsz, n_in, n_c = bases.shape
    n_out = coef.shape[0]
    if g.shape != (bsz, n_out):
        raise InvalidArgument(f"cupy kan: grad_output{g.shape} must be (batch, out_features) = "
                              f"{(bsz, n_out)}")
    i32 = np.int32
    gx = cupy.full((bsz, n_in), np.nan, np.float32)
    gcoef = cupy.zeros((n_out, n_in, n_c), np.float32)  # atomics accumulate from 0
    gwb = cupy.zeros((n_out, n_in), np.float32)
    gws = cupy.zeros((n_out, n_in), np.float32)
    _launch("kan_backward_f32", bsz * n_in, (bases, dbases, s, ds, coef, wb, ws, g, gx, gcoef,
                                             gwb, gws, i32(bsz), i32(n_in), i32(n_out),
                                             i32(n_c)))
    return {"y": y, "grad_input": gx, "grad_coef": gcoef, "grad_base_weight": gwb,
            "grad_spline_weight": gws}


def kan(x: Any, grid: Any, coef: Any, base_weight: Any, spline_weight: Any,
        grad_output: Any) -> dict[str, Any]:
    """``y`` and the four gradients of a KAN layer, by the three kernels."""
    x, grid, coef = _f32(x, "x"), _f32(grid, "grid"), _f32(coef, "coef")
    wb, ws, g = _f32(base_weight, "base_weight"), _f32(spline_weight, "spline_weight"), \
        _f32(grad_output, "grad_output")
    return _layer_backward(_layer_forward(x, grid, coef, wb, ws), coef, wb, ws, g)


def kan_chain(**arrays: Any) -> dict[str, Any]:
    """Every layer's ``y`` and four gradients of a chain of KAN layers (input names
    of :mod:`numoracle.oracle.ops.kan_chain`): the forward kernels layer by layer,
    each on the previous layer's ``y``, then the backward kernel layer by layer
    from the last, each on the input gradient of the layer above."""
    n = 0
    while f"grid_{n}" in arrays:
        n += 1
    h = _f32(arrays["x"], "x")
    layers, saved = [], []
    for i in range(n):
        names = (f"grid_{i}", f"coef_{i}", f"base_weight_{i}", f"spline_weight_{i}")
        grid, coef, wb, ws = (_f32(arrays[k], k) for k in names)
        layers.append((coef, wb, ws))
        saved.append(_layer_forward(h, grid, coef, wb, ws))
        h = saved[-1][-1]
    g = _f32(arrays["grad_output"], "grad_output")
    out: dict[str, Any] = {}
    for i in reversed(range(n)):
        res = _layer_backward(saved[i], *layers[i], g)
        out.update({f"{k}_{i}": v for k, v in res.items()})
        g = res["grad_input"]
    return out


def _targets() -> tuple[Target, ...]:
    model = get_model("fp32", flush_subnormal_inputs=True)
    return (Target(name="cupy-fp32", op="kan", backend="cupy", precision=model, fn=kan,
                   layouts=("C",), available=get_backend("cupy").available,
                   description="hand-written CUDA (CuPy RawModule) KAN layer: in-kernel "
                               "Cox-de Boor bases and derivatives, atomicAdd gradients"),
            Target(name="cupy-fp32", op="kan_chain", backend="cupy", precision=model,
                   fn=kan_chain, layouts=("C",), available=get_backend("cupy").available,
                   description="a chain of the CuPy KAN layer kernels: forward through every "
                               "layer, then backward layer by layer"))


#: the CuPy KAN targets: a layer and a chain
TARGETS: tuple[Target, ...] = _targets()
