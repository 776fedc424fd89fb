"""Rules for softmax, log-softmax, logsumexp and their backward ops.

The oracle's value subtracts the largest element along the axis first (a
selection: exact, the largest radius); the bound covers every formulation a
careful kernel may use for the same function:

    softmax     e / sum(e), or e * (1 / sum(e))           e = exp(x - max x)
    log_softmax (x - max x) - log(sum(e)), or x - (max x + log(sum(e))),
                or x - log(sum(exp(x))) where exp(x) cannot overflow
    logsumexp   max x + log(sum(e)), or log(sum(exp(x))) where exp(x) cannot overflow

with ``sum(e)`` summed in one pass after the maximum, or *online* (the running
sum rescaled by ``exp(m_old - m_new)`` each time the running maximum grows:
:func:`online_radius`). Each subtraction, exponential, sum, logarithm and
division has its own rounding and the claimed ulps.

Special values are values (:mod:`.ieee`): ``exp(-inf) = 0`` exactly, so a masked
entry (``-inf``: a causal or padding mask) gives exactly 0 (log-softmax:
``-inf``) and the unmasked rest is judged with a finite bound. A row whose every
entry is ``-inf`` gives ``0 / 0 = NaN`` (``torch.softmax``), or 0 for
``aten._safe_softmax`` (what ``F.scaled_dot_product_attention`` calls), or what
the claim ``masked_rows`` says. A NaN spreads over its row. A row holding
``+inf`` gives NaN there, and 0 or NaN (``-inf`` or NaN for log-softmax)
elsewhere by formulation; its logsumexp is ``+inf`` or NaN: those are not judged.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ... import elementwise as ew
from ...accuracy import ulps_at
from ...fused import larger_counts
from ...tracked import Tracked, either, exact, folded, negated, unjudged
from ...xp import array_module, reads_are_free
from ..rules import RuleContext, rule
from . import ieee
from ._common import dims_of, scalar, tmap_all
from .elementwise import ulps
from .reductions import last_axis
from ._softmax_rows import (
    _keep,
    _sum_keep,
    _widen,
    fused_log_softmax,
    fused_log_softmax_backward,
    fused_softmax,
    fused_softmax_backward,
)

__all__ = ["shifted_exp", "softmax", "log_softmax", "online_radius"]


def online_radius(ctx: RuleContext, x: Tracked, e: Tracked, axis: int) -> Any:
    """What an online sum of ``e = exp(x - max x)`` along ``axis`` may add to the
    error of a sum taken after the maximum (kept as a size-1 axis).

    An online kernel adds ``exp(x_i - m)`` with ``m`` the running maximum, and
    multiplies the running sum by ``exp(m_old - m_new)`` each time ``m`` grows.
    Term ``i`` is rescaled at most ``k_i`` times, ``k_i`` the number of entries
    strictly larger than ``x_i`` (in any order: the running maximum is at least
    ``x_i`` from then on), each time by an exponential within the claimed ulps
    of an argument rounded relative to the step ``m_new - m_old`` (the steps add
    up to at most ``max x - x_i``) and one rounding of the product. So the term
    is off by a relative ``expm1(u (max x - x_i) + k_i (2 ulps + 1) u)`` at most."""
    xp = array_module(e.value)
    u = ctx.model.acc_unit()
    xv = np.moveaxis(folded(x).value, axis, -1)
    ev = np.moveaxis(e.value, axis, -1)
    r = np.moveaxis(np.broadcast_to(ieee._reach(x), x.shape), axis, -1)
    with np.errstate(invalid="ignore", over="ignore"):
        lo = np.where(np.isnan(xv), -np.inf, xv - r)
        hi = np.where(np.isnan(xv), -np.inf, xv + r)
        gap = np.where(ev == 0, 0.0, np.max(hi, axis=-1, keepdims=True) - lo)
        rel = np.expm1(u * gap * (1.0 + 2.0**-20)
                       + _larger(lo, hi) * (2.0 * ulps_at(ulps(ctx, "exp"), gap) + 1.0) * u)
        det = np.moveaxis(np.broadcast_to(e.det, e.shape), axis, -1)
        extra = np.where(ev == 0, 0.0, (np.abs(ev) + det) * rel).sum(-1)
    return xp.asarray(np.expand_dims(extra, axis))


def _larger(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per entry of each lane (last axis): how many entries of the lane may be
    larger than it (``hi_j > lo_i``)."""
    return larger_counts(lo, hi)


