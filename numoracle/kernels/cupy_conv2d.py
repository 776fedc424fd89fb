"""CuPy targets for ``conv2d``: direct (not im2col) fp32 CUDA kernels.

One source, :data:`CONV2D_SOURCE`, compiled with NVRTC through
:class:`cupy.RawModule` twice: with ``-DCONV_NHWC=0`` for activations in
``NCHW`` and weights in ``OIHW``, and with ``-DCONV_NHWC=1`` for activations in
``NHWC`` (arrays shaped ``(N, H, W, C)``) and weights in ``OHWI`` (shaped
``(O, kH, kW, C/groups)``). Only the index functions differ between the two;
the arithmetic is written once. Every kernel supports stride, padding,
dilation and groups (depthwise included), and walks its elements with a
grid-stride loop.

``conv2d_fwd_f32``
    ``y``: one thread per output element, summing ``x * w`` with ``fmaf`` over
    ``(c, kh, kw)`` in order (taps that fall in the padding skipped), starting
    from -0.0 (the exact additive identity); the bias is added last.
``conv2d_dgrad_f32``
    ``grad_input``: one thread per input element, summing ``g * w`` with
    ``fmaf`` over the taps ``(o, kh, kw)`` of its group that reach it, in order:
    ``(ih + ph - kh*dh)`` must be a multiple of the stride ``sh`` whose quotient
    is an output row, likewise for the columns.
``conv2d_wgrad_atomic_f32``
    ``grad_weight``, order not fixed: one thread per element of ``grad_output``
    adds ``g * x`` (rounded) into every weight element it touches with
    ``atomicAdd``, after ``conv2d_fill_f32`` set the weights' gradient to -0.0.
``conv2d_wgrad_partial_f32`` and ``conv2d_wgrad_reduce_f32``
    ``grad_weight``, deterministic, two phases: the ``N * Ho * Wo`` output
    positions ``p = (n * Ho + oh) * Wo + ow`` are cut into ``chunks`` runs of
    ``chunk`` consecutive positions; phase 1 writes one ``fmaf`` partial sum
    per (run, weight element) into a workspace, phase 2 adds each element's
    partials in run order.
``conv2d_bgrad_f32``
    ``grad_bias``: one thread per output channel summing ``g`` over
    ``(n, oh, ow)`` in order.

Precision: fp32 storage, compute and accumulation. CuPy compiles with
``-ftz=true``, so subnormal inputs may read as zero; the targets claim the
``fp32`` preset, order ``any``, with ``flush_subnormal_inputs`` (and
``deterministic_runs`` for the two-phase ``-det`` targets; the atomic ones
promise no bit-identical reruns).

Outputs (and the workspace) are allocated full of NaN before a launch, every
launch is followed by a synchronisation that surfaces its errors, and compiled
modules are cached per (device, layout).

The conv geometry (``stride``, ``padding``, ``dilation``, ``groups``) cannot
be read off the arrays alone: :func:`conv2d` takes it from ``params=`` (the
case's op parameters, as the runner passes them for ``conv2d``) or from
keywords, as ints or ``(h, w)`` pairs; ``groups`` defaults to
``C // weight's C/groups axis``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np

from ..errors import InvalidArgument, KernelMismatch
from ..oracle.precision import get_model
from ..targets.backends import get_backend
from ..targets.target import Target
from .conv_geometry import CONV_LAYOUTS, SIZE_PARAMS, ConvGeometry, resolve_geometry

__all__ = [
    "CONV2D_SOURCE",
    "CONV_LAYOUTS",
    "SIZE_PARAMS",
    "ConvGeometry",
    "resolve_geometry",
    "conv2d",
    "forward",
    "grad_input",
    "grad_weight",
    "grad_bias",
    "TARGETS",
]


CONV2D_SOURCE = r"""
// Direct 2-D convolution, float32. Build with -DCONV_NHWC=0 (activations
// N,C,H,W; weights O,C/G,KH,KW) or -DCONV_NHWC=1 (activations N,H,W,C;
// weights O,KH,KW,C/G). All arrays are C-contiguous in that axis order.
#ifndef CONV_NHWC
#error "build with -DCONV_NHWC=0 (NCHW / OIHW) or -DCONV_NHWC=1 (NHWC / OHWI)"
#endif

