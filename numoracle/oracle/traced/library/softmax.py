"""Rules for softmax, log-softmax, logsumexp and their backward ops.

All three subtract the largest element along the axis first (a selection: exact,
the largest radius), so ``exp`` never overflows; the bound is then composed from
the primitives the kernel evaluates::

    softmax     e / sum(e)                 e = exp(x - max x)
    log_softmax (x - max x) - log(sum(e))
    logsumexp   max x + log(sum(e))

each subtraction, exponential, sum, logarithm and division with its own rounding
and the claimed ulps. A kernel that skips the subtraction computes the same
function in exact arithmetic but overflows for inputs beyond ``log(max)``: it is
judged against the same bound, and there it returns NaN or 0 where the oracle's
value is finite.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ... import elementwise as ew
from ...tracked import Tracked, add, folded, sub, sum_
from ..rules import RuleContext, rule
from ._common import dims_of, tmap_all
from .elementwise import ulps
from .reductions import last_axis

__all__ = ["shifted_exp", "softmax", "log_softmax"]


def _keep(t: Tracked, axis: int) -> Tracked:
    return tmap_all(t, lambda a: np.expand_dims(a, axis))


def _sum_keep(ctx: RuleContext, t: Tracked, axis: int) -> Tracked:
    moved = tmap_all(t, lambda a: np.moveaxis(a, axis, -1))
    return _keep(sum_(moved, axis=-1, model=ctx.model), axis)


def shifted_exp(ctx: RuleContext, x: Tracked, axis: int, eager: bool = False
                ) -> tuple[Tracked, Tracked, Tracked]:
    """``(x - m, exp(x - m), m)`` with ``m`` the largest element along ``axis``
    (kept as a size-1 axis; an infinite or NaN maximum is replaced by 0, as torch
    does, so that ``x - m`` stays defined); ``eager``: ``x - m`` and its
    exponential are tensors of their own (:meth:`RuleContext.kept`)."""
    x = folded(x)
    m = _keep(ew.amax(x, axis=axis), axis)
    finite = np.isfinite(m.value)
    if not finite.all():
        zero = np.zeros_like(m.value)
        m = replace(m, value=np.where(finite, m.value, zero),
                    det=np.where(finite, m.det, zero), prob=np.where(finite, m.prob, zero),
                    ref_err=np.where(finite, m.ref_err, zero))
    keep = ctx.kept if eager else (lambda t: t)
    d = keep(sub(x, m, ctx.model))
    e = keep(ew.exp(d, ctx.model, ulps=ulps(ctx, "exp")))
    return d, e, m


def softmax(ctx: RuleContext, x: Tracked, axis: int) -> Tracked:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``."""
    axis %= max(x.value.ndim, 1)
    if x.value.ndim == 0:
        return ew.div(x, x, ctx.model)
    _, e, _ = shifted_exp(ctx, x, axis)
    return ew.div(e, _sum_keep(ctx, e, axis), ctx.model)


def log_softmax(ctx: RuleContext, x: Tracked, axis: int) -> Tracked:
    """``(x - max) - log(sum(exp(x - max)))`` along ``axis``; under the per-op claim
    the sum and its logarithm are kept in the storage format, as torch's CPU
    kernel keeps them in bf16."""
    axis %= max(x.value.ndim, 1)
    d, e, _ = shifted_exp(ctx, x, axis)
    total = ctx.kept(_sum_keep(ctx, e, axis))
    return sub(d, ctx.kept(ew.log(total, ctx.model, ulps=ulps(ctx, "log"))), ctx.model)


@rule("aten._softmax.default")
def softmax_rule(ctx: RuleContext, x: Tracked, dim: int, half_to_float: bool = False) -> Tracked:
    return softmax(ctx, x, dim)


@rule("aten._log_softmax.default")
def log_softmax_rule(ctx: RuleContext, x: Tracked, dim: int,
                     half_to_float: bool = False) -> Tracked:
    return log_softmax(ctx, x, dim)


@rule("aten.logsumexp.default")
def logsumexp_rule(ctx: RuleContext, x: Tracked, dim: Any, keepdim: bool = False) -> Tracked:
    """Eager torch composes logsumexp from ops of its own (the shift, ``exp``,
    ``sum``, ``log``, the add), each result a tensor of the storage dtype: under
    the per-op claim each is rounded to it."""
    dims = dims_of(dim, x.value.ndim)
    flat = last_axis(x, dims)
    _, e, m = shifted_exp(ctx, flat, -1, eager=True)
    total = ctx.kept(_sum_keep(ctx, e, -1))
    out = add(ctx.kept(ew.log(total, ctx.model, ulps=ulps(ctx, "log"))), m, ctx.model)
    out = tmap_all(out, lambda a: a[..., 0])
    if keepdim:
        kept = tuple(1 if d in dims else s for d, s in enumerate(x.shape))
        out = tmap_all(out, lambda a: np.reshape(a, kept))
    return out


@rule("aten._softmax_backward_data.default")
def softmax_backward_rule(ctx: RuleContext, grad: Tracked, out: Tracked, dim: int,
                          input_dtype: Any = None) -> Tracked:
    """``y (g - sum(g y))`` along ``dim``, with ``y`` the softmax output."""
    m = ctx.model
    axis = dim % max(out.value.ndim, 1)
    gy = ew.mul(grad, out, m)
    return ew.mul(out, sub(grad, _sum_keep(ctx, gy, axis), m), m)


@rule("aten._log_softmax_backward_data.default")
def log_softmax_backward_rule(ctx: RuleContext, grad: Tracked, out: Tracked, dim: int,
                              input_dtype: Any = None) -> Tracked:
    """``g - exp(y) sum(g)`` along ``dim``, with ``y`` the log-softmax output."""
    m = ctx.model
    axis = dim % max(out.value.ndim, 1)
    p = ew.exp(out, m, ulps=ulps(ctx, "exp"))
    return sub(grad, ew.mul(p, _sum_keep(ctx, grad, axis), m), m)