def shifted_exp(ctx: RuleContext, x: Tracked, axis: int, eager: bool = False
                ) -> tuple[Tracked, Tracked, Tracked]:
    """``(x - m, exp(x - m), m)`` with ``m`` the largest element along ``axis``
    (kept as a size-1 axis; an infinite or NaN maximum is replaced by 0, so that
    ``x - m`` stays defined); ``eager``: ``x - m`` and its exponential are
    tensors of their own (:meth:`RuleContext.kept`)."""
    x = folded(x)
    m = _keep(ew.amax(x, axis=axis), axis)
    finite = np.isfinite(m.value)
    if not reads_are_free(array_module(finite)) or not finite.all():
        zero = np.zeros_like(m.value)
        m = replace(m, value=np.where(finite, m.value, zero),
                    det=np.where(finite, m.det, zero), prob=np.where(finite, m.prob, zero),
                    ref_err=np.where(finite, m.ref_err, zero))
    keep = ctx.kept if eager else (lambda t: t)
    d = keep(ieee.sub(x, m, ctx.model))
    e = keep(ieee.exp(d, ctx.model, ulps=ulps(ctx, "exp")))
    return d, e, m


def _total(ctx: RuleContext, x: Tracked, e: Tracked, axis: int) -> Tracked:
    """``sum(e)`` along ``axis`` (kept), in one pass or online (where the sum is
    finite: a sum that special values decide is what they make it)."""
    total = _sum_keep(ctx, e, axis)
    with np.errstate(invalid="ignore"):
        extra = online_radius(ctx, x, e, axis)
    return _widen(total, np.where(np.isfinite(total.value), extra, 0.0))


def _unshifted_total(ctx: RuleContext, x: Tracked, axis: int) -> Tracked:
    """``sum(exp(x))`` along ``axis`` (kept) without the shift."""
    return _sum_keep(ctx, ieee.exp(folded(x), ctx.model, ulps=ulps(ctx, "exp")), axis)


def _either(t1: Tracked, t2: Tracked) -> Tracked:
    """:func:`~numoracle.oracle.tracked.either`, where both give NaN the larger
    radius of the two (a NaN is the same answer either way)."""
    out = either(t1, t2)
    nan = np.isnan(t1.value) & np.isnan(t2.value)
    if reads_are_free(array_module(nan)) and not nan.any():
        return out
    return replace(out, det=np.where(nan, np.maximum(t1.det, t2.det), out.det),
                   prob=np.where(nan, np.maximum(t1.prob, t2.prob), out.prob))


def _or_unshifted(ctx: RuleContext, t1: Tracked, t2: Tracked, x: Tracked, axis: int) -> Tracked:
    """A kernel computing ``t1`` (shifted) or ``t2`` (unshifted) where the
    unshifted sum is in range: its largest term ``exp(max x)`` is at least
    ``tiny / u`` (terms lost to underflow weigh less than a rounding) and the sum
    of the lane cannot overflow; ``t1`` elsewhere."""
    fmt, n = ctx.model.accumulate, x.shape[axis] if x.value.ndim else 1
    with np.errstate(invalid="ignore"):
        top = np.max(np.where(np.isnan(x.value), np.inf, x.value), axis=axis, keepdims=True)
        ok = ((top >= np.log(fmt.tiny / ctx.model.acc_unit()))
              & (top + np.log(max(n, 1)) < np.log(fmt.max) - 1.0))
        ok = ok & np.isfinite(t2.det) & np.isfinite(t2.value)
    both = _either(t1, t2)
    pick = lambda a, b: np.where(ok, a, b)  # noqa: E731
    return replace(t1, det=pick(both.det, t1.det), prob=pick(both.prob, t1.prob),
                   mag=pick(both.mag, t1.mag))


def _rows(x: Tracked, axis: int) -> tuple[Any, Any]:
    """Rows (along ``axis``, kept) whose every entry is an exact ``-inf``, and rows
    holding a ``+inf``."""
    v = folded(x).value
    masked = (ieee.special_points(x) & (v == -np.inf)).all(axis=axis, keepdims=True)
    return masked, (v == np.inf).any(axis=axis, keepdims=True)


