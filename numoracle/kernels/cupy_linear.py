"""CuPy targets: hand-written CUDA kernels for ``linear`` and ``matmul``.

Two kernels, compiled with NVRTC through :class:`cupy.RawModule`:

``gemm_f32``
    a shared-memory tiled product ``C[z] = op(A[z]) op(B[z]) (+ bias)`` over a
    batch ``z``, where ``op`` is the identity or a transpose chosen at launch.
    Each thread owns one element of ``C`` and accumulates with ``fmaf`` over
    ``k = 0, 1, ..., K-1`` in order (tiles in order, within a tile in order,
    no padded terms), starting from the bias or from -0.0 (the exact additive
    identity, so no term is changed by the start value).
``colsum_f32``
    one thread per column summing the rows in order: the bias gradient.

``linear`` uses them as ``y = x W^T + b`` (``W`` read transposed in place),
``grad_input = g W``, ``grad_weight = g^T x`` (``g`` read transposed in place)
and ``grad_bias`` = the column sums of ``g``; ``matmul`` is ``gemm_f32`` over
the flattened batch dimensions.

Precision: fp32 storage, compute and accumulation, deterministic (no atomics,
a fixed order per element). Each reduction is in fact sequential with one
rounding per fused multiply-add; the targets claim the ``fp32`` preset, order
``any`` (the same height n - 1, the safe claim), with ``deterministic_runs``.

The kernels want C-contiguous float32 inputs (the targets accept layout ``C``
only); outputs are allocated full of NaN before a launch, every launch is
followed by a synchronisation that surfaces its errors, and compiled modules
are cached per device.
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

__all__ = ["TILE", "GEMM_SOURCE", "linear", "matmul", "gemm", "column_sum", "TARGETS"]

#: tile edge of gemm_f32; a block is TILE x TILE threads
TILE = 16

GEMM_SOURCE = r"""
#define TILE 16

// C[z] = op(A[z]) * op(B[z]) (+ bias), all float32 and C-contiguous.
//   op(A) is M x K: A is stored M x K (trans_a == 0) or K x M (trans_a != 0).
//   op(B) is K x N: B is stored K x N (trans_b == 0) or N x K (trans_b != 0).
//   bias (length N) is read only when has_bias != 0.
// Grid: x over column tiles (ceil(N / TILE)); y and z stride over row tiles
// and batch entries, so any M and batch fit the grid limits. Loop bounds
// depend on the block only, so every thread reaches every __syncthreads().
extern "C" __global__ void gemm_f32(
    const float* __restrict__ A, const float* __restrict__ B,
    const float* __restrict__ bias, float* __restrict__ C,
    const int M, const int N, const int K, const long long batch,
    const int trans_a, const int trans_b, const int has_bias)
{
    // As[r][k] = op(A)[row0 + r][k0 + k], Bs[k][c] = op(B)[k0 + k][col0 + c];
    // the +1 column keeps the transposed stores free of bank conflicts.
    __shared__ float As[TILE][TILE + 1];
    __shared__ float Bs[TILE][TILE + 1];

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int col0 = blockIdx.x * TILE;
    const int col = col0 + tx;
    const int row_tiles = (M + TILE - 1) / TILE;
    // Which tile slot this thread loads: chosen so that consecutive tx read
    // consecutive addresses of the stored matrix (coalesced) in both cases.
    const int ar = trans_a ? tx : ty;  // row of As
    const int ak = trans_a ? ty : tx;  // column of As
    const int bk = trans_b ? tx : ty;  // row of Bs
    const int bc = trans_b ? ty : tx;  // column of Bs

    for (long long z = blockIdx.z; z < batch; z += gridDim.z) {
        const float* Az = A + z * (long long)M * K;
        const float* Bz = B + z * (long long)K * N;
        float* Cz = C + z * (long long)M * N;
        for (int by = blockIdx.y; by < row_tiles; by += gridDim.y) {
            const int row0 = by * TILE;
            const int row = row0 + ty;
            float acc = (has_bias && col < N) ? bias[col] : -0.0f;
            for (int k0 = 0; k0 < K; k0 += TILE) {
                const int r = row0 + ar, ka = k0 + ak;
                float a = 0.0f;
                if (r < M && ka < K)
                    a = trans_a ? Az[(long long)ka * M + r] : Az[(long long)r * K + ka];
                As[ar][ak] = a;
                const int kb = k0 + bk, c = col0 + bc;
                float b = 0.0f;
                if (kb < K && c < N)
                    b = trans_b ? Bz[(long long)c * K + kb] : Bz[(long long)kb * N + c];
                Bs[bk][bc] = b;
                __syncthreads();
                const int kt = min(TILE, K - k0);  // no padded terms
                for (int i = 0; i < kt; ++i)
                    acc = fmaf(As[ty][i], Bs[i][tx], acc);
                __syncthreads();
            }
            if (row < M && col < N)
                Cz[(long long)row * N + col] = acc;
        }
    }
}

