"""B-spline bases in the error-tracking arithmetic (DESIGN §2), in float64 and in mpmath.

Convention (efficient-kan's): a grid of ``G`` intervals on ``[lo, hi]`` with
step ``h = (hi - lo) / G`` is extended by ``k`` knots on each side, so feature
``i`` has the ``M = G + 2k + 1`` knots ``t_m = lo + (m - k) h`` and
``C = G + k`` bases of *order* ``k`` (``k`` is the polynomial degree: ``k = 3``
is cubic). The bases follow the Cox–de Boor recursion exactly as efficient-kan
and pykan evaluate it::

    B_{m,0}(x) = 1 if t_m <= x < t_{m+1} else 0
    B_{m,p}(x) = (x - t_m) / (t_{m+p} - t_m) B_{m,p-1}(x)
               + (t_{m+p+1} - x) / (t_{m+p+1} - t_{m+1}) B_{m+1,p-1}(x)

and their derivative in closed form
``B'_{m,k} = k B_{m,k-1} / (t_{m+k} - t_m) - k B_{m+1,k-1} / (t_{m+k+1} - t_{m+1})``.

The knots are an input (efficient-kan keeps them as a buffer), so a kernel's
knot differences are rounded in its own precision: they are tracked with
:func:`~numoracle.oracle.tracked.sub`. Each quotient is tracked with
:func:`~numoracle.oracle.elementwise.div` and one more rounding, so a kernel
may divide or multiply by a rounded reciprocal.

Bounds for an uncertain ``x`` (a later layer of a network, whose input is the
kernel's own output) are Lipschitz bounds: the recursion is evaluated at the
oracle's value of ``x`` and widened by ``L r``, where for order ``k >= 1``
(continuous bases) ``|B'| <= L1 = k / min_span_k`` and ``|B''| <= L2 =
2 (k / min_span_k) ((k - 1) / min_span_{k-1})`` (``2 / h^2`` on a uniform grid),
``min_span_p`` the shortest ``t_{m+p} - t_m``. The order-0 cell a kernel picks
near a knot does not matter for continuous bases; for the order-1 derivative
(a step at every knot) the inputs within reach of a knot are judged against
either side. A kernel that finds the cell by arithmetic (``floor((x - t_0) / h)``)
may pick the neighbouring cell within :data:`CELL_ULPS` ulps of a knot; the
neighbouring polynomial piece differs there by at most ``2 L d``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import mpmath
import numpy as np

from ..errors import InvalidArgument
from .elementwise import div, mul
from .precision import PrecisionModel
from .tracked import U64, Tracked, add, exact, mul_scalar, sub

__all__ = ["uniform_grid", "bases_float64", "derivative_float64", "bases_mp", "derivative_mp",
           "Levels", "tracked_levels", "tracked_derivative", "lipschitz", "near_knot",
           "shifted_derivative", "CELL_ULPS", "MAX_ORDER"]

#: highest spline order the oracle takes
MAX_ORDER = 8
#: ulps (of the accumulation format, relative to the largest knot or input magnitude)
#: within which a kernel that locates the cell by arithmetic may pick a neighbour
CELL_ULPS = 8.0


def uniform_grid(in_features: int, grid_size: int, spline_order: int,
                 lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    """The ``(in_features, grid_size + 2 spline_order + 1)`` knots of efficient-kan,
    ``lo + (m - k) (hi - lo) / G``, in float64 (round them to the storage format)."""
    if not hi > lo:
        raise InvalidArgument(f"grid range [{lo=}, {hi=}] must have lo < hi, e.g. [-1, 1]")
    h = (hi - lo) / grid_size
    row = np.arange(-spline_order, grid_size + spline_order + 1, dtype=np.float64) * h + lo
    return np.broadcast_to(row, (in_features, row.size)).copy()


def _check(x: np.ndarray, grid: np.ndarray, order: int) -> None:
    if not 0 <= order <= MAX_ORDER:
        raise InvalidArgument(f"spline order {order=} must lie in [0, {MAX_ORDER}]")
    if grid.ndim != 2 or x.shape[-1] != grid.shape[0] or grid.shape[1] < order + 2:
        raise InvalidArgument(
            f"grid.shape={grid.shape} must be (in_features, knots) with in_features = "
            f"x.shape[-1] = {x.shape[-1]} and at least order + 2 = {order + 2} knots")


# -- plain float64 (efficient-kan's formula) -------------------------------------------------
def _levels_float64(x: np.ndarray, grid: np.ndarray, order: int) -> list[np.ndarray]:
    _check(x, grid, order)
    xe, t = x[..., None], grid
    b = ((xe >= t[:, :-1]) & (xe < t[:, 1:])).astype(np.float64)
    out = [b]
    for p in range(1, order + 1):
        b = ((xe - t[:, :-(p + 1)]) / (t[:, p:-1] - t[:, :-(p + 1)]) * b[..., :-1]
             + (t[:, p + 1:] - xe) / (t[:, p + 1:] - t[:, 1:-p]) * b[..., 1:])
        out.append(b)
    return out


def bases_float64(x: np.ndarray, grid: np.ndarray, order: int) -> np.ndarray:
    """``B_{c,k}(x)`` in float64, shape ``x.shape + (C,)``."""
    return _levels_float64(np.asarray(x, np.float64), np.asarray(grid, np.float64), order)[-1]


def derivative_float64(x: np.ndarray, grid: np.ndarray, order: int) -> np.ndarray:
    """``B'_{c,k}(x)`` in float64 (closed form; 0 for order 0)."""
    x, grid = np.asarray(x, np.float64), np.asarray(grid, np.float64)
    if order == 0:
        return np.zeros(x.shape + (grid.shape[1] - 1,))
    prev = _levels_float64(x, grid, order - 1)[-1]
    t, k = grid, order
    return (k * prev[..., :-1] / (t[:, k:-1] - t[:, :-(k + 1)])
            - k * prev[..., 1:] / (t[:, k + 1:] - t[:, 1:-k]))


