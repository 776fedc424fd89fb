"""Rules for max and average pooling (1-D, 2-D and 3-D; adaptive average pooling)
and their backward ops.

A pooling window is gathered from the padded input (``-inf`` padding for max,
``0`` for average) with the op's kernel size, stride, padding, dilation and
``ceil_mode`` (the last window may hang over the end; it never starts in the
right padding, as in torch).

* Max pooling selects: no rounding, the radius is the largest radius in the
  window. Its index (a flat position in the input's spatial plane) is
  set-valued (:class:`._common.IndexSet`): where values tie within their radii a
  kernel may return any of them.
* Average pooling sums the window (a contraction with ones over its real taps:
  padding zeros are structural, not terms) and divides by the window's count:
  its size with ``count_include_pad`` (clipped to the padded input), the real taps
  without, or ``divisor_override``. The kernel may divide, or multiply by the
  rounded reciprocal. Adaptive pooling's window ``i`` along an axis of length
  ``L`` with ``O`` outputs covers ``[floor(i L / O), ceil((i + 1) L / O))``.
* The backward ops add each output gradient into the input positions its window
  read (max: the selected one; average: every tap, divided by the count). An
  input position fed by ``c`` windows is a sum of ``c`` terms, bounded by
  ``gamma_{c-1}(u)`` times their magnitudes (``u`` of the storage format under
  the per-op claim: eager torch's CPU kernels add into the gradient tensor);
  where the forward's selection is set-valued, every admissible position may
  receive the gradient.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ... import elementwise as ew
from ...precision import gamma
from ...tracked import U64, Tracked, bounded, exact, folded, matmul
from ...xp import add_at, like
from ..rules import RuleContext, rule
from ._common import index_set, reach, tmap_all
from ._windows import Windows, windows
from .elementwise import either_of
from .reductions import arg_lanes

__all__ = ["scatter_add"]


def _max_pool(ctx: RuleContext, x: Tracked, d: int, kernel: Any, stride: Any, padding: Any,
              dilation: Any, ceil_mode: bool) -> tuple[Tracked, np.ndarray]:
    w = windows(x, d, kernel, stride, padding, dilation, ceil_mode)
    x = folded(x)
    win = tmap_all(x, lambda a: w.gather(a, 0.0))
    vals = w.gather(x.value, -np.inf)
    win = replace(win, value=vals, n=1)
    value = ew.amax(win, axis=-1)
    idx_tap, allowed = arg_lanes(vals, reach(win))
    pos = w.positions()
    pos = np.broadcast_to(pos, vals.shape)
    allowed = allowed & (pos >= 0)
    # a window of -inf ties everywhere: its index is a real tap (the first, as torch's)
    first = np.argmax(allowed, axis=-1)
    idx_tap = np.where(np.take_along_axis(allowed, idx_tap[..., None], -1)[..., 0],
                       idx_tap, first)
    idx = np.take_along_axis(pos, idx_tap[..., None], axis=-1)[..., 0]
    return value, index_set(idx, allowed, pos)


@rule("aten.max_pool2d_with_indices.default")
def max_pool2d_rule(ctx: RuleContext, x: Tracked, kernel_size: Any, stride: Any = (),
                    padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False) -> Any:
    return _max_pool(ctx, x, 2, kernel_size, stride, padding, dilation, ceil_mode)


@rule("aten.max_pool3d_with_indices.default")
def max_pool3d_rule(ctx: RuleContext, x: Tracked, kernel_size: Any, stride: Any = (),
                    padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False) -> Any:
    return _max_pool(ctx, x, 3, kernel_size, stride, padding, dilation, ceil_mode)


def _divisors(w: Windows, count_include_pad: bool, divisor_override: Any) -> np.ndarray:
    if divisor_override:
        return np.full(w.out, float(divisor_override))
    if count_include_pad:
        return w.clipped_counts()
    return (w.positions() >= 0).sum(-1).astype(np.float64)


def _avg_pool(ctx: RuleContext, x: Tracked, d: int, kernel: Any, stride: Any, padding: Any,
              ceil_mode: bool, count_include_pad: bool, divisor_override: Any) -> Tracked:
    m = ctx.model
    w = windows(x, d, kernel, stride, padding, 1, ceil_mode)
    win = tmap_all(folded(x), lambda a: w.gather(a, 0.0))
    real = (w.positions() >= 0).sum(-1)
    flat = tmap_all(win, lambda a: a[..., None, :])  # (..., *out, 1, K)
    s = matmul(flat, exact(np.ones((w.taps, 1))), m, terms=real[..., None, None])
    s = tmap_all(s, lambda a: a[..., 0, 0])
    div = exact(np.broadcast_to(_divisors(w, count_include_pad, divisor_override), s.shape))
    return either_of(ew.div(s, div, m), ew.mul(s, ew.div(exact(np.ones(())), div, m), m))


@rule("aten.avg_pool2d.default")
def avg_pool2d_rule(ctx: RuleContext, x: Tracked, kernel_size: Any, stride: Any = (),
                    padding: Any = 0, ceil_mode: bool = False, count_include_pad: bool = True,
                    divisor_override: Any = None) -> Tracked:
    return _avg_pool(ctx, x, 2, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


@rule("aten.avg_pool3d.default")
def avg_pool3d_rule(ctx: RuleContext, x: Tracked, kernel_size: Any, stride: Any = (),
                    padding: Any = 0, ceil_mode: bool = False, count_include_pad: bool = True,
                    divisor_override: Any = None) -> Tracked:
    return _avg_pool(ctx, x, 3, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


# -- backward --------------------------------------------------------------------------

def scatter_add(ctx: RuleContext, g: Tracked, targets: np.ndarray, shape: tuple[int, ...],
                d: int) -> Tracked:
    """The input gradient of shape ``shape``: each ``g`` element (``(..., *out, K)``)
    added into the flat spatial position ``targets`` names (-1: none)."""
    g = folded(g)
    lead = shape[: len(shape) - d]
    plane = int(np.prod(shape[len(shape) - d:]))
    rows = int(np.prod(lead)) if lead else 1
    tg = np.broadcast_to(targets, g.value.shape).reshape(rows, -1)
    ok = tg >= 0
    col = np.where(ok, tg, 0) + (np.arange(rows) * plane)[:, None]
    xp = g.xp
    at, ok_here = like(col[ok], g.value), like(ok, g.value)

    def add_up(a: Any) -> Any:
        out = xp.zeros(rows * plane)
        add_at(out, at, xp.broadcast_to(a, g.value.shape).reshape(rows, -1)[ok_here])
        return out.reshape(shape)
    with np.errstate(invalid="ignore"):
        value, mag = add_up(g.value), add_up(xp.abs(g.value))
        # the number of terms of each element (on the host, as accumulation lengths are)
        count = np.bincount(col[ok], minlength=rows * plane).reshape(shape).astype(np.float64)
        det, prob, ref = add_up(g.det), add_up(g.prob), add_up(g.ref_err)
        h = np.maximum(count - 1, 0)
        model = ctx.running_model()  # the storage format where eager adds into the gradient
        u = model.acc_unit()
        g_acc, g_64 = like(gamma(h, u), g.value), like(gamma(h, U64), g.value)
        tiny, exact_here = like(h * model.accumulate.tiny, g.value), like(h == 0, g.value)
        rounding = xp.where(exact_here, 0.0, g_acc * (mag + det)) + tiny
        ref = ref + xp.where(exact_here, 0.0, g_64 * mag)
        # an exact infinity or NaN among terms whose finite rest cannot overflow: the
        # sum is what IEEE makes of them (float64's sum here), exactly
        wild = ~xp.isfinite(g.value) & (xp.broadcast_to(g.det + g.ref_err, g.value.shape) == 0)
        rest = add_up(xp.where(wild, 0.0, xp.abs(g.value) + g.det + g.ref_err))
        special = (add_up(xp.where(wild, 1.0, 0.0)) > 0) & (rest < model.accumulate.max / 2)
        det, prob, ref = (xp.where(special, 0.0, a) for a in (det, prob, ref))
        exact_here = exact_here | special
        det = xp.where(exact_here, det, det + rounding)
        prob = xp.where(exact_here, prob, prob + rounding)
    return bounded(value, det, prob, ref_err=ref, mag=mag,
                   n=np.maximum(count, 1).astype(np.int64))


def _max_pool_backward(ctx: RuleContext, grad: Tracked, x: Any, d: int, kernel: Any,
                       stride: Any, padding: Any, dilation: Any, ceil_mode: bool,
                       indices: np.ndarray) -> Tracked:
    shape = tuple(x.shape)
    gk = tmap_all(folded(grad), lambda a: a[..., None])  # (..., *out, 1)
    idx = np.asarray(indices, dtype=np.int64)[..., None]
    out = scatter_add(ctx, gk, idx, shape, d)
    cands = getattr(indices, "candidates", None)
    if cands is None:
        return out
    others = (cands >= 0) & (cands != idx)  # admissible positions not chosen
    if not others.any():
        return out
    # the admissible answers are a closed set: a kernel that gives one of them exactly
    # lies strictly inside (one float64 ulp up)
    span = np.nextafter(np.abs(gk.value) + gk.det + gk.ref_err, np.inf)  # (..., *out, 1)
    zero_g = bounded(np.zeros(cands.shape), np.where(others, span, 0.0))
    spread = scatter_add(ctx, zero_g, np.where(others, cands, -1), shape, d)
    # where the chosen position may not receive it, it may lose the gradient too
    lost = scatter_add(ctx, bounded(np.zeros(idx.shape),
                                    np.where(others.any(-1, keepdims=True), span, 0.0)),
                       idx, shape, d)
    return replace(out, det=out.det + spread.det + lost.det,
                   prob=out.prob + spread.prob + lost.prob)


@rule("aten.max_pool2d_with_indices_backward.default")
def max_pool2d_backward_rule(ctx: RuleContext, grad: Tracked, x: Any, kernel_size: Any,
                             stride: Any, padding: Any, dilation: Any, ceil_mode: bool,
                             indices: np.ndarray) -> Tracked:
    return _max_pool_backward(ctx, grad, x, 2, kernel_size, stride, padding, dilation,
                              ceil_mode, indices)


@rule("aten.max_pool3d_with_indices_backward.default")
def max_pool3d_backward_rule(ctx: RuleContext, grad: Tracked, x: Any, kernel_size: Any,
                             stride: Any, padding: Any, dilation: Any, ceil_mode: bool,
                             indices: np.ndarray) -> Tracked:
    return _max_pool_backward(ctx, grad, x, 3, kernel_size, stride, padding, dilation,
                              ceil_mode, indices)


def _avg_pool_backward(ctx: RuleContext, grad: Tracked, x: Any, d: int, kernel: Any,
                       stride: Any, padding: Any, ceil_mode: bool, count_include_pad: bool,
                       divisor_override: Any) -> Tracked:
    m = ctx.model
    w = windows(x, d, kernel, stride, padding, 1, ceil_mode)
    div = exact(np.broadcast_to(_divisors(w, count_include_pad, divisor_override), grad.shape))
    share = either_of(ew.div(grad, div, m), ew.mul(grad, ew.div(exact(np.ones(())), div, m), m))
    per_tap = tmap_all(share, lambda a: np.broadcast_to(a[..., None], a.shape + (w.taps,)))
    return scatter_add(ctx, per_tap, w.positions(), tuple(x.shape), d)


@rule("aten.avg_pool2d_backward.default")
def avg_pool2d_backward_rule(ctx: RuleContext, grad: Tracked, x: Any, kernel_size: Any,
                             stride: Any, padding: Any, ceil_mode: bool,
                             count_include_pad: bool, divisor_override: Any) -> Tracked:
    return _avg_pool_backward(ctx, grad, x, 2, kernel_size, stride, padding, ceil_mode,
                              count_include_pad, divisor_override)


@rule("aten.avg_pool3d_backward.default")
def avg_pool3d_backward_rule(ctx: RuleContext, grad: Tracked, x: Any, kernel_size: Any,
                             stride: Any, padding: Any, ceil_mode: bool,
                             count_include_pad: bool, divisor_override: Any) -> Tracked:
    return _avg_pool_backward(ctx, grad, x, 3, kernel_size, stride, padding, ceil_mode,
                              count_include_pad, divisor_override)


# -- 1-D and adaptive average pooling ------------------------------------------------------

def _h1(t: Tracked) -> Tracked:
    return tmap_all(folded(t), lambda a: a[..., None, :])


@rule("aten.avg_pool1d.default")
def avg_pool1d_rule(ctx: RuleContext, x: Tracked, kernel_size: Any, stride: Any = (),
                    padding: Any = 0, ceil_mode: bool = False,
                    count_include_pad: bool = True) -> Tracked:
    def one(v: Any, default: int) -> list[int]:
        vals = list(v) if isinstance(v, (list, tuple)) else [v]
        return [default, int(vals[0])] if vals else []
    k = one(kernel_size, 1)
    y = _avg_pool(ctx, _h1(x), 2, k, one(stride, 1) or k, one(padding, 0), ceil_mode,
                  count_include_pad, None)
    return tmap_all(y, lambda a: a[..., 0, :])


def _adaptive(spatial: Sequence[int], out: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """``(*out, K)`` flat input positions of each adaptive window (-1: none past its
    end, K the longest window) and ``(*out,)`` the window sizes: along each axis
    window ``i`` covers ``[floor(i L / O), ceil((i + 1) L / O))``."""
    d = len(spatial)
    axes = []
    for size, o in zip(spatial, out, strict=True):
        start = (np.arange(o) * size) // o
        end = -((-(np.arange(o) + 1) * size) // o)
        k = int((end - start).max())
        idx = start[:, None] + np.arange(k)[None, :]
        axes.append(np.where(idx < end[:, None], idx, -1))
    pos = np.zeros((1,) * (2 * d), dtype=np.int64)
    valid = np.ones((1,) * (2 * d), dtype=bool)
    stride = 1
    for i in reversed(range(d)):
        shape = [1] * (2 * d)
        shape[i], shape[d + i] = axes[i].shape
        a = axes[i].reshape(shape)
        pos = pos + np.where(a >= 0, a, 0) * stride
        valid = valid & (a >= 0)
        stride *= spatial[i]
    pos = np.where(valid, pos, -1)
    outs = tuple(int(o) for o in out)
    flat = pos.reshape(outs + (-1,))
    return flat, (flat >= 0).sum(-1)


def _adaptive_avg(ctx: RuleContext, x: Tracked, out: Sequence[int]) -> Tracked:
    m = ctx.model
    d = len(out)
    spatial = x.shape[-d:]
    pos, count = _adaptive(spatial, out)
    x = folded(x)
    lead = x.shape[:-d]

    def gather(a: np.ndarray) -> np.ndarray:
        flat = np.broadcast_to(a, x.shape).reshape(lead + (-1,))
        flat = np.concatenate([flat, np.zeros_like(flat[..., :1])], axis=-1)  # -1 reads the 0
        return flat[..., pos]
    win = tmap_all(x, gather)  # (..., *out, K)
    flat = tmap_all(win, lambda a: a[..., None, :])
    s = matmul(flat, exact(np.ones((pos.shape[-1], 1))), m, terms=count[..., None, None])
    s = tmap_all(s, lambda a: a[..., 0, 0])
    div = exact(np.broadcast_to(count.astype(np.float64), s.shape))
    return either_of(ew.div(s, div, m), ew.mul(s, ew.div(exact(np.ones(())), div, m), m))


@rule("aten._adaptive_avg_pool2d.default")
def adaptive_avg_pool2d_rule(ctx: RuleContext, x: Tracked, output_size: Sequence[int]) -> Tracked:
    return _adaptive_avg(ctx, x, [int(o) for o in output_size])


@rule("aten.adaptive_avg_pool1d.default")
def adaptive_avg_pool1d_rule(ctx: RuleContext, x: Tracked, output_size: Sequence[int]) -> Tracked:
    return _adaptive_avg(ctx, x, [int(o) for o in output_size])


@rule("aten._adaptive_avg_pool2d_backward.default")
def adaptive_avg_pool2d_backward_rule(ctx: RuleContext, grad: Tracked, x: Any) -> Tracked:
    m = ctx.model
    pos, count = _adaptive(tuple(x.shape[-2:]), grad.shape[-2:])
    div = exact(np.broadcast_to(count.astype(np.float64), grad.shape))
    share = either_of(ew.div(grad, div, m), ew.mul(grad, ew.div(exact(np.ones(())), div, m), m))
    per_tap = tmap_all(share, lambda a: np.broadcast_to(a[..., None], a.shape + (pos.shape[-1],)))
    return scatter_add(ctx, per_tap, pos, tuple(x.shape), 2)