// out[j] = sum over i of G[i][j], in order i = 0, 1, ..., rows-1; G is
// rows x cols, C-contiguous. One thread per column (grid-stride).
extern "C" __global__ void colsum_f32(
    const float* __restrict__ G, float* __restrict__ out,
    const int rows, const int cols)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < cols;
         j += stride) {
        float acc = -0.0f;
        for (int i = 0; i < rows; ++i)
            acc += G[(long long)i * cols + j];
        out[j] = acc;
    }
}
"""

_GRID_YZ_MAX = 65535
_COLSUM_BLOCK = 256
_INT32_MAX = 2**31 - 1


@functools.cache
def _kernels(device_id: int) -> dict[str, Any]:
    """The compiled kernels of :data:`GEMM_SOURCE` for one device, by name."""
    import cupy

    with cupy.cuda.Device(device_id):
        module = cupy.RawModule(code=GEMM_SOURCE, options=("--std=c++14",))
        return {name: module.get_function(name) for name in ("gemm_f32", "colsum_f32")}


def _launch(name: str, grid: tuple[int, ...], block: tuple[int, ...], args: tuple) -> None:
    """Launch kernel ``name`` on the current device and wait, so that a launch
    or execution error is raised here, naming the kernel."""
    import cupy

    device = cupy.cuda.Device()
    errors = (cupy.cuda.driver.CUDADriverError, cupy.cuda.runtime.CUDARuntimeError)
    try:
        _kernels(device.id)[name](grid, block, args)
        cupy.cuda.get_current_stream().synchronize()
    except errors as exc:
        raise KernelMismatch(
            f"cupy kernel {name} failed on device {device.id} with grid={grid}, "
            f"block={block}: {exc}"
        ) from exc


def _as_input(arr: Any, name: str) -> Any:
    """``arr`` as a C-contiguous float32 cupy array (refusing other dtypes)."""
    import cupy

    if not isinstance(arr, cupy.ndarray) or arr.dtype != np.float32:
        got = f"{arr.dtype}" if isinstance(arr, cupy.ndarray) else type(arr).__name__
        raise InvalidArgument(
            f"cupy-fp32: input {name!r} must be a float32 cupy array, got {got}; "
            "make it with get_backend('cupy').to_device(host, 'fp32', 'C')"
        )
    return cupy.ascontiguousarray(arr)


def _dim(name: str, value: int) -> np.int32:
    if not 0 < value <= _INT32_MAX:
        raise InvalidArgument(f"{name}={value} must lie in [1, 2**31 - 1] for the cupy kernels")
    return np.int32(value)


def gemm(
    a: Any,
    b: Any,
    *,
    m: int,
    n: int,
    k: int,
    batch: int = 1,
    trans_a: bool = False,
    trans_b: bool = False,
    bias: Any = None,
) -> Any:
    """``op(a) @ op(b) (+ bias)`` for ``batch`` stacked products, by ``gemm_f32``.

    ``a`` holds ``batch`` matrices of ``m x k`` (``k x m`` when ``trans_a``) and
    ``b`` of ``k x n`` (``n x k`` when ``trans_b``), C-contiguous float32.
    Returns a new ``(batch, m, n)`` float32 array.
    """
    import cupy

    a, b = _as_input(a, "a"), _as_input(b, "b")
    bias = None if bias is None else _as_input(bias, "bias")
    dims = (_dim("m", m), _dim("n", n), _dim("k", k))
    if batch < 1:
        raise InvalidArgument(f"gemm: {batch=} must be a positive int")
    if a.size != batch * m * k or b.size != batch * k * n:
        raise InvalidArgument(
            f"gemm: a.shape={a.shape}, b.shape={b.shape} do not hold {batch} products "
            f"of {m}x{k} and {k}x{n}"
        )
    if bias is not None and bias.size != n:
        raise InvalidArgument(f"gemm: bias.shape={bias.shape} must hold n={n} values")
    out = cupy.full((batch, m, n), np.nan, dtype=np.float32)
    dummy = cupy.zeros(1, dtype=np.float32) if bias is None else None
    grid = (
        math.ceil(n / TILE),
        min(math.ceil(m / TILE), _GRID_YZ_MAX),
        min(batch, _GRID_YZ_MAX),
    )
    args = (
        a,
        b,
        dummy if bias is None else bias,
        out,
        *dims,
        np.int64(batch),
        np.int32(trans_a),
        np.int32(trans_b),
        np.int32(bias is not None),
    )
    _launch("gemm_f32", grid, (TILE, TILE, 1), args)
    return out


def column_sum(g: Any) -> Any:
    """Sum of each column of the C-contiguous float32 matrix ``g``, by ``colsum_f32``."""
    import cupy

    g = _as_input(g, "g")
    if g.ndim != 2:
        raise InvalidArgument(f"column_sum: g.shape={g.shape} must be (rows, cols)")
    rows, cols = _dim("rows", g.shape[0]), _dim("cols", g.shape[1])
    out = cupy.full((int(cols),), np.nan, dtype=np.float32)
    grid = (min(math.ceil(int(cols) / _COLSUM_BLOCK), _INT32_MAX),)
    _launch("colsum_f32", grid, (_COLSUM_BLOCK,), (g, out, rows, cols))
    return out


def linear(x: Any, weight: Any, grad_output: Any, bias: Any = None) -> dict[str, Any]:
    """``y = x W^T + b`` and its gradients, each by one kernel launch.

    Returns float32 cupy arrays ``y``, ``grad_input``, ``grad_weight`` and,
    with a bias, ``grad_bias``.
    """
    x, weight = _as_input(x, "x"), _as_input(weight, "weight")
    g = _as_input(grad_output, "grad_output")
    shapes_ok = x.ndim == 2 and weight.ndim == 2 and g.ndim == 2
    if not shapes_ok or weight.shape[1] != x.shape[1] or g.shape != (x.shape[0], weight.shape[0]):
        raise InvalidArgument(
            f"linear: x.shape={x.shape}, weight.shape={weight.shape}, "
            f"grad_output.shape={g.shape} must be (batch, in), (out, in), (batch, out)"
        )
    batch, in_f = x.shape
    out_f = weight.shape[0]
    b = None if bias is None else _as_input(bias, "bias")
    res = {
        "y": gemm(x, weight, m=batch, n=out_f, k=in_f, trans_b=True, bias=b)[0],
        "grad_input": gemm(g, weight, m=batch, n=in_f, k=out_f)[0],
        "grad_weight": gemm(g, x, m=out_f, n=in_f, k=batch, trans_a=True)[0],
    }
    if b is not None:
        res["grad_bias"] = column_sum(g)
    return res


def matmul(a: Any, b: Any) -> dict[str, Any]:
    """``out = a @ b`` over matching batch dimensions (no broadcasting)."""
    a, b = _as_input(a, "a"), _as_input(b, "b")
    if a.ndim < 2 or a.shape[:-2] != b.shape[:-2] or a.shape[-1] != b.shape[-2]:
        raise InvalidArgument(
            f"matmul: a.shape={a.shape} and b.shape={b.shape} must be "
            "(*batch, m, k) and (*batch, k, n) with the same batch dimensions"
        )
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = math.prod(a.shape[:-2])
    out = gemm(a, b, m=m, n=n, k=k, batch=batch)
    return {"out": out.reshape(a.shape[:-2] + (m, n))}


def _targets() -> tuple[Target, ...]:
    # CuPy compiles every kernel with -ftz=true (it cannot be turned off:
    # cupy/cupy#9576): subnormal inputs are read as zero, as the GPU run showed
    model = get_model("fp32", deterministic_runs=True, flush_subnormal_inputs=True)
    available = get_backend("cupy").available
    return tuple(
        Target(
            name="cupy-fp32",
            op=op,
            backend="cupy",
            precision=model,
            fn=fn,
            layouts=("C",),
            available=available,
            description=f"hand-written CUDA (CuPy RawModule) {text}; all outputs",
        )
        for op, fn, text in (
            ("linear", linear, "tiled fp32 FMA gemm + column-sum kernels"),
            ("matmul", matmul, "tiled fp32 FMA batched gemm"),
        )
    )


#: the CuPy targets, one per op
TARGETS: tuple[Target, ...] = _targets()
