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
from ... import fused_cpu
from ...accuracy import ulps_at
from ...fused import larger_counts, whole_rules
from ...tracked import (
    U64,
    Tracked,
    bounded,
    either,
    exact,
    folded,
    has_zero,
    may_be_exact,
    negated,
    sum_,
    unjudged,
)
from ...xp import array_module, reads_are_free
from ..rules import RuleContext, rule
from . import ieee
from ._common import dims_of, scalar, tmap_all
from .elementwise import ulps
from .reductions import last_axis

__all__ = ["shifted_exp", "softmax", "log_softmax", "online_radius"]


def _keep(t: Tracked, axis: int) -> Tracked:
    return tmap_all(t, lambda a: np.expand_dims(a, axis))


def _sum_keep(ctx: RuleContext, t: Tracked, axis: int, special: bool = True) -> Tracked:
    """The sum along ``axis`` (kept); ``special=False``: ``t`` holds no special
    point, so :func:`~.ieee.summed` would change nothing."""
    moved = tmap_all(t, lambda a: np.moveaxis(a, axis, -1))
    with np.errstate(invalid="ignore", over="ignore"):
        total = sum_(moved, axis=-1, model=ctx.model)
    return _keep(ieee.summed(total, moved, ctx.model) if special else total, axis)


def _widen(t: Tracked, extra: Any) -> Tracked:
    return replace(t, det=t.det + extra, prob=t.prob + extra)


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


class _RowPass:
    """What the first whole-rule loop gives (:func:`_row_pass`): the maximum ``m``
    (kept), ``e = exp(x - m)``, the sum of ``e`` widened by the online bound, with
    ``unshifted`` ``exp(x)``, the inputs as rows and the loops' parameters."""

    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


def _per_row(t: Tracked, rows: int) -> np.ndarray:
    """A kept-axis tracked value as a ``(rows, 4)`` array: value, det, prob, ref_err."""
    shape = t.value.shape
    return np.ascontiguousarray(np.stack(
        [np.broadcast_to(a, shape).reshape(rows) for a in (t.value, t.det, t.prob, t.ref_err)],
        axis=1))


def _special_any(*ts: Tracked) -> bool:
    return any(bool(ieee.special_points(t).any()) for t in ts)


def _row_pass(ctx: RuleContext, x: Tracked, axis: int, unshifted: bool) -> _RowPass | None:
    """:func:`shifted_exp`, :func:`_total` (and with ``unshifted``
    :func:`_unshifted_total`) by the first whole-rule loop
    (:func:`~numoracle.oracle.fused.whole_rules`): the same bits, the sums by the same
    NumPy calls. None where the loops do not run or the rule's special values need
    its general path: an axis other than the last, an escalated input, a value or
    radius that is not finite, a maximum that is an exact 0, a special point in an
    exponential (then the primitives' passes)."""
    shape = x.shape
    if (x.lo is not None or x.value.ndim == 0 or axis != x.value.ndim - 1 or shape[-1] == 0
            or not whole_rules(np, x.value.size) or not isinstance(x.value, np.ndarray)):
        return None
    model = ctx.model
    acc = model.accumulate
    n = shape[-1]
    v = np.ascontiguousarray(x.value, dtype=np.float64).reshape(-1, n)
    radii = tuple(fused_cpu.as_rows(a, shape) for a in (x.det, x.prob, x.ref_err))
    mx = fused_cpu.row_max(v, *radii)
    if mx is None or bool(np.any((mx[:, 0] == 0) & (mx[:, 1] + mx[:, 3] == 0))):
        return None
    kshape = shape[:-1] + (1,)
    m = bounded(*(np.ascontiguousarray(mx[:, k]).reshape(kshape) for k in range(3)),
                ref_err=np.ascontiguousarray(mx[:, 3]).reshape(kshape), n=x.max_n)
    u = model.acc_unit()
    spec = ew._check_ulps("exp", ulps(ctx, "exp"), model)
    params = (u, acc.tiny, U64, acc.max, float(spec.ulps), float(spec.per_x),
              float(spec.of_one), ew._REF_ULPS * U64, acc.max, u)
    ints = (int(acc.t), int(acc.emin))
    test_d = may_be_exact(x, m)
    ev, ed, ep, er, terms, xe, xed, xep, xer, flags = fused_cpu.shifted_exp_rows(
        v, radii, mx, test_d, unshifted, params, ints)
    if bool(flags[:, 0].any()):
        return None
    n_d = x.n + m.n
    e = bounded(*(a.reshape(shape) for a in (ev, ed, ep)), ref_err=er.reshape(shape),
                mag=ev.reshape(shape), n=n_d)
    total = _sum_keep(ctx, e, axis, special=False)
    extra = np.expand_dims(terms.reshape(shape).sum(-1), axis)
    with np.errstate(invalid="ignore"):
        total = _widen(total, np.where(np.isfinite(total.value), extra, 0.0))
    plain = None
    if unshifted:
        ex = bounded(*(a.reshape(shape) for a in (xe, xed, xep)), ref_err=xer.reshape(shape),
                     mag=xe.reshape(shape), n=x.n)
        plain = _sum_keep(ctx, ex, axis, special=False)
    d_zero = (bool(flags[:, 1].any()), bool(flags[:, 2].any()))
    e_zero = bool(flags[:, 3].any()) and bool(flags[:, 4].any())
    return _RowPass(x=x, v=v, radii=radii, mx=mx, m=m, e=e, total=total, plain=plain,
                    n_d=n_d, test_d=test_d, d_zero=d_zero, e_zero=e_zero, ints=ints,
                    rows=v.shape[0], kshape=kshape)


