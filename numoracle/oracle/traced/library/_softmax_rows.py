"""The softmax family's rules as whole-rule loops (numba's on the CPU, kernels on CuPy).

A softmax or log-softmax rule (:mod:`.softmax`) composes a dozen primitives,
each several passes over the whole input on NumPy. Where the loops of
:mod:`~numoracle.oracle.fused_cpu` run (:func:`~numoracle.oracle.fused.whole_rules`)
the elementwise part of a rule is two loops over the rows instead, one before its
sums and one after, performing the primitives' float64 operations in their order;
the sums stay the primitives' own NumPy calls (their summation order sets their
bits). On CuPy the same loops are device kernels (:mod:`~numoracle.oracle.fused_cuda`,
where ``whole_rules`` switches them on), the sums the tracked row sum's kernels
(:func:`~numoracle.oracle.fused_cuda.row_sums`), and the few numbers a row
that the rule computes from its sums are computed on the host (:func:`_rows_on_host`).
So each form here gives the rule's primitives' results, within the oracle's own error
where its exponentials differ from NumPy's (numba's loops' own ``exp`` and ``expm1``,
:mod:`~numoracle.oracle._numba_exp`; a device's), the same bits elsewhere; the
primitives stay the reference implementation (the tests compare both, and the
loops' values with mpmath), and each form returns None where it
does not apply (the primitives then run): an axis other than the last, an
escalated input, a value or radius that is not finite (a NaN, a row of ``-inf``;
softmax alone takes masked entries, exact ``-inf``, deciding them as ieee does), and
the other special points the primitives' ``ieee`` rules would act on.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ... import elementwise as ew
from ... import fused_cpu, fused_cuda
from ...fused import whole_rules
from ...tracked import U64, Tracked, bounded, may_be_exact, negated, sum_
from ...xp import array_module, to_numpy
from ..rules import RuleContext
from . import ieee
from ._common import scalar, tmap_all
from .elementwise import ulps

__all__ = ["fused_softmax", "fused_log_softmax", "fused_log_softmax_backward",
           "fused_softmax_backward"]


def _loops(xp: Any) -> Any:
    """The row functions of ``xp``: numba's loops on NumPy, CuPy's kernels else
    (where :func:`~numoracle.oracle.fused.whole_rules` lets either run)."""
    return fused_cpu if xp is np else fused_cuda


def _keep(t: Tracked, axis: int) -> Tracked:
    return tmap_all(t, lambda a: np.expand_dims(a, axis))


def _sum_keep(ctx: RuleContext, t: Tracked, axis: int, special: bool = True) -> Tracked:
    """The sum along ``axis`` (kept); ``special=False``: ``t`` holds no special
    point, so :func:`~.ieee.summed` would change nothing."""
    moved = tmap_all(t, lambda a: np.moveaxis(a, axis, -1))
    with np.errstate(invalid="ignore", over="ignore"):
        total = sum_(moved, axis=-1, model=ctx.model)
    return _keep(ieee.summed(total, moved, ctx.model) if special else total, axis)


def _rows_on_host(total: Tracked, plain: Tracked | None, extra: Any
                  ) -> tuple[Tracked, Tracked | None, Any]:
    """A rule's per-row quantities (its sums kept along the axis and the online bound's
    widening ``extra``: a few numbers a row) on the host in one transfer, where they
    live on a device: the rule's steps on them (logarithms, a reciprocal, the tests for
    special values) are then NumPy's passes over a few numbers, not a device launch
    (and a synchronisation) each. As they are on the host, with a low part, or where
    the accumulation lengths vary by element."""
    xp = array_module(total.value)
    ts = [t for t in (total, plain) if t is not None]
    if xp is np or any(t.lo is not None or not isinstance(t.n, int) for t in ts):
        return total, plain, extra
    shape = total.value.shape
    parts = [xp.broadcast_to(xp.asarray(a, dtype=np.float64), shape)
             for t in ts for a in (t.value, t.det, t.prob, t.ref_err, t.mag)]
    host = to_numpy(xp.stack(parts + ([] if extra is None else [extra])))
    out = [replace(t, value=host[5 * k], det=host[5 * k + 1], prob=host[5 * k + 2],
                   ref_err=host[5 * k + 3], mag=host[5 * k + 4]) for k, t in enumerate(ts)]
    return out[0], out[1] if plain is not None else None, None if extra is None else host[-1]


def _widen(t: Tracked, extra: Any) -> Tracked:
    return replace(t, det=t.det + extra, prob=t.prob + extra)


class _RowPass:
    """What the first whole-rule loop gives (:func:`_row_pass`): the maximum ``m``
    (kept), ``e = exp(x - m)``, the sum of ``e`` widened by the online bound, with
    ``unshifted`` ``exp(x)``, the inputs as rows and the loops' parameters."""

    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