struct Conv {
    int N, C, H, W;            // input: batch, channels, height, width
    int O, KH, KW;             // output channels, kernel height and width
    int Ho, Wo;                // output height and width
    int sh, sw, ph, pw, dh, dw;  // stride, padding, dilation
    int G, Cg, Og;             // groups, input and output channels per group
};

#define CONV_PARAMS                                                        \
    const int N, const int C, const int H, const int W, const int O,       \
    const int KH, const int KW, const int Ho, const int Wo,                \
    const int sh, const int sw, const int ph, const int pw,                \
    const int dh, const int dw, const int G
#define CONV_MAKE                                                          \
    const Conv d = {N, C, H, W, O, KH, KW, Ho, Wo, sh, sw, ph, pw, dh, dw, \
                    G, C / G, O / G}

#define GRID_STRIDE(i, total)                                              \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (total); i += (long long)gridDim.x * blockDim.x)

// Layout: where element (n, c, h, w) of an activation with Cn channels and
// Hn x Wn pixels lies, and the inverse (the coordinates of memory index i);
// where weight element (o, c, kh, kw) lies, and the inverse.
#if CONV_NHWC
__device__ __forceinline__ long long act_index(int n, int c, int h, int w,
                                               int Cn, int Hn, int Wn) {
    return (((long long)n * Hn + h) * Wn + w) * Cn + c;
}
__device__ __forceinline__ void act_coords(long long i, int Cn, int Hn, int Wn,
                                           int& n, int& c, int& h, int& w) {
    c = (int)(i % Cn); i /= Cn;
    w = (int)(i % Wn); i /= Wn;
    h = (int)(i % Hn); n = (int)(i / Hn);
}
__device__ __forceinline__ long long wt_index(const Conv& d, int o, int c, int kh, int kw) {
    return (((long long)o * d.KH + kh) * d.KW + kw) * d.Cg + c;
}
__device__ __forceinline__ void wt_coords(const Conv& d, long long i,
                                          int& o, int& c, int& kh, int& kw) {
    c = (int)(i % d.Cg); i /= d.Cg;
    kw = (int)(i % d.KW); i /= d.KW;
    kh = (int)(i % d.KH); o = (int)(i / d.KH);
}
#else
__device__ __forceinline__ long long act_index(int n, int c, int h, int w,
                                               int Cn, int Hn, int Wn) {
    return (((long long)n * Cn + c) * Hn + h) * Wn + w;
}
__device__ __forceinline__ void act_coords(long long i, int Cn, int Hn, int Wn,
                                           int& n, int& c, int& h, int& w) {
    w = (int)(i % Wn); i /= Wn;
    h = (int)(i % Hn); i /= Hn;
    c = (int)(i % Cn); n = (int)(i / Cn);
}
__device__ __forceinline__ long long wt_index(const Conv& d, int o, int c, int kh, int kw) {
    return (((long long)o * d.Cg + c) * d.KH + kh) * d.KW + kw;
}
__device__ __forceinline__ void wt_coords(const Conv& d, long long i,
                                          int& o, int& c, int& kh, int& kw) {
    kw = (int)(i % d.KW); i /= d.KW;
    kh = (int)(i % d.KH); i /= d.KH;
    c = (int)(i % d.Cg); o = (int)(i / d.Cg);
}
#endif

#define X_AT(n, c, h, w) act_index((n), (c), (h), (w), d.C, d.H, d.W)
#define Y_AT(n, o, h, w) act_index((n), (o), (h), (w), d.O, d.Ho, d.Wo)

