"""Layer norm's rule as whole-rule loops on the CPU.

The rules of :mod:`.normalization` compose subtractions, products and widenings of
whole arrays around their sums, each primitive several passes over the input on
NumPy. Where the loops of :mod:`~numoracle.oracle.fused_cpu` run (:func:`loops_run`)
each stretch between two sums is one loop over the rows (lanes of the normalised
trailing axes) instead, performing the primitives' float64 operations in their order
(:mod:`~numoracle.oracle._numba_norm`); the sums stay the primitives' own NumPy calls
(their summation order sets their bits). So each form here gives the same bits as
the primitives, which stay the reference implementation (the tests compare both).
Where a sum is all its terms are for (the variance's; backward the means of ``g w``
and ``g w xhat``, the weight gradient's column sums) the loop sums them as it forms
them instead (:data:`FOLD_SUMS`; :func:`deviation_square_sum`, :func:`backward_sums`):
no array of the terms, the sums' values in another order and ``S`` in float64, a
sound bound as the contraction's (``tracked.sum_of_parts``):

- forward, before the sums: each row's largest ``|x| + det + ref_err`` (the streamed
  mean's widening) and the two-pass variance's terms ``(x - mean)^2``;
- forward, after them: ``(x - mean) rstd``, widened for a kernel that folds the
  statistics, times the weight (unbounded where the folded products may overflow),
  plus the bias;
- backward, before its sums: ``g w``, ``g w xhat`` and ``g xhat``; after them the
  input gradient ``rstd ((g w - a) - xhat b)``; with the sums folded, both in one pass
  over the rows, each row's means ``a`` and ``b`` finished in the loop as the
  primitives finish them (:func:`backward_merged`; ``g w`` formed once, the row in
  cache).

On CuPy the same loops are device kernels (:mod:`~numoracle.oracle.fused_norm_cuda`,
where :func:`~numoracle.oracle.fused.whole_rules` lets them run and
``NUMORACLE_DEVICE_NORM=0`` does not switch them off: the same bits, no transcendental being
computed in them), the sums the tracked sums'.

A rule takes the primitives where these do not apply: statistics over axes other
than the trailing ones (batch norm), an escalated operand, an empty lane, fewer
than ``LOOP_MIN`` elements on the host, torch's namespace. No special value needs the
primitives: these rules' primitives decide nothing (no ``ieee`` rule), and the
loops carry NaN and the infinities as their arithmetic does.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ... import elementwise as ew
from ... import fused_cpu, fused_norm_cuda
from ...fused import whole_rules
from ...tracked import (
    ESCALATE_SHARE,
    U64,
    Tracked,
    bounded,
    may_be_exact,
    parts_coefficients,
    scalar_coefficients,
    sum_of_parts,
)
from ...xp import array_module
from ..rules import RuleContext
from ._common import as_tracked, factor_error, tmap_all
from ._softmax_rows import _per_row

__all__ = ["loops_run", "runs", "row_top", "deviation_squares", "deviation_square_sum",
           "normalized_affine",
           "backward_products", "Weighted", "backward_sums", "input_grad", "backward_merged"]


#: whether the loops sum the terms they form where the sum is all they are for (the
#: two-pass variance's squared deviations): the sums' values and radii as
#: :func:`~numoracle.oracle.tracked.sum_of_parts` makes them, ``S`` summed in float64,
#: where the primitives' contraction sums ``S`` in float32 and its values by a GEMV (other
#: bits, each a sound bound); off, every step gives the primitives' bits
FOLD_SUMS = True


def loops_run(xp: Any, size: int) -> bool:
    """Whether a layer norm over ``size`` elements of ``xp`` runs as whole-rule loops:
    NumPy's, numba installed and switched on, from LOOP_MIN elements; CuPy's kernels
    where :func:`~numoracle.oracle.fused.whole_rules` lets them run and
    ``NUMORACLE_DEVICE_NORM=0`` does not switch them off (:func:`.fused_norm_cuda.switched_on`)."""
    if xp is np:
        return size >= fused_cpu.LOOP_MIN and fused_cpu.norm_available()
    return whole_rules(xp, size) and fused_norm_cuda.switched_on()


def _loops(xp: Any) -> Any:
    """The functions of ``xp``: numba's loops on NumPy, CuPy's kernels else."""
    return fused_cpu if xp is np else fused_norm_cuda


def runs(x: Tracked, dims: tuple[int, ...]) -> bool:
    """Whether statistics of ``x`` over ``dims`` take the loops: ``dims`` the trailing
    axes, lanes and rows not empty, ``x`` not escalated (:func:`loops_run`)."""
    nd = np.ndim(x.value)
    k = len(dims)
    if nd == 0 or x.lo is not None or tuple(dims) != tuple(range(nd - k, nd)):
        return False
    return x.value.size > 0 and loops_run(array_module(x.value), x.value.size)


class _N(NamedTuple):
    n: Any


def _longest(a: Any, b: Any) -> Any:
    """The accumulation length of a product of operands of lengths ``a`` and ``b``."""
    return ew._max_n(_N(a), _N(b))


def _as_rows(t: Tracked, n: int) -> tuple[np.ndarray, ...]:
    """``t``'s value and radii as C-contiguous rows of ``n`` (one array where two
    radii are one; on NumPy read-only, an exact operand's zero radius one row:
    :func:`~numoracle.oracle.fused_cpu.radius_rows`)."""
    shape = t.shape
    xp = array_module(t.value)
    loops = _loops(xp)
    if loops is fused_cpu:
        v, rows = fused_cpu.dense_rows(t.value, shape, n), fused_cpu.radius_rows
    else:
        v, rows = xp.ascontiguousarray(t.value, dtype=np.float64).reshape(-1, n), \
            loops.dense_rows
    d = rows(t.det, shape, n)
    p = d if t.prob is t.det else rows(t.prob, shape, n)
    return v, d, p, rows(t.ref_err, shape, n)


def _per_column(t: Tracked, n: int) -> np.ndarray:
    """A tracked operand of the trailing shape as a ``(4, n)`` array: value, det,
    prob, ref_err."""
    shape = t.shape
    xp = array_module(t.value)
    return xp.ascontiguousarray(xp.stack(
        [xp.broadcast_to(xp.asarray(a, dtype=np.float64), shape).reshape(n)
         for a in (t.value, t.det, t.prob, t.ref_err)]))


def _params(ctx: RuleContext) -> tuple[tuple[float, ...], tuple[int, int]]:
    acc = ctx.model.accumulate
    return (ctx.model.acc_unit(), acc.tiny, U64, acc.max), (int(acc.t), int(acc.emin))


def _lane(x: Tracked, kept: tuple[int, ...]) -> tuple[int, int]:
    """Rows and the lane's length of ``x`` with statistics of shape ``kept``."""
    rows = int(np.prod(kept))
    return rows, x.value.size // rows


