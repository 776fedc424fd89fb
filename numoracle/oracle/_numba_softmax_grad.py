"""The whole-rule loops of softmax's backward, compiled by numba (imported only where
numba is installed, through :mod:`~numoracle.oracle.fused_cpu`).

``softmax_backward_rule`` (:mod:`~numoracle.oracle.traced.library.softmax`) is
``y (g - sum(g y))`` along the last axis, four primitives (ieee's ``mul``, the sum,
ieee's ``sub``, ieee's ``mul``), each several passes over the whole input on NumPy:
the products and their radii, the exact tests, the scans for special points and
ieee's ``carry`` of them. Here the elementwise part is two loops over the rows, one
before the sum (:func:`products`: ``g y``) and one after (:func:`rows`: ``g - s`` and
``y (g - s)``), each performing the primitives' float64 operations in their order
(``elementwise.mul`` as its loops ``mul_radii`` and ``mul_exact``, ``tracked.sub`` as
``add_radii`` and ``add_exact``, ieee's ``carry`` as ``carry_binary``): the same bits.
No exponential is evaluated: every bit is the primitives'.

Each row runs a lane without ieee's special values first (its exact tests on or off,
constants where it is called: the loop vectorises); a row where some operand is a
special point (an exact 0 or infinity, a NaN with a finite reach: a masked entry's
exact 0, say) runs again in a lane that decides them as ieee's ``carry`` does. The
exact tests are per element (every radius of both operands 0 there), so running
them where the primitive skips them (it skips them where no element has every
radius 0) changes nothing.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from ._numba_loops import _decided, _two_product_error
from ._numba_rows import _inline, _jit, _mul, _on_grid, _special, _sub

_par = numba.njit(cache=True, nogil=True, parallel=True)


@_inline
def _at(i: int, r: Any) -> int:
    """The row of radius ``r`` that row ``i`` reads: ``i``, or the one row of zeros of an
    exact operand's radius (``fused_cpu.radius_rows``: read from cache)."""
    return min(np.int64(i), r.shape[0] - 1)  # (a parallel loop's index is unsigned)


@_inline
def _mul_held(x: float, xd: float, xr: float, y: float, yd: float, yr: float, v: float,
              d: float, t: int, emin: int, fmax: float) -> bool:
    """``mul_exact``'s test of one element after ``mul_radii`` (``d`` its det): both
    operands exact, the product exact (TwoProduct's error 0, no underflow, held by the
    format), not one that may overflow (branch-free: each part computed)."""
    return ((xd == 0.0) & (yd == 0.0) & (xr == 0.0) & (yr == 0.0) & (abs(v) < np.inf)
            & ((v != 0.0) | (x == 0.0) | (y == 0.0)) & (d != np.inf)
            & (_two_product_error(x, y, v) == 0.0) & _on_grid(v, t, emin, fmax))


@_inline
def _product(x: float, xd: float, xp_: float, xr: float, y: float, yd: float, yp: float,
             yr: float, u: float, tiny: float, u64: float, fmax: float, test: bool, t: int,
             emin: int) -> tuple[float, float, float, float]:
    """``x y`` as ``elementwise.mul`` computes it (``mul_radii``, then with ``test``
    ``mul_exact``): value, det, prob, ref_err."""
    v, d, p, r = _mul(x, xd, xp_, xr, y, yd, yp, yr, u, tiny, u64, fmax)
    if test:
        held = _mul_held(x, xd, xr, y, yd, yr, v, d, t, emin, fmax)
        d = 0.0 if held else d
        p = 0.0 if held else p
        r = 0.0 if held else r
    return v, d, p, r