def _value_rows(loops: Any, value: Any, shape: tuple[int, ...]) -> Any:
    """``value`` as C-contiguous rows of the last axis (on NumPy read-only, as the
    loops take their radii: :func:`~numoracle.oracle.fused_cpu.as_rows`)."""
    if loops is fused_cpu:
        return fused_cpu.as_rows(value, shape)
    xp = array_module(value)
    return xp.ascontiguousarray(value, dtype=np.float64).reshape(-1, shape[-1])


def _per_row(t: Tracked, rows: int) -> Any:
    """A kept-axis tracked value as a ``(rows, 4)`` array: value, det, prob, ref_err."""
    shape = t.value.shape
    xp = array_module(t.value)
    return xp.ascontiguousarray(xp.stack(
        [xp.broadcast_to(xp.asarray(a), shape).reshape(rows)
         for a in (t.value, t.det, t.prob, t.ref_err)], axis=1))


def _special_any(*ts: Tracked) -> bool:
    return any(bool(ieee.special_points(t).any()) for t in ts)


def _row_pass(ctx: RuleContext, x: Tracked, axis: int, unshifted: bool) -> _RowPass | None:
    """softmax's ``shifted_exp``, ``_total`` (and with ``unshifted``
    ``_unshifted_total``) by the first whole-rule loop
    (:func:`~numoracle.oracle.fused.whole_rules`): the sums of ``e`` by the same NumPy
    calls, the online bound's terms summed in the loop. None where the loops do not run or the rule's special values need
    its general path: an axis other than the last, an escalated input, a value or
    radius that is not finite, a maximum that is an exact 0, a special point in an
    exponential (then the primitives' passes)."""
    shape = x.shape
    xp = array_module(x.value)
    if (x.lo is not None or x.value.ndim == 0 or axis != x.value.ndim - 1 or shape[-1] == 0
            or not whole_rules(xp, x.value.size)):
        return None
    loops = _loops(xp)
    if loops is fused_cpu and shape[-1] > fused_cpu.LONGEST_ROW:
        return None
    model = ctx.model
    acc = model.accumulate
    n = shape[-1]
    v = _value_rows(loops, x.value, shape)
    radii = tuple(loops.as_rows(xp.asarray(a), shape) for a in (x.det, x.prob, x.ref_err))
    mx = loops.row_max(v, *radii)
    if mx is None or bool(np.any((mx[:, 0] == 0) & (mx[:, 1] + mx[:, 3] == 0))):
        return None
    masked = bool(mx[:, 5].any())  # (entries an exact -inf: softmax's alone takes them)
    if masked and (unshifted or not bool(np.all(np.isfinite(mx[:, 0])))):
        return None
    kshape = shape[:-1] + (1,)
    # (on the host, as the rows' other quantities: _rows_on_host)
    m = bounded(*(np.ascontiguousarray(mx[:, k]).reshape(kshape) for k in range(3)),
                ref_err=np.ascontiguousarray(mx[:, 3]).reshape(kshape), n=x.max_n)
    u = model.acc_unit()
    spec = ew._check_ulps("exp", ulps(ctx, "exp"), model)
    params = (u, acc.tiny, U64, acc.max, float(spec.ulps), float(spec.per_x),
              float(spec.of_one), ew._REF_ULPS * U64, acc.max, u)
    ints = (int(acc.t), int(acc.emin))
    x_exact = may_be_exact(x)
    test_d = x_exact and may_be_exact(m)
    # where the input's radii are one array, so are the exponentials' (the same
    # arithmetic on the same values): then the sums add them once
    shared = x.prob is x.det
    ev, ed, ep, er, terms, xe, xed, xep, xer, flags = loops.shifted_exp_rows(
        v, radii, mx, test_d, unshifted, shared, params, ints)
    if bool(flags[:, 0].any()):
        return None
    n_d = x.n + m.n
    e = bounded(*(a.reshape(shape) for a in (ev, ed, ed if shared else ep)),
                ref_err=er.reshape(shape), mag=ev.reshape(shape), n=n_d)
    total = _sum_keep(ctx, e, axis, special=masked)
    extra = xp.expand_dims(terms.reshape(shape[:-1]), axis)  # (the terms' sums per row)
    plain = None
    if unshifted:
        ex = bounded(*(a.reshape(shape) for a in (xe, xed, xed if shared else xep)),
                     ref_err=xer.reshape(shape), mag=xe.reshape(shape), n=x.n)
        plain = _sum_keep(ctx, ex, axis, special=False)
    total, plain, extra = _rows_on_host(total, plain, extra)
    with np.errstate(invalid="ignore"):
        total = _widen(total, np.where(np.isfinite(total.value), extra, 0.0))
    d_zero = (bool(flags[:, 1].any()), bool(flags[:, 2].any()))
    e_zero = bool(flags[:, 3].any()) and bool(flags[:, 4].any())
    return _RowPass(x=x, v=v, radii=radii, mx=mx, m=m, e=e, total=total, plain=plain,
                    n_d=n_d, test_d=test_d, x_exact=x_exact, masked=masked, d_zero=d_zero, e_zero=e_zero,
                    ints=ints, loops=loops, shared=shared, rows=v.shape[0], kshape=kshape)