// y[n][o][oh][ow] = sum over (c, kh, kw) of x[n][g*Cg + c][ih][iw] * w[o][c][kh][kw]
// (+ bias[o], added last), ih = oh*sh - ph + kh*dh, iw = ow*sw - pw + kw*dw,
// g = o / Og. One thread per element of y.
extern "C" __global__ void conv2d_fwd_f32(
    const float* __restrict__ x, const float* __restrict__ wt,
    const float* __restrict__ bias, float* __restrict__ y,
    const int has_bias, CONV_PARAMS)
{
    CONV_MAKE;
    const long long total = (long long)d.N * d.O * d.Ho * d.Wo;
    GRID_STRIDE(i, total) {
        int n, o, oh, ow;
        act_coords(i, d.O, d.Ho, d.Wo, n, o, oh, ow);
        const int c0 = (o / d.Og) * d.Cg;  // first input channel of o's group
        float acc = -0.0f;
        for (int c = 0; c < d.Cg; ++c) {
            for (int kh = 0; kh < d.KH; ++kh) {
                const int ih = oh * d.sh - d.ph + kh * d.dh;
                if (ih < 0 || ih >= d.H) continue;
                for (int kw = 0; kw < d.KW; ++kw) {
                    const int iw = ow * d.sw - d.pw + kw * d.dw;
                    if (iw < 0 || iw >= d.W) continue;
                    acc = fmaf(x[X_AT(n, c0 + c, ih, iw)], wt[wt_index(d, o, c, kh, kw)], acc);
                }
            }
        }
        if (has_bias) acc += bias[o];
        y[Y_AT(n, o, oh, ow)] = acc;
    }
}

// grad_x[n][ci][ih][iw] = sum over the taps (o, kh, kw) of ci's group with
// oh*sh = ih + ph - kh*dh and ow*sw = iw + pw - kw*dw for an output pixel
// (oh, ow) of g[n][o][oh][ow] * w[o][ci - g*Cg][kh][kw], in order of (o, kh, kw).
// One thread per element of grad_x.
extern "C" __global__ void conv2d_dgrad_f32(
    const float* __restrict__ go, const float* __restrict__ wt,
    float* __restrict__ gx, CONV_PARAMS)
{
    CONV_MAKE;
    const long long total = (long long)d.N * d.C * d.H * d.W;
    GRID_STRIDE(i, total) {
        int n, ci, ih, iw;
        act_coords(i, d.C, d.H, d.W, n, ci, ih, iw);
        const int g = ci / d.Cg, c = ci - g * d.Cg;
        float acc = -0.0f;
        for (int oo = 0; oo < d.Og; ++oo) {
            const int o = g * d.Og + oo;
            for (int kh = 0; kh < d.KH; ++kh) {
                const int th = ih + d.ph - kh * d.dh;  // = oh * sh for a contributing tap
                if (th < 0 || th % d.sh != 0) continue;
                const int oh = th / d.sh;
                if (oh >= d.Ho) continue;
                for (int kw = 0; kw < d.KW; ++kw) {
                    const int tw = iw + d.pw - kw * d.dw;  // = ow * sw
                    if (tw < 0 || tw % d.sw != 0) continue;
                    const int ow = tw / d.sw;
                    if (ow >= d.Wo) continue;
                    acc = fmaf(go[Y_AT(n, o, oh, ow)], wt[wt_index(d, o, c, kh, kw)], acc);
                }
            }
        }
        gx[X_AT(n, ci, ih, iw)] = acc;
    }
}

// out[i] = value for i < count (the start of an atomic accumulation).
extern "C" __global__ void conv2d_fill_f32(
    float* __restrict__ out, const long long count, const float value)
{
    GRID_STRIDE(i, count) out[i] = value;
}