def _products_row(g: Any, gd: Any, gp: Any, gr: Any, y: Any, yd: Any, yp: Any, yr: Any,
                   params: Any, ints: Any, ov: Any, od: Any, op: Any, orr: Any, om: Any,
                   test: bool, carry: bool) -> tuple[int, int]:
    """One row of ``g y`` into ``o*``; how many entries of ``g`` or ``y`` are special
    points, how many of the product (ieee's ``summed`` of it then runs). Inlined with
    ``test`` constant and no ``carry`` (:data:`_products_lane`: the loop vectorises),
    called with ``carry`` (:data:`_products_carry`: compiled once)."""
    u, tiny, u64, fmax = params[0], params[1], params[2], params[3]
    t, emin = ints[0], ints[1]
    n_in, n_out = 0, 0
    for j in range(g.size):
        a, ad, ap, ar = g[j], gd[j], gp[j], gr[j]
        b, bd, bp, br = y[j], yd[j], yp[j], yr[j]
        v, d, p, r = _product(a, ad, ap, ar, b, bd, bp, br, u, tiny, u64, fmax, test, t, emin)
        m = abs(v)
        if carry:
            ok, w = _decided(2, a, ad + ar, b, bd + br, False)
            if ok:
                v, d, p, r, m = w, 0.0, 0.0, 0.0, (0.0 if w != w else abs(w))
        n_in += _special(a, ad, ar) | _special(b, bd, br)
        n_out += _special(v, d, r)
        ov[j] = v
        od[j] = d
        op[j] = p
        orr[j] = r
        om[j] = m
    return n_in, n_out


_products_lane = _inline(_products_row)
_products_carry = _jit(_products_row)


@_par
def products(g: Any, gd: Any, gp: Any, gr: Any, y: Any, yd: Any, yp: Any, yr: Any,
             test: bool, shared: bool, params: Any, ints: Any, ov: Any, od: Any, op: Any,
             orr: Any, om: Any, flags: Any) -> None:
    """Per element ``g y`` (ieee's ``mul``: value, det, prob, ref_err, magnitude into
    ``o*``; ``op`` left unwritten where ``shared``: the operands' det and prob are one
    array each, and so are the product's). ``test``: whether the exact test runs
    (``tracked.may_be_exact`` of both). ``params``: u, tiny, u64, the accumulation's
    largest number; ``ints``: its t, emin. ``flags`` per row: a special point in ``g``
    or ``y`` (0), in the product (1). A radius of one row of zeros is every row's
    (an exact operand's: ``fused_cpu.radius_rows``)."""
    rows, cols = g.shape
    for i in numba.prange(rows):
        scratch = np.empty(cols if shared else 0)
        pi = scratch if shared else op[i]
        a, ad, ap, ar = g[i], gd[_at(i, gd)], gp[_at(i, gp)], gr[_at(i, gr)]
        b, bd, bp, br = y[i], yd[_at(i, yd)], yp[_at(i, yp)], yr[_at(i, yr)]
        vi, di, ri, mi = ov[i], od[i], orr[i], om[i]
        if test:
            n_in, n_out = _products_lane(a, ad, ap, ar, b, bd, bp, br, params, ints, vi, di,
                                         pi, ri, mi, True, False)
        else:
            n_in, n_out = _products_lane(a, ad, ap, ar, b, bd, bp, br, params, ints, vi, di,
                                         pi, ri, mi, False, False)
        if n_in > 0:  # (ieee decides some entries: the row again, with carry)
            n_in, n_out = _products_carry(a, ad, ap, ar, b, bd, bp, br, params, ints, vi, di,
                                          pi, ri, mi, True, True)
        flags[i, 0] = n_in > 0
        flags[i, 1] = n_out > 0