def fused_softmax(ctx: RuleContext, x: Tracked, axis: int) -> Tracked | None:
    """softmax's ``softmax`` by the whole-rule loops (the same bits); None where they do
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
    tot, rc = _per_row(total, rows), _per_row(rec, rows)
    value, det, prob, ref, mag = rp.loops.softmax_rows(flat, tot, rc, rp.masked, params)
    # the same operations on the same bits: where the input's radii are one array and so
    # are the sum's and its reciprocal's, so are the result's (its consumers add them once)
    shape = x.shape
    det = det.reshape(shape)
    shared = rp.shared and all(isinstance(a, np.ndarray) and np.array_equal(a[:, 1], a[:, 2])
                               for a in (tot, rc))
    return bounded(value.reshape(shape), det, det if shared else prob.reshape(shape),
                   ref_err=ref.reshape(shape), mag=mag.reshape(shape),
                   n=ew._max_n(e, total))


def fused_log_softmax(ctx: RuleContext, x: Tracked, axis: int, at: Any = None
                      ) -> Tracked | None:
    """softmax's ``log_softmax`` by the whole-rule loops (the same bits); None where they
    do not run (:func:`_row_pass`; a logarithm or a shift that is a special point).
    ``at`` (NumPy's integers, one per row of a 2-D ``x``): only the element of each row
    at that index along the last axis, ``(rows, 1)``, with the bits the whole result
    has there (each element of the second loop is computed from its row's quantities
    and its own input alone)."""
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
    flags = (rp.test_d, exact_d and may_be_exact(logs), rp.x_exact and may_be_exact(top),
             rp.x_exact and may_be_exact(plain))
    u = m_.acc_unit()
    rows = rp.rows
    params = (u, fmt.tiny, U64, fmt.max, 1.0 + 2 * U64)
    shape, n = x.shape, rp.n_d + logs.n
    v, radii = rp.v, rp.radii
    if at is not None:
        idx = np.asarray(at, dtype=np.int64).reshape(rows, 1)
        v, *radii = (np.ascontiguousarray(np.take_along_axis(a, idx, axis=1))
                     for a in (v, *radii))
        if np.ndim(n):
            n = np.take_along_axis(np.broadcast_to(n, shape), idx, axis=1)
        shape = (rows, 1)
    value, det, prob, ref, mag = rp.loops.log_softmax_rows(
        v, tuple(radii), rp.mx, tuple(_per_row(t, rows) for t in (logs, top, plain)),
        np.ascontiguousarray(ok), flags, params, rp.ints)
    return bounded(value.reshape(shape), det.reshape(shape), prob.reshape(shape),
                   ref_err=ref.reshape(shape), mag=mag.reshape(shape), n=n)


def _finite_rows(loops: Any, t: Tracked, shape: tuple[int, ...]
                 ) -> tuple[Any, tuple[Any, ...], np.ndarray] | None:
    """``t`` as rows (its value contiguous, its radii views) and :func:`fused_cpu.row_max`'s
    maxima (on the host); None where some value or radius is not finite."""
    xp = array_module(t.value)
    v = _value_rows(loops, t.value, shape)
    radii = tuple(loops.as_rows(xp.asarray(a), shape) for a in (t.det, t.prob, t.ref_err))
    mx = loops.row_max(v, *radii)
    return None if mx is None or bool(mx[:, 5].any()) else (v, radii, mx)


def fused_log_softmax_backward(ctx: RuleContext, grad: Tracked, out: Tracked,
                               axis: int) -> Tracked | None:
    """softmax's ``log_softmax_backward_rule`` by one whole-rule loop after the sum of
    ``grad`` (the same bits); None where it does not run: besides
    :func:`_row_pass`'s cases, an output whose exponential may overflow, an ``exp``
    claimed exact (0 ulps: then a radius may be 0 and the exact tests decide), a sum
    that is a special point."""
    m = ctx.model
    shape = out.shape
    spec = ew._check_ulps("exp", ulps(ctx, "exp"), m)
    xp = array_module(out.value)
    if (grad.lo is not None or out.lo is not None or out.value.ndim == 0 or grad.shape != shape
            or axis != out.value.ndim - 1 or shape[-1] == 0 or not spec.ulps > 0
            or not whole_rules(xp, out.value.size) or array_module(grad.value) is not xp):
        return None
    loops = _loops(xp)
    ys, gs = _finite_rows(loops, out, shape), _finite_rows(loops, grad, shape)
    if ys is None or gs is None or not float(ys[2][:, 0].max()) <= 700.0:
        return None
    s = _rows_on_host(_sum_keep(ctx, grad, axis), None, None)[0]
    one = scalar(1.0, m)
    rec = ieee.div(one, one, m)
    if _special_any(s, one, rec):
        return None
    rows = ys[0].shape[0]
    kshape = shape[:-1] + (1,)
    count, first = loops.hot_rows(gs[0], gs[1][0])
    single = count == 1
    c = xp.zeros((rows, 4))
    if single.any():
        idx = first.reshape(kshape)
        c = _per_row(negated(tmap_all(grad, lambda a: np.take_along_axis(a, idx, axis=axis))),
                     rows)
    acc, u, rel = m.accumulate, m.acc_unit(), m.div_rel()
    params = (u, acc.tiny, U64, acc.max, float(spec.ulps), float(spec.per_x),
              float(spec.of_one), ew._REF_ULPS * U64, rel * u, rel * acc.tiny, 1 + rel * u,
              1.0 + 2 * U64)
    scalars = np.array([[float(np.asarray(a)) for a in (t.value, t.det, t.prob, t.ref_err)]
                        for t in (one, rec)])
    value, det, prob, ref, mag = loops.log_softmax_backward_rows(
        (ys[0], *ys[1]), (gs[0], *gs[1]), _per_row(s, rows), xp.ascontiguousarray(c), single,
        scalars, params)
    return bounded(value.reshape(shape), det.reshape(shape), prob.reshape(shape),
                   ref_err=ref.reshape(shape), mag=mag.reshape(shape),
                   n=grad.n + ew._max_n(out, s))


def _operand_rows(t: Tracked, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """``t``'s value, det, prob and ref_err as read-only C-contiguous rows of the last
    axis, a radius 0 everywhere (an exact input's) as one row of zeros
    (:func:`~numoracle.oracle.fused_cpu.radius_rows`), prob the det's rows where ``t``
    holds one array for both."""
    n = shape[-1]
    v = fused_cpu.dense_rows(t.value, shape, n)
    d = fused_cpu.radius_rows(t.det, shape, n)
    p = d if t.prob is t.det else fused_cpu.radius_rows(t.prob, shape, n)
    return v, d, p, fused_cpu.radius_rows(t.ref_err, shape, n)


def fused_softmax_backward(ctx: RuleContext, grad: Tracked, out: Tracked,
                           axis: int) -> Tracked | None:
    """softmax's ``softmax_backward_rule``, ``y (g - sum(g y))``, by two whole-rule
    loops around the primitives' own sum (:mod:`~numoracle.oracle._numba_softmax_grad`:
    the same bits, special points included); None where they do not run: not NumPy, no
    numba, fewer than LOOP_MIN elements, an axis other than the last, operands of
    other shapes, an escalated operand."""
    shape = out.shape
    loops = fused_cpu.softmax_grad_loops()
    if (loops is None or array_module(out.value) is not np
            or array_module(grad.value) is not np or grad.lo is not None or out.lo is not None
            or out.value.ndim == 0 or grad.shape != shape or axis != out.value.ndim - 1
            or shape[-1] == 0 or not whole_rules(np, out.value.size)):
        return None
    m = ctx.model
    acc = m.accumulate
    params = np.array([m.acc_unit(), acc.tiny, U64, acc.max])
    ints = np.array([acc.t, acc.emin], dtype=np.int64)
    g, y = _operand_rows(grad, shape), _operand_rows(out, shape)
    shared = grad.prob is grad.det and out.prob is out.det
    rows = g[0].shape[0]
    flags = np.empty((rows, 2), dtype=np.bool_)
    gy = tuple(np.empty(g[0].shape) for _ in range(5))
    gp = np.empty((1, 1)) if shared else gy[2]
    y_exact = may_be_exact(out)
    loops.products(*g, *y, y_exact and may_be_exact(grad), shared, params, ints, gy[0], gy[1], gp,
                   gy[3], gy[4], flags)
    gy = bounded(*(a.reshape(shape) for a in (gy[0], gy[1], gy[1] if shared else gp)),
                 ref_err=gy[3].reshape(shape), mag=gy[4].reshape(shape),
                 n=ew._max_n(grad, out))
    s = _sum_keep(ctx, gy, axis, special=bool(flags[:, 1].any()))
    sr = _per_row(s, rows)
    with np.errstate(invalid="ignore"):
        reach = sr[:, 1] + sr[:, 3]
        special = flags[:, 0] | ((reach == 0) & ((sr[:, 0] == 0) | np.isinf(sr[:, 0]))) | (
            np.isnan(sr[:, 0]) & np.isfinite(reach))
    test_sub = may_be_exact(grad, s)
    shared = shared and bool(np.array_equal(sr[:, 1], sr[:, 2]))
    res = tuple(np.empty(g[0].shape) for _ in range(5))
    rp = np.empty((1, 1)) if shared else res[2]
    loops.rows(*g, *y, sr, special, np.array([test_sub, test_sub and y_exact]),
               shared, params, ints, res[0], res[1], rp, res[3], res[4])
    n_d = grad.n + s.n
    n = max(out.n, n_d) if isinstance(out.n, int) and isinstance(n_d, int) else \
        np.maximum.reduce(np.broadcast_arrays(np.asarray(out.n), np.asarray(n_d)))
    return bounded(*(a.reshape(shape) for a in (res[0], res[1], res[1] if shared else rp)),
                   ref_err=res[3].reshape(shape), mag=res[4].reshape(shape), n=n)