def _settled(t: Tracked, x: Tracked, axis: int, masked_rows: str) -> Tracked:
    """A softmax-family result with the rows that special values decide settled:
    fully masked rows as ``masked_rows`` says, and the entries
    of rows holding ``+inf`` that a formulation decides (see the module
    docstring) left unjudged."""
    masked, pos_inf = _rows(x, axis)
    if masked.any():
        fill = 0.0 if masked_rows == "zero" else np.nan
        rows = np.broadcast_to(masked, t.shape)
        t = replace(t, value=np.where(rows, fill, t.value),
                    det=np.where(rows, 0.0, np.broadcast_to(t.det, t.shape)),
                    prob=np.where(rows, 0.0, np.broadcast_to(t.prob, t.shape)),
                    ref_err=np.where(rows, 0.0, np.broadcast_to(t.ref_err, t.shape)),
                    mag=np.where(rows, 0.0, np.broadcast_to(t.mag, t.shape)), lo=None)
    if pos_inf.any():
        t = unjudged(t, np.broadcast_to(pos_inf, t.shape) & ~np.isnan(t.value))
    return t


def softmax(ctx: RuleContext, x: Tracked, axis: int, masked_rows: str = "nan") -> Tracked:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``, or the sum's
    reciprocal times the exponentials; ``masked_rows`` (the claim first): what a
    row of ``-inf`` gives."""
    axis %= max(x.value.ndim, 1)
    if x.value.ndim == 0:
        return ieee.div(x, x, ctx.model)
    fast = fused_softmax(ctx, x, axis)
    if fast is not None:
        return fast
    _, e, _ = shifted_exp(ctx, x, axis)
    total = _total(ctx, x, e, axis)
    m = ctx.model
    out = _either(ieee.div(e, total, m), ieee.mul(e, ieee.div(scalar(1.0, m), total, m), m))
    return _settled(out, x, axis, ctx.model.masked_rows or masked_rows)


def log_softmax(ctx: RuleContext, x: Tracked, axis: int) -> Tracked:
    """``(x - max) - log(sum(exp(x - max)))`` along ``axis``, or
    ``x - (max + log(sum(...)))``, or ``x - log(sum(exp(x)))`` where that cannot
    overflow; under the per-op claim the sum and its logarithm are kept in the
    storage format, as torch's CPU kernel keeps them in bf16."""
    axis %= max(x.value.ndim, 1)
    fast = fused_log_softmax(ctx, x, axis)
    if fast is not None:
        return fast
    m_ = ctx.model
    d, e, m = shifted_exp(ctx, x, axis)
    logs = ctx.kept(ieee.log(ctx.kept(_total(ctx, x, e, axis)), m_, ulps=ulps(ctx, "log")))
    out = _either(ieee.sub(d, logs, m_),
                 ieee.sub(folded(x), ctx.kept(ieee.add(m, logs, m_)), m_))
    plain = ieee.log(ctx.kept(_unshifted_total(ctx, x, axis)), m_, ulps=ulps(ctx, "log"))
    out = _or_unshifted(ctx, out, ieee.sub(folded(x), ctx.kept(plain), m_), folded(x), axis)
    return _settled(out, x, axis, "nan")


@rule("aten._softmax.default")
def softmax_rule(ctx: RuleContext, x: Tracked, dim: int, half_to_float: bool = False) -> Tracked:
    return softmax(ctx, x, dim)


@rule("aten._safe_softmax.default")
def safe_softmax_rule(ctx: RuleContext, x: Tracked, dim: int, dtype: Any = None) -> Tracked:
    """A softmax whose fully masked rows give 0 (unless the kernel claims NaN)."""
    return softmax(ctx, x, dim, masked_rows="zero")


@rule("aten._log_softmax.default")
def log_softmax_rule(ctx: RuleContext, x: Tracked, dim: int,
                     half_to_float: bool = False) -> Tracked:
    return log_softmax(ctx, x, dim)