# -- mpmath ------------------------------------------------------------------------------------
def bases_mp(x: Any, knots: Any, order: int) -> list[Any]:
    """``[B_{c,k}(x)]`` in mpmath at the current precision (``x`` and knots as mpf)."""
    t = [mpmath.mpf(v) for v in knots]
    x = mpmath.mpf(x)
    b = [mpmath.mpf(1) if t[m] <= x < t[m + 1] else mpmath.mpf(0) for m in range(len(t) - 1)]
    for p in range(1, order + 1):
        b = [(x - t[m]) / (t[m + p] - t[m]) * b[m]
             + (t[m + p + 1] - x) / (t[m + p + 1] - t[m + 1]) * b[m + 1]
             for m in range(len(b) - 1)]
    return b


def derivative_mp(x: Any, knots: Any, order: int) -> list[Any]:
    """``[B'_{c,k}(x)]`` in mpmath (closed form)."""
    t = [mpmath.mpf(v) for v in knots]
    prev = bases_mp(x, knots, order - 1)
    k = order
    return [k * prev[m] / (t[m + k] - t[m]) - k * prev[m + 1] / (t[m + k + 1] - t[m + 1])
            for m in range(len(prev) - 1)]


# -- tracked -----------------------------------------------------------------------------------
def _slack(t: Tracked, model: PrecisionModel, roundings: float = 1.0) -> Tracked:
    """``t`` with ``roundings`` more roundings of the accumulation format allowed:
    ``roundings u (|v| + det) + tiny`` added to both kernel radii."""
    u, tiny = model.acc_unit(), model.accumulate.tiny
    extra = roundings * (u * (np.abs(t.value) + t.det + t.ref_err) + tiny)
    return replace(t, det=t.det + extra, prob=t.prob + extra)


def quotient(a: Tracked, b: Tracked, model: PrecisionModel) -> Tracked:
    """``a / b`` as a kernel computes it: a division, or a product with a rounded
    reciprocal (one more rounding)."""
    return _slack(div(a, b, model), model)


def _cols(t: Tracked, sl: slice) -> Tracked:
    """The last-axis slice ``sl`` of every array of ``t``."""
    def f(a: Any) -> Any:
        return np.broadcast_to(a, t.value.shape)[..., sl]
    return replace(t, value=f(t.value), ref_err=f(t.ref_err), det=f(t.det), prob=f(t.prob),
                   mag=f(t.mag), lo=None if t.lo is None else f(t.lo),
                   n=t.n if isinstance(t.n, int) else f(t.n))


@dataclass(frozen=True)
class Levels:
    """The recursion at an exact ``x``: ``bases[p]`` of shape ``(B, I, M - 1 - p)``;
    for ``p >= 1`` the weights ``q1[p] = (x - t_m) / (t_{m+p} - t_m)``,
    ``q2[p] = (t_{m+p+1} - x) / (t_{m+p+1} - t_{m+1})`` and the knot
    differences ``den1[p]``, ``den2[p]`` (index 0 unused)."""

    bases: list[Tracked]
    q1: list[Tracked | None]
    q2: list[Tracked | None]
    den1: list[Tracked | None]
    den2: list[Tracked | None]


