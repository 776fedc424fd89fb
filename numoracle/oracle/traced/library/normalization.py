"""Rules for the native normalisations: layer norm, group norm and batch norm
(training and inference, the functional form with its running statistics).

Each normalises ``x`` over its statistics axes::

    mean = sum(x) / n
    var  = sum((x - mean)^2) / n        (two-pass)   or   sum(x^2)/n - mean^2   (one-pass)
    rstd = rsqrt(var + eps)
    out  = (x - mean) rstd [* weight] [+ bias]

composed from the primitives' bounds (:func:`.reductions.variance`), so the
variance algorithm is a claim (``ctx.model.variance``), not a constant: the
one-pass form's cancellation is in its bound, and a kernel that uses it fails a
two-pass claim where the cancellation is large. The composed bound is
componentwise: the mean's radius enters every deviation, which also covers
kernels that update the mean as they go (Welford's algorithm); a kernel that
folds the statistics and the affine weights into ``x * scale + shift`` (torch's
CPU kernels) rounds relative to ``|x| rstd`` and ``|mean| rstd``, which the
bound carries too (:func:`normalized`, :func:`affine`).

Under the per-op rounding claim the statistics are computed as eager torch
computes them in bf16 and fp16, every step a tensor of the input's dtype (the
sum, the mean, the variance, ``rstd``), and the output is normalised with the
rounded mean and rstd; a kernel that keeps them wider is within that bound too.

The outputs are torch's: ``(out, mean, rstd)`` with the statistics shaped as
torch saves them; batch norm in inference returns empty statistics; the
functional training form also returns the updated running mean and variance
(``(1 - momentum) running + momentum * batch``, the variance unbiased).

The backward ops compose the same way: with ``xhat = (x - mean) rstd`` and
``gx = grad * weight``, the input gradient is
``rstd (gx - mean(gx) - xhat mean(gx xhat))`` over the statistics axes (batch
norm in inference: ``gx rstd``), the weight gradient ``sum(grad xhat)`` and the
bias gradient ``sum(grad)`` over the other axes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ... import elementwise as ew
from ...tracked import Tracked, add, exact, folded, sub
from ..rules import RuleContext, rule
from . import _norm_rows
from ._common import as_tracked, scaled, tmap_all
from .elementwise import ulps
from .reductions import reduce_mean, reduce_sum, variance

__all__ = ["normalize"]


def _rsqrt(ctx: RuleContext, t: Tracked) -> Tracked:
    return ew.elementary(t, ctx.model, f=lambda v: 1.0 / np.sqrt(v),
                         lipschitz=lambda lo, hi: np.where(lo > 0, 0.5 * lo ** -1.5, np.inf),
                         ulps=ulps(ctx, "rsqrt"))


def _reshape(t: Tracked, shape: Sequence[int]) -> Tracked:
    return tmap_all(t, lambda a: np.reshape(a, tuple(shape)))


def _widened(t: Tracked, extra: Any) -> Tracked:
    with np.errstate(invalid="ignore", over="ignore"):
        return replace(t, det=t.det + extra, prob=t.prob + extra)


def normalized(ctx: RuleContext, x: Tracked, mean: Tracked, rstd: Tracked) -> Tracked:
    """``(x - mean) rstd``, bounded also for a kernel that folds the statistics into
    an affine ``x rstd - mean rstd`` (torch's CPU kernels): its two products round
    relative to ``|x| rstd`` and ``|mean| rstd``, which may cancel."""
    m = ctx.model
    out = ew.mul(sub(x, mean, m), rstd, m)
    with np.errstate(invalid="ignore", over="ignore"):
        scale = np.abs(folded(rstd).value) + rstd.det + rstd.ref_err
        extra = 2.0 * m.acc_unit() * (np.abs(folded(x).value) + np.abs(folded(mean).value)
                                      ) * scale
    return _widened(out, extra)


def fold_magnitude(x: Tracked, mean: Tracked, rstd: Tracked) -> Any:
    """``(|x| + |mean| + 1) rstd`` with their radii: a bound on the size of
    ``rstd`` and of the products a kernel that folds the statistics into
    ``x * scale + shift`` forms (times the weight: ``scale``, ``x * scale``,
    ``mean * scale``)."""
    with np.errstate(invalid="ignore", over="ignore"):
        def top(t: Tracked) -> Any:
            t = folded(t)
            return np.abs(t.value) + t.det + t.ref_err
        return (top(x) + top(mean) + 1.0) * top(rstd)


def affine(ctx: RuleContext, out: Tracked, weight: Any, bias: Any,
           shape: Sequence[int], fold: Any = None) -> Tracked:
    """``out * weight + bias``; a kernel that folds the bias into its shift
    (``bias - mean rstd weight``) rounds that sum too: ``u |bias|`` more. With
    ``fold`` (:func:`fold_magnitude`), where the folded products ``x * scale`` and
    ``mean * scale`` (``scale = weight rstd``) may overflow, the result is not
    bounded (the kernel may make NaN of ``inf - inf``)."""
    m = ctx.model
    if weight is not None:
        w = _reshape(as_tracked(weight, m), shape)
        out = ew.mul(out, w, m)
        if fold is not None:
            with np.errstate(invalid="ignore", over="ignore"):
                big = fold * (np.abs(folded(w).value) + w.det)
                over = np.broadcast_to(big >= m.accumulate.max / 2, out.shape)
            if over.any():
                out = replace(out, det=np.where(over, np.inf, out.det),
                              prob=np.where(over, np.inf, out.prob))
    if bias is not None:
        b = _reshape(as_tracked(bias, m), shape)
        out = _widened(add(out, b, m), m.acc_unit() * np.abs(folded(b).value))
    return out


def streamed_mean(ctx: RuleContext, x: Tracked, dims: tuple[int, ...], top: Any = None
                  ) -> Tracked:
    """The mean over ``dims`` (no keepdim), bounded also for a kernel that updates
    it element by element (Welford: ``m += (x_k - m) / k``, torch's CPU norms),
    whose ``k``-th update rounds three times relative to ``|x_k - m|`` and ``|m|``:
    at most ``(n + 4 (ln n + 1)) u max |x|`` over ``n`` elements, where a sum's
    mean is exact in the exact regime and this is not. ``top``: that largest
    ``|x|`` with its radii where already taken (:func:`._norm_rows.row_top`)."""
    mean = reduce_mean(ctx, x, dims)
    n = int(np.prod([x.shape[d] for d in dims]))
    with np.errstate(invalid="ignore", over="ignore"):
        big = folded(x)
        if top is None:
            top = np.max(np.abs(big.value) + big.det + big.ref_err, axis=dims) if n else 0.0
        extra = (n + 4.0 * (np.log(max(n, 1)) + 1.0)) * ctx.model.acc_unit() * top
    return _widened(mean, extra)


def normalize(ctx: RuleContext, x: Tracked, dims: tuple[int, ...], eps: float,
              weight: Any = None, bias: Any = None, affine_shape: Sequence[int] = ()
              ) -> tuple[Tracked, Tracked, Tracked, Tracked]:
    """``(out, mean, rstd, var)`` over ``dims`` (statistics kept with size-1 axes);
    ``weight`` and ``bias`` reshaped to ``affine_shape`` to broadcast.

    Under the per-op rounding claim every step of the statistics is a tensor
    of the storage format, as in eager torch: the sum and the mean, the sum of
    squared deviations and the variance, ``var + eps`` and ``rstd``; the output
    is normalised with the rounded mean and rstd.

    Over trailing axes on the CPU the elementwise steps run as whole-rule loops
    (:mod:`._norm_rows`: the same bits), the two-pass variance's sum folded into its
    loop (``_norm_rows.FOLD_SUMS``: ``S`` summed in float64, another sound bound)."""
    m, kept = ctx.model, ctx.kept
    kept_shape = tuple(1 if d in dims else s for d, s in enumerate(x.shape))
    loops = _norm_rows.runs(x, dims)
    top = _norm_rows.row_top(x, dims) if loops else None
    mean = kept(streamed_mean(ctx, x, dims, top), 2)
    if loops and m.variance == "two-pass":
        k = int(np.prod([x.shape[d] for d in dims]))
        centre = _reshape(mean, kept_shape)
        total = _norm_rows.deviation_square_sum(ctx, x, centre, dims)
        if total is None:
            total = reduce_sum(ctx, _norm_rows.deviation_squares(ctx, x, centre), dims)
        var = scaled(ctx, total, float(k), divide=True)
    else:
        var, mean = variance(ctx, x, dims, mean=mean)
    var, mean = _reshape(kept(var, 2), kept_shape), _reshape(mean, kept_shape)
    rstd = kept(_rsqrt(ctx, kept(add(var, as_tracked(float(eps), m), m))))
    out = _norm_rows.normalized_affine(ctx, x, mean, rstd, weight, bias, tuple(affine_shape)) \
        if loops else None
    if out is None:
        out = affine(ctx, normalized(ctx, x, mean, rstd), weight, bias, affine_shape,
                     fold_magnitude(x, mean, rstd))
    return out, mean, rstd, var


@rule("aten.native_layer_norm.default")
def layer_norm_rule(ctx: RuleContext, x: Tracked, normalized_shape: Sequence[int],
                    weight: Any, bias: Any, eps: float) -> tuple[Tracked, Tracked, Tracked]:
    nd, k = x.value.ndim, len(normalized_shape)
    dims = tuple(range(nd - k, nd))
    out, mean, rstd, _ = normalize(ctx, x, dims, eps, weight, bias, tuple(normalized_shape))
    return out, mean, rstd


@rule("aten.native_group_norm.default")
def group_norm_rule(ctx: RuleContext, x: Tracked, weight: Any, bias: Any, n: int, c: int,
                    hxw: int, group: int, eps: float) -> tuple[Tracked, Tracked, Tracked]:
    shape = x.shape
    g = _reshape(x, (n, group, (c // group) * hxw))
    ret = normalize(ctx, g, (2,), eps)
    fold = np.reshape(np.broadcast_to(fold_magnitude(g, ret[1], ret[2]), g.shape), (n, c, hxw))
    out = affine(ctx, _reshape(ret[0], (n, c, hxw)), weight, bias, (1, c, 1), fold)
    return _reshape(out, shape), _reshape(ret[1], (n, group)), _reshape(ret[2], (n, group))


def _batch(ctx: RuleContext, x: Tracked, weight: Any, bias: Any, running_mean: Any,
           running_var: Any, training: bool, momentum: float, eps: float
           ) -> tuple[Tracked, ...]:
    m = ctx.model
    c = x.shape[1]
    dims = tuple(d for d in range(x.value.ndim) if d != 1)
    per_channel = (1, c) + (1,) * (x.value.ndim - 2)
    if training:
        out, mean, rstd, var = normalize(ctx, x, dims, eps, weight, bias, per_channel)
        stats = (_reshape(mean, (c,)), _reshape(rstd, (c,)))
        if running_mean is None:
            return (out, *stats)
        k = int(np.prod([x.shape[d] for d in dims]))
        unbiased = scaled(ctx, scaled(ctx, _reshape(var, (c,)), float(k)), float(max(k - 1, 1)),
                          divide=True)
        mom = float(momentum)

        def update(run: Any, batch: Tracked) -> Tracked:
            return add(scaled(ctx, as_tracked(run, m), 1.0 - mom), scaled(ctx, batch, mom), m)
        return (out, *stats, update(running_mean, stats[0]), update(running_var, unbiased))
    mean = _reshape(as_tracked(running_mean, m), per_channel)
    var = _reshape(as_tracked(running_var, m), per_channel)
    rstd = _rsqrt(ctx, add(var, as_tracked(float(eps), m), m))
    out = affine(ctx, normalized(ctx, x, mean, rstd), weight, bias, per_channel,
                 fold_magnitude(x, mean, rstd))
    empty = exact(out.xp.zeros((0,)))
    return out, empty, empty


@rule("aten.native_batch_norm.default", "aten._native_batch_norm_legit.default")
def batch_norm_rule(ctx: RuleContext, x: Tracked, weight: Any, bias: Any, running_mean: Any,
                    running_var: Any, training: bool, momentum: float, eps: float
                    ) -> tuple[Tracked, ...]:
    return _batch(ctx, x, weight, bias, running_mean, running_var, training, momentum,
                  eps)[:3]


@rule("aten._native_batch_norm_legit_functional.default")
def batch_norm_functional_rule(ctx: RuleContext, x: Tracked, weight: Any, bias: Any,
                               running_mean: Any, running_var: Any, training: bool,
                               momentum: float, eps: float) -> tuple[Tracked, ...]:
    out = _batch(ctx, x, weight, bias, running_mean, running_var, training, momentum, eps)
    if len(out) == 3:  # inference: the running statistics unchanged
        m = ctx.model
        return (*out, as_tracked(running_mean, m), as_tracked(running_var, m))
    return out


@rule("aten._native_batch_norm_legit_no_training.default")
def batch_norm_inference_rule(ctx: RuleContext, x: Tracked, weight: Any, bias: Any,
                              running_mean: Any, running_var: Any, momentum: float,
                              eps: float) -> tuple[Tracked, ...]:
    return _batch(ctx, x, weight, bias, running_mean, running_var, False, momentum, eps)[:3]


@rule("aten._native_batch_norm_legit.no_stats")
def batch_norm_no_stats_rule(ctx: RuleContext, x: Tracked, weight: Any, bias: Any,
                             training: bool, momentum: float, eps: float
                             ) -> tuple[Tracked, ...]:
    return _batch(ctx, x, weight, bias, None, None, True, momentum, eps)[:3]


# -- backward --------------------------------------------------------------------------

def _mean_keep(ctx: RuleContext, t: Tracked, dims: tuple[int, ...]) -> Tracked:
    kept = tuple(1 if d in dims else s for d, s in enumerate(t.shape))
    return _reshape(reduce_mean(ctx, t, dims), kept)


def _sum_to(ctx: RuleContext, t: Tracked, dims: tuple[int, ...], shape: Sequence[int]) -> Tracked:
    return _reshape(reduce_sum(ctx, t, dims), shape)


def _input_grad(ctx: RuleContext, gx: Tracked, xhat: Tracked, rstd: Tracked,
                dims: tuple[int, ...]) -> Tracked:
    """``rstd (gx - mean(gx) - xhat mean(gx xhat))`` over ``dims``: the input
    gradient of a normalisation whose statistics are taken over ``dims``."""
    m = ctx.model
    a = _mean_keep(ctx, gx, dims)
    b = _mean_keep(ctx, ew.mul(gx, xhat, m), dims)
    return ew.mul(sub(sub(gx, a, m), ew.mul(xhat, b, m), m), rstd, m)


@rule("aten.native_layer_norm_backward.default")
def layer_norm_backward_rule(ctx: RuleContext, grad: Tracked, x: Tracked,
                             normalized_shape: Sequence[int], mean: Tracked, rstd: Tracked,
                             weight: Any, bias: Any, output_mask: Sequence[bool]
                             ) -> tuple[Tracked | None, ...]:
    m = ctx.model
    nd, k = x.value.ndim, len(normalized_shape)
    dims, lead = tuple(range(nd - k, nd)), tuple(range(nd - k))
    want = (bool(output_mask[0]), bool(output_mask[0]),
            bool(output_mask[1]) and weight is not None)
    gb = _sum_to(ctx, grad, lead, normalized_shape) if (
        output_mask[2] and bias is not None) else None
    merged = _norm_rows.backward_merged(ctx, grad, x, dims, mean, rstd, weight, want[2]) if (
        want[0]) else None
    if merged is not None:  # the sums and the input gradient in one pass
        gi, sum_h = merged
        return gi, (_reshape(sum_h, normalized_shape) if sum_h is not None else None), gb
    folded = _norm_rows.backward_sums(ctx, grad, x, dims, mean, rstd, weight, want)
    if folded is not None:  # the products summed as they are formed: two loops
        weighted, sum_a, sum_b, sum_h = folded
        kept = tuple(1 if d in dims else s for d, s in enumerate(x.shape))
        k = float(np.prod([x.shape[d] for d in dims]))

        def mean_of(t: Tracked) -> Tracked:
            return _reshape(scaled(ctx, t, k, divide=True), kept)
        gi = _norm_rows.input_grad(ctx, x, grad, mean, rstd, mean_of(sum_a), mean_of(sum_b),
                                   weighted) if output_mask[0] else None
        gw = _reshape(sum_h, normalized_shape) if want[2] else None
        return gi, gw, gb
    fast = _norm_rows.backward_products(ctx, grad, x, dims, mean, rstd, weight, want)
    if fast is not None:  # the same bits as below, in two loops around the sums
        gx, gxh, gh = fast
        gi = _norm_rows.input_grad(ctx, x, gx, mean, rstd, _mean_keep(ctx, gx, dims),
                                   _mean_keep(ctx, gxh, dims)) if output_mask[0] else None
        gw = _sum_to(ctx, gh, lead, normalized_shape) if want[2] else None
        return gi, gw, gb
    xhat = ew.mul(sub(x, mean, m), rstd, m)
    gx = grad if weight is None else ew.mul(grad, as_tracked(weight, m), m)
    gi = _input_grad(ctx, gx, xhat, rstd, dims) if output_mask[0] else None
    gw = _sum_to(ctx, ew.mul(grad, xhat, m), lead, normalized_shape) if (
        output_mask[1] and weight is not None) else None
    return gi, gw, gb


@rule("aten.native_group_norm_backward.default")
def group_norm_backward_rule(ctx: RuleContext, grad: Tracked, x: Tracked, mean: Tracked,
                             rstd: Tracked, weight: Any, n: int, c: int, hxw: int, group: int,
                             output_mask: Sequence[bool]) -> tuple[Tracked | None, ...]:
    m = ctx.model
    shape = x.shape
    cg = c // group
    g4, x4 = _reshape(grad, (n, group, cg, hxw)), _reshape(x, (n, group, cg, hxw))
    mu, rs = _reshape(mean, (n, group, 1, 1)), _reshape(rstd, (n, group, 1, 1))
    xhat = ew.mul(sub(x4, mu, m), rs, m)
    gx = g4 if weight is None else ew.mul(g4, _reshape(as_tracked(weight, m),
                                                       (1, group, cg, 1)), m)
    gi = _reshape(_input_grad(ctx, gx, xhat, rs, (2, 3)), shape) if output_mask[0] else None
    gw = _sum_to(ctx, ew.mul(g4, xhat, m), (0, 3), (c,)) if output_mask[1] else None
    gb = _sum_to(ctx, g4, (0, 3), (c,)) if output_mask[2] else None
    return gi, gw, gb


@rule("aten.native_batch_norm_backward.default")
def batch_norm_backward_rule(ctx: RuleContext, grad: Tracked, x: Tracked, weight: Any,
                             running_mean: Any, running_var: Any, save_mean: Any,
                             save_invstd: Any, train: bool, eps: float,
                             output_mask: Sequence[bool]) -> tuple[Tracked | None, ...]:
    m = ctx.model
    c = x.shape[1]
    dims = tuple(d for d in range(x.value.ndim) if d != 1)
    per_channel = (1, c) + (1,) * (x.value.ndim - 2)
    if train:
        mu = _reshape(as_tracked(save_mean, m), per_channel)
        rs = _reshape(as_tracked(save_invstd, m), per_channel)
    else:
        mu = _reshape(as_tracked(running_mean, m), per_channel)
        rs = _rsqrt(ctx, add(_reshape(as_tracked(running_var, m), per_channel),
                             as_tracked(float(eps), m), m))
    xhat = ew.mul(sub(x, mu, m), rs, m)
    gx = grad if weight is None else ew.mul(grad, _reshape(as_tracked(weight, m), per_channel), m)
    gi = None
    if output_mask[0]:
        gi = _input_grad(ctx, gx, xhat, rs, dims) if train else ew.mul(gx, rs, m)
    gw = _sum_to(ctx, ew.mul(grad, xhat, m), dims, (c,)) if output_mask[1] else None
    gb = _sum_to(ctx, grad, dims, (c,)) if output_mask[2] else None
    return gi, gw, gb