// grad_w[o][c][kh][kw] += g[n][o][oh][ow] * x[n][g*Cg + c][ih][iw] by atomicAdd,
// one thread per element of g (so the order of the additions is not fixed).
extern "C" __global__ void conv2d_wgrad_atomic_f32(
    const float* __restrict__ x, const float* __restrict__ go,
    float* gw, CONV_PARAMS)
{
    CONV_MAKE;
    const long long total = (long long)d.N * d.O * d.Ho * d.Wo;
    GRID_STRIDE(i, total) {
        int n, o, oh, ow;
        act_coords(i, d.O, d.Ho, d.Wo, n, o, oh, ow);
        const float g = go[Y_AT(n, o, oh, ow)];
        const int c0 = (o / d.Og) * d.Cg;
        for (int c = 0; c < d.Cg; ++c) {
            for (int kh = 0; kh < d.KH; ++kh) {
                const int ih = oh * d.sh - d.ph + kh * d.dh;
                if (ih < 0 || ih >= d.H) continue;
                for (int kw = 0; kw < d.KW; ++kw) {
                    const int iw = ow * d.sw - d.pw + kw * d.dw;
                    if (iw < 0 || iw >= d.W) continue;
                    atomicAdd(&gw[wt_index(d, o, c, kh, kw)],
                              __fmul_rn(g, x[X_AT(n, c0 + c, ih, iw)]));
                }
            }
        }
    }
}

// Phase 1 of the deterministic grad_w: ws[k * nw + j] = sum over the positions
// p = (n*Ho + oh)*Wo + ow in [k*chunk, min((k+1)*chunk, N*Ho*Wo)), in order,
// of g[n][o][oh][ow] * x[n][g*Cg + c][ih][iw], where j is the memory index of
// weight element (o, c, kh, kw) and nw the number of weight elements.
// One thread per (k, j).
extern "C" __global__ void conv2d_wgrad_partial_f32(
    const float* __restrict__ x, const float* __restrict__ go,
    float* __restrict__ ws, const int chunk, const int chunks, CONV_PARAMS)
{
    CONV_MAKE;
    const long long nw = (long long)d.O * d.Cg * d.KH * d.KW;
    const long long positions = (long long)d.N * d.Ho * d.Wo;
    const long long total = nw * chunks;
    GRID_STRIDE(i, total) {
        const long long k = i / nw, j = i - k * nw;
        int o, c, kh, kw;
        wt_coords(d, j, o, c, kh, kw);
        const int ci = (o / d.Og) * d.Cg + c;
        const long long p0 = k * chunk;
        const long long p1 = (p0 + chunk < positions) ? p0 + chunk : positions;
        float acc = -0.0f;
        for (long long p = p0; p < p1; ++p) {
            const int ow = (int)(p % d.Wo);
            const long long t = p / d.Wo;
            const int oh = (int)(t % d.Ho), n = (int)(t / d.Ho);
            const int ih = oh * d.sh - d.ph + kh * d.dh;
            const int iw = ow * d.sw - d.pw + kw * d.dw;
            if (ih < 0 || ih >= d.H || iw < 0 || iw >= d.W) continue;
            acc = fmaf(go[Y_AT(n, o, oh, ow)], x[X_AT(n, ci, ih, iw)], acc);
        }
        ws[i] = acc;
    }
}

// Phase 2: grad_w[j] = ws[0 * nw + j] + ws[1 * nw + j] + ... in order of k.
extern "C" __global__ void conv2d_wgrad_reduce_f32(
    const float* __restrict__ ws, float* __restrict__ gw,
    const long long nw, const int chunks)
{
    GRID_STRIDE(j, nw) {
        float acc = -0.0f;
        for (int k = 0; k < chunks; ++k) acc += ws[(long long)k * nw + j];
        gw[j] = acc;
    }
}