def tracked_levels(x: np.ndarray, grid: np.ndarray, order: int,
                   model: PrecisionModel) -> Levels:
    """Cox–de Boor at the exact values ``x`` (``(B, I)``) on ``grid`` (``(I, M)``),
    every level tracked under ``model`` (module docstring)."""
    x = np.asarray(x, np.float64)
    grid = np.asarray(grid, np.float64)
    _check(x, grid, order)
    xe = exact(x[..., None])
    t = grid[None]
    with np.errstate(invalid="ignore"):
        b0 = ((x[..., None] >= t[..., :-1]) & (x[..., None] < t[..., 1:])).astype(np.float64)
    lv = Levels([exact(b0)], [None], [None], [None], [None])
    for p in range(1, order + 1):
        prev = lv.bases[-1]
        t_lo, t_hi1 = exact(t[..., :-(p + 1)]), exact(t[..., p:-1])
        t_hi2, t_lo2 = exact(t[..., p + 1:]), exact(t[..., 1:-p])
        den1, den2 = sub(t_hi1, t_lo, model), sub(t_hi2, t_lo2, model)
        q1 = quotient(sub(xe, t_lo, model), den1, model)
        q2 = quotient(sub(t_hi2, xe, model), den2, model)
        b = add(mul(q1, _cols(prev, slice(None, -1)), model),
                mul(q2, _cols(prev, slice(1, None)), model), model)
        lv.bases.append(b)
        lv.q1.append(q1)
        lv.q2.append(q2)
        lv.den1.append(den1)
        lv.den2.append(den2)
    return lv


def tracked_derivative(lv: Levels, model: PrecisionModel) -> Tracked:
    """``B'_{c,k}`` in closed form from the levels (order ``k >= 1``); each product
    and quotient may be associated either way (one more rounding each)."""
    k = len(lv.bases) - 1
    if k < 1:
        raise InvalidArgument("the derivative needs spline order >= 1")
    prev = lv.bases[k - 1]
    den1, den2 = lv.den1[k], lv.den2[k]
    assert den1 is not None and den2 is not None
    a1 = _slack(mul_scalar(quotient(_cols(prev, slice(None, -1)), den1, model), k, model), model)
    a2 = _slack(mul_scalar(quotient(_cols(prev, slice(1, None)), den2, model), k, model), model)
    return sub(a1, a2, model)


def shifted_derivative(x: np.ndarray, grid: np.ndarray, order: int, side: int,
                       model: PrecisionModel) -> Tracked:
    """The order-1 derivative evaluated with the order-0 cell moved by ``side``
    (+1 or -1) where that cell exists: the other side of a knot."""
    t = np.asarray(grid, np.float64)[None]
    with np.errstate(invalid="ignore"):
        cell = ((x[..., None] >= t[..., :-1]) & (x[..., None] < t[..., 1:]))
    moved = np.zeros_like(cell)
    if side > 0:
        moved[..., 1:] = cell[..., :-1]
    else:
        moved[..., :-1] = cell[..., 1:]
    b0 = exact(moved.astype(np.float64))
    den1, den2 = sub(exact(t[..., 1:-1]), exact(t[..., :-2]), model), \
        sub(exact(t[..., 2:]), exact(t[..., 1:-1]), model)
    lv = Levels([b0, b0], [None, None], [None, None], [None, den1], [None, den2])
    return tracked_derivative(lv, model)


def _min_span(grid: np.ndarray, p: int) -> np.ndarray:
    """Shortest ``t_{m+p} - t_m`` per feature, rounded down."""
    span = np.min(grid[:, p:] - grid[:, :-p], axis=1)
    return span * (1.0 - 4 * U64)


def lipschitz(grid: np.ndarray, order: int) -> tuple[np.ndarray, np.ndarray]:
    """Per feature, ``(L1, L2)``: bounds of ``|B'|`` and ``|B''|`` over all bases
    of ``order`` (inf where undefined: ``L1`` for order 0, ``L2`` for order <= 1)."""
    grid = np.asarray(grid, np.float64)
    n = grid.shape[0]
    inf = np.full(n, np.inf)
    if order < 1:
        return inf, inf
    l1 = order / _min_span(grid, order) * (1 + 4 * U64)
    if order < 2:
        return l1, inf
    l2 = 2.0 * l1 * ((order - 1) / _min_span(grid, order - 1)) * (1 + 4 * U64)
    return l1, l2


def near_knot(x: np.ndarray, grid: np.ndarray, reach: np.ndarray) -> np.ndarray:
    """Where a knot lies within ``reach`` of ``x`` (``(B, I)`` mask)."""
    d = np.min(np.abs(x[..., None] - np.asarray(grid, np.float64)[None]), axis=-1)
    with np.errstate(invalid="ignore"):
        return d <= reach


def cell_reach(x: np.ndarray, grid: np.ndarray, model: PrecisionModel) -> np.ndarray:
    """How far from a knot a kernel's cell choice may go wrong (:data:`CELL_ULPS`)."""
    top = np.max(np.abs(grid), axis=1)[None]
    with np.errstate(invalid="ignore"):
        return CELL_ULPS * model.acc_unit() * np.maximum(np.abs(x), top)