def _fused_softmax(ctx: RuleContext, x: Tracked, axis: int) -> Tracked | None:
    """:func:`softmax` by the whole-rule loops (the same bits); None where they do
    not run (:func:`_row_pass`; a sum or its reciprocal that is a special point or
    may be exact)."""
    rp = _row_pass(ctx, x, axis, unshifted=False)
    if rp is None:
        return None
    m, e, total = ctx.model, rp.e, rp.total
    rec = ieee.div(scalar(1.0, m), total, m)
    if (_special_any(total, rec) or (rp.e_zero and (may_be_exact(total) or may_be_exact(rec)))):
        return None
    u, acc, rel = m.acc_unit(), m.accumulate, m.div_rel()
    params = (u, acc.tiny, U64, acc.max, rel * u, rel * acc.tiny, 1 + rel * u, 1.0 + 2 * U64)
    rows = rp.rows
    flat = tuple(a.reshape(rows, -1) for a in (e.value, e.det, e.prob, e.ref_err))
    value, det, prob, ref, mag = fused_cpu.softmax_rows(flat, _per_row(total, rows),
                                                        _per_row(rec, rows), params)
    shape = x.shape
    return bounded(value.reshape(shape), det.reshape(shape), prob.reshape(shape),
                   ref_err=ref.reshape(shape), mag=mag.reshape(shape),
                   n=ew._max_n(e, total))


def _fused_log_softmax(ctx: RuleContext, x: Tracked, axis: int) -> Tracked | None:
    """:func:`log_softmax` by the whole-rule loops (the same bits); None where they
    do not run (:func:`_row_pass`; a logarithm or a shift that is a special point)."""
    rp = _row_pass(ctx, x, axis, unshifted=True)
    if rp is None:
        return None
    m_ = ctx.model
    x = rp.x
    logs = ctx.kept(ieee.log(ctx.kept(rp.total), m_, ulps=ulps(ctx, "log")))
    top = ctx.kept(ieee.add(rp.m, logs, m_))
    plain = ctx.kept(ieee.log(ctx.kept(rp.plain), m_, ulps=ulps(ctx, "log")))
    if _special_any(logs, top, plain):
        return None
    fmt, n = m_.accumulate, x.shape[axis]
    with np.errstate(invalid="ignore"):
        hi = rp.mx[:, 0]
        ok = ((hi >= np.log(fmt.tiny / m_.acc_unit()))
              & (hi + np.log(max(n, 1)) < np.log(fmt.max) - 1.0))
    exact_d = rp.d_zero[0] and rp.d_zero[1]
    flags = (rp.test_d, exact_d and may_be_exact(logs), may_be_exact(x, top),
             may_be_exact(x, plain))
    u = m_.acc_unit()
    rows = rp.rows
    params = (u, fmt.tiny, U64, fmt.max, 1.0 + 2 * U64)
    value, det, prob, ref, mag = fused_cpu.log_softmax_rows(
        rp.v, rp.radii, rp.mx, tuple(_per_row(t, rows) for t in (logs, top, plain)),
        np.ascontiguousarray(ok), flags, params, rp.ints)
    shape = x.shape
    return bounded(value.reshape(shape), det.reshape(shape), prob.reshape(shape),
                   ref_err=ref.reshape(shape), mag=mag.reshape(shape), n=rp.n_d + logs.n)


def softmax(ctx: RuleContext, x: Tracked, axis: int, masked_rows: str = "nan") -> Tracked:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``, or the sum's
    reciprocal times the exponentials; ``masked_rows`` (the claim first): what a
    row of ``-inf`` gives."""
    axis %= max(x.value.ndim, 1)
    if x.value.ndim == 0:
        return ieee.div(x, x, ctx.model)
    fast = _fused_softmax(ctx, x, axis)
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
    fast = _fused_log_softmax(ctx, x, axis)
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
    p = _kernel_softmax(ctx, out)
    res = ieee.sub(grad, ieee.mul(p, _sum_keep(ctx, grad, axis), m), m)
    return _one_hot_form(ctx, grad, p, axis, res)