// grad_b[o] = sum over (n, oh, ow), in order, of g[n][o][oh][ow].
extern "C" __global__ void conv2d_bgrad_f32(
    const float* __restrict__ go, float* __restrict__ gb, CONV_PARAMS)
{
    CONV_MAKE;
    GRID_STRIDE(o, (long long)d.O) {
        float acc = -0.0f;
        for (int n = 0; n < d.N; ++n)
            for (int oh = 0; oh < d.Ho; ++oh)
                for (int ow = 0; ow < d.Wo; ++ow)
                    acc += go[Y_AT(n, (int)o, oh, ow)];
        gb[o] = acc;
    }
}
"""

_KERNEL_NAMES = (
    "conv2d_fwd_f32",
    "conv2d_dgrad_f32",
    "conv2d_fill_f32",
    "conv2d_wgrad_atomic_f32",
    "conv2d_wgrad_partial_f32",
    "conv2d_wgrad_reduce_f32",
    "conv2d_bgrad_f32",
)
_BLOCK = 256
_MAX_BLOCKS = 1 << 20  # grid-stride loops cover the rest
#: deterministic grad_weight: positions per run at least, runs at most, and
#: workspace elements at most (runs * weight elements; 256 MiB of float32)
_DET_CHUNK = 256
_DET_MAX_CHUNKS = 1024
_DET_MAX_WORKSPACE = 1 << 26


@functools.cache
def _kernels(device_id: int, layout: str) -> dict[str, Any]:
    """The compiled kernels of :data:`CONV2D_SOURCE` for one device and layout."""
    import cupy

    flag = CONV_LAYOUTS[layout][1]
    with cupy.cuda.Device(device_id):
        module = cupy.RawModule(
            code=CONV2D_SOURCE, options=("--std=c++14", f"-DCONV_NHWC={flag}")
        )
        return {name: module.get_function(name) for name in _KERNEL_NAMES}


def _launch(name: str, layout: str, total: int, args: tuple) -> None:
    """Launch kernel ``name`` over ``total`` elements on the current device and
    wait, so that a launch or execution error is raised here, naming the kernel."""
    import cupy

    if total <= 0:
        return
    device = cupy.cuda.Device()
    grid = (min(math.ceil(total / _BLOCK), _MAX_BLOCKS),)
    block = (_BLOCK,)
    errors = (cupy.cuda.driver.CUDADriverError, cupy.cuda.runtime.CUDARuntimeError)
    try:
        _kernels(device.id, layout)[name](grid, block, args)
        cupy.cuda.get_current_stream().synchronize()
    except errors as exc:
        raise KernelMismatch(
            f"cupy kernel {name} ({layout}) failed on device {device.id} with "
            f"grid={grid}, block={block}: {exc}"
        ) from exc


def _as_input(arr: Any, name: str, shape: tuple[int, ...] | None = None) -> Any:
    """``arr`` as a C-contiguous float32 cupy array (refusing other dtypes and,
    when given, other shapes)."""
    import cupy

    if not isinstance(arr, cupy.ndarray) or arr.dtype != np.float32:
        got = f"{arr.dtype}" if isinstance(arr, cupy.ndarray) else type(arr).__name__
        raise InvalidArgument(
            f"cupy-fp32 conv2d: input {name!r} must be a float32 cupy array, got {got}; "
            "make it with get_backend('cupy').to_device(host, 'fp32', 'C')"
        )
    if shape is not None and tuple(arr.shape) != tuple(shape):
        raise InvalidArgument(
            f"cupy-fp32 conv2d: {name}.shape={tuple(arr.shape)} must be {tuple(shape)}"
        )
    return cupy.ascontiguousarray(arr)


def _poisoned(shape: tuple[int, ...]) -> Any:
    import cupy

    return cupy.full(shape, np.nan, dtype=np.float32)


def forward(geom: ConvGeometry, x: Any, weight: Any, bias: Any = None) -> Any:
    """``y = conv2d(x, weight) (+ bias)`` by ``conv2d_fwd_f32``, in ``geom.layout``."""
    import cupy

    x = _as_input(x, "x", geom.shape("x"))
    weight = _as_input(weight, "weight", geom.shape("weight"))
    if bias is not None:
        bias = _as_input(bias, "bias", geom.shape("bias"))
    y = _poisoned(geom.shape("y"))
    b = cupy.zeros(1, dtype=np.float32) if bias is None else bias
    _launch("conv2d_fwd_f32", geom.layout, y.size,
            (x, weight, b, y, np.int32(bias is not None), *geom.args()))
    return y


def grad_input(geom: ConvGeometry, grad_output: Any, weight: Any) -> Any:
    """``grad_input`` for ``grad_output`` by ``conv2d_dgrad_f32``, in ``geom.layout``."""
    g = _as_input(grad_output, "grad_output", geom.shape("grad_output"))
    weight = _as_input(weight, "weight", geom.shape("weight"))
    gx = _poisoned(geom.shape("x"))
    _launch("conv2d_dgrad_f32", geom.layout, gx.size, (g, weight, gx, *geom.args()))
    return gx


def _det_chunking(positions: int, weights: int) -> tuple[int, int]:
    """(positions per run, runs) of the two-phase grad_weight: runs of at least
    :data:`_DET_CHUNK` positions, at most :data:`_DET_MAX_CHUNKS` runs and a
    workspace of at most :data:`_DET_MAX_WORKSPACE` floats; fixed by the shape
    alone, so the summation order is too."""
    most = min(_DET_MAX_CHUNKS, _DET_MAX_WORKSPACE // weights)
    chunks = max(1, min(math.ceil(positions / _DET_CHUNK), most))
    chunk = math.ceil(positions / chunks)
    return chunk, math.ceil(positions / chunk)


def grad_weight(
    geom: ConvGeometry, x: Any, grad_output: Any, *, deterministic: bool = False
) -> Any:
    """``grad_weight`` for ``grad_output``, in ``geom.layout``'s weight order.

    ``deterministic=False``: ``conv2d_fill_f32`` then ``conv2d_wgrad_atomic_f32``
    (atomicAdd, order not fixed); True: ``conv2d_wgrad_partial_f32`` then
    ``conv2d_wgrad_reduce_f32`` (a fixed order, bit-identical reruns).
    """
    x = _as_input(x, "x", geom.shape("x"))
    g = _as_input(grad_output, "grad_output", geom.shape("grad_output"))
    gw = _poisoned(geom.shape("weight"))
    nw = gw.size
    if not deterministic:
        _launch("conv2d_fill_f32", geom.layout, nw, (gw, np.int64(nw), np.float32(-0.0)))
        _launch("conv2d_wgrad_atomic_f32", geom.layout, g.size, (x, g, gw, *geom.args()))
        return gw
    chunk, chunks = _det_chunking(geom.positions, nw)
    ws = _poisoned((chunks, nw))
    _launch("conv2d_wgrad_partial_f32", geom.layout, ws.size,
            (x, g, ws, np.int32(chunk), np.int32(chunks), *geom.args()))
    _launch("conv2d_wgrad_reduce_f32", geom.layout, nw,
            (ws, gw, np.int64(nw), np.int32(chunks)))
    return gw


def grad_bias(geom: ConvGeometry, grad_output: Any) -> Any:
    """``grad_bias``: ``grad_output`` summed over ``(n, oh, ow)`` by ``conv2d_bgrad_f32``."""
    g = _as_input(grad_output, "grad_output", geom.shape("grad_output"))
    gb = _poisoned((geom.O,))
    _launch("conv2d_bgrad_f32", geom.layout, geom.O, (g, gb, *geom.args()))
    return gb


def conv2d(
    x: Any,
    weight: Any,
    grad_output: Any,
    bias: Any = None,
    *,
    params: Mapping[str, Any] | None = None,
    stride: Any = None,
    padding: Any = None,
    dilation: Any = None,
    groups: int | None = None,
    layout: str = "NCHW",
    deterministic: bool = False,
    **sizes: Any,
) -> dict[str, Any]:
    """``y = conv2d(x, weight) (+ bias)`` and its gradients for ``grad_output``.

    Parameters
    ----------
    x, weight, grad_output, bias : cupy.ndarray
        float32, in ``layout``: ``x`` and ``grad_output`` ``(N, C, H, W)`` /
        ``(N, O, Ho, Wo)`` for ``"NCHW"``, ``(N, H, W, C)`` / ``(N, Ho, Wo, O)``
        for ``"NHWC"``; ``weight`` ``(O, C/groups, kH, kW)`` (OIHW) or
        ``(O, kH, kW, C/groups)`` (OHWI); ``bias`` ``(O,)`` or None.
    params : mapping or None
        The case's op parameters, as the runner passes them: the geometry
        below, and sizes and the ``bias`` flag, checked against the arrays.
    stride, padding, dilation : int or (int, int) or None
        None: from ``params``, else 1, 0, 1.
    groups : int or None
        None: from ``params``, else ``C // (weight's C/groups)``.
    layout : str
        ``"NCHW"`` or ``"NHWC"``.
    deterministic : bool
        grad_weight by the two-phase kernels instead of atomicAdd.
    **sizes
        The op's size parameters (``batch``, ``in_channels``, ...), if given,
        must match the arrays.

    Returns
    -------
    dict
        float32 cupy arrays ``y``, ``grad_input``, ``grad_weight`` and, with a
        bias, ``grad_bias``, in ``layout`` (C-contiguous).
    """
    geom = resolve_geometry(
        tuple(x.shape), tuple(weight.shape), has_bias=bias is not None, layout=layout,
        params=params, stride=stride, padding=padding, dilation=dilation, groups=groups,
        **sizes,
    )
    out = {
        "y": forward(geom, x, weight, bias),
        "grad_input": grad_input(geom, grad_output, weight),
        "grad_weight": grad_weight(geom, x, grad_output, deterministic=deterministic),
    }
    if bias is not None:
        out["grad_bias"] = grad_bias(geom, grad_output)
    return out


def _layouts(layout: str) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """A target's per-input axis orders and per-output axis orders."""
    wlay = CONV_LAYOUTS[layout][0]
    inputs: dict[str, tuple[str, ...]] = {
        "x": (layout,), "weight": (wlay,), "grad_output": (layout,), "bias": ("C",)
    }
    outputs = {"y": layout, "grad_input": layout, "grad_weight": wlay}  # grad_bias: (O,)
    return inputs, outputs


def _targets() -> tuple[Target, ...]:
    # CuPy compiles every kernel with -ftz=true: subnormal inputs may read as zero
    model = get_model("fp32", flush_subnormal_inputs=True)
    available = get_backend("cupy").available
    out = []
    for layout in CONV_LAYOUTS:
        inputs, outputs = _layouts(layout)
        for det in (False, True):
            how = ("two-phase fixed-order grad_weight" if det
                   else "atomicAdd grad_weight (order not fixed)")
            out.append(
                Target(
                    name=f"cupy-fp32-{layout.lower()}" + ("-det" if det else ""),
                    op="conv2d",
                    backend="cupy",
                    precision=model.with_(deterministic_runs=True) if det else model,
                    fn=partial(conv2d, layout=layout, deterministic=det),
                    layouts=inputs,
                    output_layouts=outputs,
                    available=available,
                    description=(f"hand-written direct conv2d CUDA kernels (CuPy RawModule), "
                                 f"{layout}/{CONV_LAYOUTS[layout][0]}, fp32 fmaf, {how}; "
                                 "all outputs"),
                )
            )
    return tuple(out)


#: the CuPy conv2d targets: NCHW and NHWC, each with atomic and two-phase grad_weight
TARGETS: tuple[Target, ...] = _targets()