def row_top(x: Tracked, dims: tuple[int, ...]) -> np.ndarray:
    """The largest ``|x| + det + ref_err`` over ``dims`` (no keepdim), as
    ``normalization.streamed_mean`` takes it (:func:`runs` holds)."""
    lead = x.shape[:x.value.ndim - len(dims)]
    v, d, _, r = _as_rows(x, x.value.size // max(int(np.prod(lead)), 1))
    return _loops(array_module(v)).row_top(v, d, r).reshape(lead)


def deviation_squares(ctx: RuleContext, x: Tracked, mean: Tracked) -> Tracked:
    """``(x - mean)^2`` as the two-pass variance forms its terms (``mean`` of the
    statistics' kept shape; :func:`runs` holds): the same bits, its magnitude
    ``|d d| = d d`` (a sum does not read it)."""
    rows, n = _lane(x, mean.shape)
    params, ints = _params(ctx)
    v, d, p, r = _loops(array_module(x.value)).deviation_squares(
        _as_rows(x, n), _per_row(mean, rows), may_be_exact(x, mean), params, ints)
    shape = x.shape
    n_d = x.n + mean.n
    return bounded(v.reshape(shape), d.reshape(shape), p.reshape(shape),
                   ref_err=r.reshape(shape), mag=v.reshape(shape), n=_longest(n_d, n_d))


def deviation_square_sum(ctx: RuleContext, x: Tracked, mean: Tracked, dims: tuple[int, ...]
                         ) -> Tracked | None:
    """The sum over ``dims`` (the statistics' axes) of :func:`deviation_squares`' terms (no
    keepdim) as one loop forms and sums them (NumPy only): the sum's value and
    radii as ``tracked.sum_`` makes them with ``S`` summed in float64
    (:func:`~numoracle.oracle.tracked.sum_of_parts`), no array of the terms made.
    None where that does not decide (CuPy, or see ``sum_of_parts``): the caller
    forms the terms and sums them then."""
    if not FOLD_SUMS or array_module(x.value) is not np:
        return None
    rows, n = _lane(x, mean.shape)
    params, ints = _params(ctx)
    parts = fused_cpu.deviation_square_sums(_as_rows(x, n), _per_row(mean, rows),
                                            may_be_exact(x, mean), params, ints)
    lead = x.shape[:x.value.ndim - len(dims)]
    return sum_of_parts(parts.reshape(lead + (5,)), n, ctx.model)


def _operand(w: Any, ctx: RuleContext, shape: tuple[int, ...]) -> Tracked | None:
    """A weight or bias as a tracked operand of the trailing ``shape``; None where it
    is escalated or of another shape."""
    t = as_tracked(w, ctx.model)
    if t.lo is not None or int(np.prod(t.shape)) != int(np.prod(shape)):
        return None
    return tmap_all(t, lambda a: np.reshape(a, shape))


def normalized_affine(ctx: RuleContext, x: Tracked, mean: Tracked, rstd: Tracked,
                      weight: Any, bias: Any, affine_shape: tuple[int, ...]
                      ) -> Tracked | None:
    """``affine(normalized(x, mean, rstd), weight, bias, affine_shape, fold_magnitude(x,
    mean, rstd))`` of :mod:`.normalization` in one loop (``mean`` and ``rstd`` of the
    statistics' kept shape; :func:`runs` holds); None where a weight or bias is not
    of the trailing shape or is escalated, or ``mean`` or ``rstd`` is escalated."""
    rows, n = _lane(x, mean.shape)
    trailing = x.shape[len(x.shape) - len(affine_shape):] if affine_shape else ()
    if mean.lo is not None or rstd.lo is not None or mean.shape != rstd.shape or (
            (weight is not None or bias is not None) and tuple(affine_shape) != trailing):
        return None
    w = None if weight is None else _operand(weight, ctx, trailing)
    b = None if bias is None else _operand(bias, ctx, trailing)
    if (weight is not None and w is None) or (bias is not None and b is None):
        return None
    params, ints = _params(ctx)
    value, det, prob, ref, mag = _loops(array_module(x.value)).normalized_rows(
        _as_rows(x, n), _per_row(mean, rows), _per_row(rstd, rows),
        None if w is None else _per_column(w, n), None if b is None else _per_column(b, n),
        may_be_exact(x, mean), params, ints)
    length = _longest(x.n + mean.n, rstd.n)
    if w is not None:
        length = _longest(length, w.n)
    if b is not None:
        length = length + b.n
    shape = x.shape
    return bounded(value.reshape(shape), det.reshape(shape), prob.reshape(shape),
                   ref_err=ref.reshape(shape), mag=mag.reshape(shape), n=length)


def _rows_ok(x: Tracked, dims: tuple[int, ...], *stats: Tracked) -> bool:
    """Whether ``stats`` are of the statistics' kept shape and not escalated."""
    kept = tuple(1 if d in dims else s for d, s in enumerate(x.shape))
    return all(t.lo is None and t.shape == kept for t in stats)


def _backward_shapes(ctx: RuleContext, grad: Tracked, x: Tracked, dims: tuple[int, ...],
                     mean: Tracked, rstd: Tracked, weight: Any
                     ) -> tuple[int, int, Tracked | None] | None:
    """Rows, the lane's length and the weight as a tracked operand of the trailing
    shape (None without one) for layer norm's backward loops; None where they do not
    run (:func:`runs`; ``grad`` of another shape or escalated, ``mean`` or ``rstd``
    not of the kept shape or escalated, a weight not of the trailing shape)."""
    if not runs(x, dims) or grad.shape != x.shape or grad.lo is not None or \
            not _rows_ok(x, dims, mean, rstd):
        return None
    rows, n = _lane(x, mean.shape)
    w = None if weight is None else _operand(weight, ctx, x.shape[x.value.ndim - len(dims):])
    if weight is not None and w is None:
        return None
    return rows, n, w


def backward_products(ctx: RuleContext, grad: Tracked, x: Tracked, dims: tuple[int, ...],
                      mean: Tracked, rstd: Tracked, weight: Any, want: tuple[bool, bool, bool]
                      ) -> tuple[Tracked | None, ...] | None:
    """Layer norm backward's products before its sums, ``xhat = (x - mean) rstd``:
    with ``want`` (the weighted gradient, ``g w xhat``, ``g xhat``) ``g w`` (``g``
    itself without a weight), ``g w xhat`` and ``g xhat`` (None where not wanted);
    None where the loops do not run (:func:`runs`; ``grad`` of another shape or
    escalated, ``mean`` or ``rstd`` not of the kept shape or escalated, a weight not
    of the trailing shape)."""
    shapes = _backward_shapes(ctx, grad, x, dims, mean, rstd, weight)
    if shapes is None:
        return None
    rows, n, w = shapes
    params, ints = _params(ctx)
    weighted = w is not None and want[0]
    gx, gxh, gh = _loops(array_module(x.value)).norm_backward_products(
        _as_rows(x, n), _as_rows(grad, n), _per_row(mean, rows), _per_row(rstd, rows),
        _per_column(w, n) if weighted else None, (want[1], want[2]),
        (weighted and may_be_exact(grad, w), may_be_exact(x, mean)), params, ints)
    shape = x.shape
    n_xhat = _longest(x.n + mean.n, rstd.n)

    def tracked(arrays: tuple[np.ndarray, ...] | None, length: Any) -> Tracked | None:
        if arrays is None:
            return None
        v, d, p, r = (a.reshape(shape) for a in arrays)
        return bounded(v, d, p, ref_err=r, mag=v, n=length)  # (summed: mag not read)
    g_w = tracked(gx, _longest(grad.n, w.n)) if weighted else grad
    return (g_w, tracked(gxh, _longest(g_w.n, n_xhat)),
            tracked(gh, _longest(grad.n, n_xhat)))


class Weighted(NamedTuple):
    """The weighted gradient ``g w`` left to be formed where it is read (by
    :func:`input_grad`'s loop, as :func:`backward_products` forms it): the weight as
    a ``(4, n)`` array, whether its exact test runs, its accumulation length."""

    w: np.ndarray
    test: bool
    n: Any


def backward_sums(ctx: RuleContext, grad: Tracked, x: Tracked, dims: tuple[int, ...],
                  mean: Tracked, rstd: Tracked, weight: Any, want: tuple[bool, bool, bool]
                  ) -> tuple[Any, ...] | None:
    """:func:`backward_products` with the sums its products are for, formed and summed
    in one loop (NumPy only, ``FOLD_SUMS``): the weighted gradient as a
    :class:`Weighted` (None without a weight: ``g`` itself; no array of ``g w`` is
    kept), with ``want[1]`` the sums over ``dims`` of ``g w`` and of
    ``g w xhat`` (no keepdim), with ``want[2]`` the sums of ``g xhat`` over the other
    axes (of the trailing shape); those not wanted None. Each sum as
    :func:`~numoracle.oracle.tracked.sum_of_parts` makes it (``S`` summed in float64):
    no array of ``g w xhat`` or ``g xhat`` is made. None where the loops do not run
    (see :func:`backward_products`) or a sum is not decided so (the caller takes
    :func:`backward_products` and the primitives' sums then)."""
    shapes = _backward_shapes(ctx, grad, x, dims, mean, rstd, weight)
    if not FOLD_SUMS or shapes is None or array_module(x.value) is not np:
        return None
    rows, n, w = shapes
    trailing = x.shape[x.value.ndim - len(dims):]
    params, ints = _params(ctx)
    weighted = w is not None and want[0]
    rows_a, rows_b, cols = fused_cpu.norm_backward_sums(
        _as_rows(x, n), _as_rows(grad, n), _per_row(mean, rows), _per_row(rstd, rows),
        _per_column(w, n) if weighted else None, (want[1], want[2]),
        (weighted and may_be_exact(grad, w), may_be_exact(x, mean)), params, ints)
    lead = x.shape[:x.value.ndim - len(dims)]
    sums: list[Tracked | None] = [None, None, None]
    if want[1]:
        sums[0] = sum_of_parts(rows_a.reshape(lead + (5,)), n, ctx.model)
        sums[1] = sum_of_parts(rows_b.reshape(lead + (5,)), n, ctx.model)
    if want[2]:
        sums[2] = sum_of_parts(cols.reshape(trailing + (5,)), rows, ctx.model)
    if any(s is None for s, on in zip(sums, (want[1], want[1], want[2]), strict=True) if on):
        return None
    g_w = Weighted(_per_column(w, n), may_be_exact(grad, w), _longest(grad.n, w.n)) \
        if weighted else None
    return (g_w, *sums)


def input_grad(ctx: RuleContext, x: Tracked, g: Tracked, mean: Tracked, rstd: Tracked,
               a: Tracked, b: Tracked, weighted: Weighted | None = None) -> Tracked:
    """``rstd ((g - a) - xhat b)``, ``xhat = (x - mean) rstd``, in one loop (after
    :func:`backward_products`; ``a``, ``b`` the means of ``g`` and ``g xhat``, of the
    statistics' kept shape); with ``weighted`` (after :func:`backward_sums`, NumPy)
    ``g`` is the gradient and the loop forms ``g w`` first."""
    rows, n = _lane(x, mean.shape)
    params, ints = _params(ctx)
    extra: tuple[Any, ...] = () if weighted is None else (weighted.w, weighted.test)
    value, det, prob, ref, mag = _loops(array_module(x.value)).input_grad_rows(
        _as_rows(x, n), _as_rows(g, n), *(_per_row(t, rows) for t in (mean, rstd, a, b)),
        may_be_exact(x, mean) or may_be_exact(g, a), params, ints, *extra)
    shape = x.shape
    n_xhat = _longest(x.n + mean.n, rstd.n)
    n_g = g.n if weighted is None else weighted.n
    length = _longest((n_g + a.n) + _longest(n_xhat, b.n), rstd.n)
    return bounded(value.reshape(shape), det.reshape(shape), prob.reshape(shape),
                   ref_err=ref.reshape(shape), mag=mag.reshape(shape), n=length)


def backward_merged(ctx: RuleContext, grad: Tracked, x: Tracked, dims: tuple[int, ...],
                    mean: Tracked, rstd: Tracked, weight: Any, want_gh: bool
                    ) -> tuple[Tracked, Tracked | None] | None:
    """:func:`backward_sums` and :func:`input_grad` (every sum wanted but the columns'
    of ``g xhat``, those with ``want_gh``) in one pass over the rows (NumPy only,
    ``FOLD_SUMS``): each row's means ``a`` and ``b`` finished in the loop as
    ``sum_of_parts`` and the division by the lane's length (``scaled``) make them,
    then its input gradient from the row's ``g w`` and ``xhat`` kept in cache: the
    same bits as the two loops, without forming ``g w`` and ``xhat`` twice. The
    input gradient and the column sums (None without ``want_gh``); None where the
    loops do not run or a sum is not decided so (the caller takes the two loops)."""
    shapes = _backward_shapes(ctx, grad, x, dims, mean, rstd, weight)
    if not FOLD_SUMS or shapes is None or array_module(x.value) is not np:
        return None
    rows, n, w = shapes
    parts = parts_coefficients(n, ctx.model)
    if parts is None:
        return None
    k = float(n)
    divide = scalar_coefficients(k, ctx.model, True, factor_error(ctx, k, True))
    fin = (*parts, ESCALATE_SHARE, k, *divide)
    params, ints = _params(ctx)
    weighted = w is not None
    test = may_be_exact(x, mean)
    done = fused_cpu.norm_backward_merged(
        _as_rows(x, n), _as_rows(grad, n), _per_row(mean, rows), _per_row(rstd, rows),
        _per_column(w, n) if weighted else None, want_gh,
        (weighted and may_be_exact(grad, w), test), params, ints, fin)
    if done is None:
        return None
    (value, det, prob, ref, mag), cols = done
    sum_h = None
    if want_gh:
        sum_h = sum_of_parts(cols.reshape(x.shape[x.value.ndim - len(dims):] + (5,)), rows,
                             ctx.model)
        if sum_h is None:
            return None
    shape = x.shape
    n_xhat = _longest(x.n + mean.n, rstd.n)
    n_g = _longest(grad.n, w.n) if weighted else grad.n
    length = _longest((n_g + n) + _longest(n_xhat, n), rstd.n)  # (a's and b's n: n)
    gi = bounded(value.reshape(shape), det.reshape(shape), prob.reshape(shape),
                 ref_err=ref.reshape(shape), mag=mag.reshape(shape), n=length)
    return gi, sum_h