def _rows_row(g: Any, gd: Any, gp: Any, gr: Any, y: Any, yd: Any, yp: Any, yr: Any,
               sv: float, sd: float, sp: float, sr: float, params: Any, ints: Any, ov: Any,
               od: Any, op: Any, orr: Any, om: Any, test_sub: bool, test_mul: bool,
               carry: bool) -> int:
    """One row of ``y (g - s)`` into ``o*``; how many entries of ``g - s`` are special
    points (where not ``carry``: the row then runs again with it). Inlined with the
    tests constant and no ``carry`` (:data:`_rows_lane`), called with ``carry``
    (:data:`_rows_carry`), as :func:`_products_row`."""
    u, tiny, u64, fmax = params[0], params[1], params[2], params[3]
    t, emin = ints[0], ints[1]
    n_special = 0
    for j in range(g.size):
        a, ad, ap, ar = g[j], gd[j], gp[j], gr[j]
        dv, dd, dp, dr, _ = _sub(a, ad, ap, ar, sv, sd, sp, sr, u, tiny, u64, test_sub, t,
                                 emin, fmax)
        if carry:
            ok, w = _decided(1, a, ad + ar, sv, sd + sr, False)
            if ok:
                dv, dd, dp, dr = w, 0.0, 0.0, 0.0
        b, bd, bp, br = y[j], yd[j], yp[j], yr[j]
        v, d, p, r = _product(b, bd, bp, br, dv, dd, dp, dr, u, tiny, u64, fmax, test_mul, t,
                              emin)
        m = abs(v)
        if carry:
            ok, w = _decided(2, b, bd + br, dv, dd + dr, False)
            if ok:
                v, d, p, r, m = w, 0.0, 0.0, 0.0, (0.0 if w != w else abs(w))
        n_special += _special(dv, dd, dr)
        ov[j] = v
        od[j] = d
        op[j] = p
        orr[j] = r
        om[j] = m
    return n_special


_rows_lane = _inline(_rows_row)
_rows_carry = _jit(_rows_row)


@_par
def rows(g: Any, gd: Any, gp: Any, gr: Any, y: Any, yd: Any, yp: Any, yr: Any, s: Any,
         special: Any, tests: Any, shared: bool, params: Any, ints: Any, ov: Any, od: Any,
         op: Any, orr: Any, om: Any) -> None:
    """Per element ``y (g - s)`` (ieee's ``sub``, then ieee's ``mul``: value, det, prob,
    ref_err, magnitude into ``o*``; ``op`` unwritten where ``shared``), ``s`` per row
    the sum of ``g y`` (value, det, prob, ref_err); ``special`` per row: a special
    point in ``g``, ``y`` or ``s`` (then the lane with ieee's ``carry``); ``tests``:
    whether the subtraction's and the product's exact tests run (the product's only
    beside the subtraction's; ``params``, ``ints`` and radii of one row as
    :func:`products`')."""
    rows_, cols = g.shape
    test_sub, test_mul = tests[0], tests[1]
    for i in numba.prange(rows_):
        scratch = np.empty(cols if shared else 0)
        pi = scratch if shared else op[i]
        sv, sd, sp, sr = s[i, 0], s[i, 1], s[i, 2], s[i, 3]
        a, ad, ap, ar = g[i], gd[_at(i, gd)], gp[_at(i, gp)], gr[_at(i, gr)]
        b, bd, bp, br = y[i], yd[_at(i, yd)], yp[_at(i, yp)], yr[_at(i, yr)]
        vi, di, ri, mi = ov[i], od[i], orr[i], om[i]
        n = 1
        if not special[i]:
            if test_sub and test_mul:
                n = _rows_lane(a, ad, ap, ar, b, bd, bp, br, sv, sd, sp, sr, params, ints, vi,
                               di, pi, ri, mi, True, True, False)
            elif test_sub:  # (the product's test runs only beside the subtraction's)
                n = _rows_lane(a, ad, ap, ar, b, bd, bp, br, sv, sd, sp, sr, params, ints, vi,
                               di, pi, ri, mi, True, False, False)
            else:
                n = _rows_lane(a, ad, ap, ar, b, bd, bp, br, sv, sd, sp, sr, params, ints, vi,
                               di, pi, ri, mi, False, False, False)
        if n > 0:  # (ieee decides some entries: the row with carry, every test on)
            _rows_carry(a, ad, ap, ar, b, bd, bp, br, sv, sd, sp, sr, params, ints, vi, di, pi,
                        ri, mi, True, True, True)