@rule("aten.logsumexp.default")
def logsumexp_rule(ctx: RuleContext, x: Tracked, dim: Any, keepdim: bool = False) -> Tracked:
    """``max + log(sum(exp(x - max)))``, or ``log(sum(exp(x)))`` where that cannot
    overflow; a lane of ``-inf`` gives ``-inf`` (torch's), or NaN under the claim
    ``masked_rows="nan"`` (the shift by an infinite maximum). Eager torch composes logsumexp from ops of its own (the shift,
    ``exp``, ``sum``, ``log``, the add), each result a tensor of the storage dtype:
    under the per-op claim each is rounded to it."""
    dims = dims_of(dim, x.value.ndim)
    flat = last_axis(x, dims)
    _, e, m = shifted_exp(ctx, flat, -1, eager=True)
    total = ctx.kept(_total(ctx, flat, e, -1))
    out = ieee.add(ctx.kept(ieee.log(total, ctx.model, ulps=ulps(ctx, "log"))), m, ctx.model)
    plain = ieee.log(ctx.kept(_unshifted_total(ctx, flat, -1)), ctx.model,
                     ulps=ulps(ctx, "log"))
    out = _or_unshifted(ctx, out, plain, folded(flat), -1)
    masked, pos_inf = _rows(flat, -1)
    if ctx.model.masked_rows == "nan" and masked.any():  # a lane of -inf: NaN, not -inf
        out = replace(out, value=np.where(masked, np.nan, out.value))
    # a lane holding +inf: +inf, or NaN where the shift by the maximum is inf - inf
    out = unjudged(out, pos_inf & ~np.isnan(out.value))
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
    fast = fused_softmax_backward(ctx, grad, out, axis)
    if fast is not None:
        return fast
    gy = ieee.mul(grad, out, m)
    return ieee.mul(out, ieee.sub(grad, _sum_keep(ctx, gy, axis), m), m)


def _kernel_softmax(ctx: RuleContext, y: Tracked) -> Tracked:
    """The softmax a backward kernel uses, from the log-softmax ``y``: ``exp(y)``,
    or the forward's own ``e / s`` or ``e * (1 / s)`` (``e = exp(x - max x)``,
    ``s = sum(e)``), one more rounding of the claimed division (and a product).
    ``exp(y)``'s bound covers the errors of ``e`` and ``s``: ``y``'s radius holds
    the shift's rounding and the logarithm of ``s`` with its error, and the
    exponential's ulps are taken at ``|y| >= |x - max x|``."""
    m = ctx.model
    p = ieee.exp(y, m, ulps=ulps(ctx, "exp"))
    one = scalar(1.0, m)
    return _either(p, _either(ieee.div(p, one, m), ieee.mul(p, ieee.div(one, one, m), m)))


def _one_hot_form(ctx: RuleContext, grad: Tracked, p: Tracked, axis: int,
                  out: Tracked) -> Tracked:
    """``out`` (``g - p sum(g)``), where a lane of ``g`` holds one nonzero entry
    ``-c`` (the gradient of a cross-entropy over class labels), widened to cover
    the factored form ``(p - onehot) c`` as well: the subtraction rounded, then
    the product (a rounding more than ``g - p sum(g)`` has where ``p`` is far from
    1). The one-hot vector and ``c`` are exact selections of ``g``."""
    m = ctx.model
    g = folded(grad)
    hot = (g.value != 0) | (np.broadcast_to(g.det, g.shape) != 0)
    single = np.sum(hot, axis=axis, keepdims=True) == 1
    if not bool(np.any(single)):
        return out
    idx = np.expand_dims(np.argmax(hot, axis=axis), axis)
    c = negated(tmap_all(g, lambda a: np.take_along_axis(a, idx, axis=axis)))
    onehot = exact(np.where(hot, 1.0, 0.0))
    factored = ieee.mul(ieee.sub(p, onehot, m), c, m)
    both = _either(out, factored)
    rows = np.broadcast_to(single, out.shape)
    pick = lambda a, b: np.where(rows, a, b)  # noqa: E731
    return replace(out, det=pick(both.det, out.det), prob=pick(both.prob, out.prob),
                   mag=pick(both.mag, out.mag))


@rule("aten._log_softmax_backward_data.default")
def log_softmax_backward_rule(ctx: RuleContext, grad: Tracked, out: Tracked, dim: int,
                              input_dtype: Any = None) -> Tracked:
    """``g - p sum(g)`` along ``dim``, with ``p`` the softmax of the log-softmax
    output ``y`` as a kernel may hold it (:func:`_kernel_softmax`); where ``g`` is
    one-hot (a cross-entropy), or ``(p - onehot) c`` (:func:`_one_hot_form`)."""
    m = ctx.model
    axis = dim % max(out.value.ndim, 1)
    fast = fused_log_softmax_backward(ctx, grad, out, axis)
    if fast is not None:
        return fast
    p = _kernel_softmax(ctx, out)
    res = ieee.sub(grad, ieee.mul(p, _sum_keep(ctx, grad, axis), m), m)
    return _one_hot_form(ctx, grad, p, axis, res)
