"""The whole-rule loops of the softmax family's backward ops, compiled by numba
(imported only where numba is installed, through :mod:`~numoracle.oracle.fused_cpu`).

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

Log-softmax's backward (``log_softmax_backward_rule``: ``g - p sum(g)``, ``p`` the
softmax a kernel holds, and the factored form of a one-hot ``g``) is one loop after
the sum of ``g`` (:func:`log_softmax_backward_rows`); its ``exp`` is
:mod:`~numoracle.oracle._numba_exp`'s, as the softmax family's forward loops'
(:mod:`~numoracle.oracle._numba_rows`). Where the constants 1 and ``1 / 1`` the
claim evaluates are exact ones, their quotient and product take the operations whose
result IEEE fixes (``x / 1 = x``) out (:func:`_by_one`): the same bits.

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

from ._numba_loops import _decided, _maximum, _two_product_error
from ._numba_rows import _div, _either, _exp, _inline, _jit, _mul, _on_grid, _special, _sub

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


@_par
def hot_rows(g: Any, gd: Any, count: Any, first: Any) -> None:
    """Per row: how many entries of the gradient may be nonzero (value or det not 0),
    and the first of them (0 where none)."""
    rows_, cols = g.shape
    for i in numba.prange(rows_):
        c, f = 0, -1
        for j in range(cols):
            if g[i, j] != 0.0 or gd[i, j] != 0.0:
                c += 1
                if f < 0:
                    f = j
        count[i] = c
        first[i] = max(f, 0)


@_inline
def _either_nan(a: float, d1: float, p1: float, m1: float, b: float, d2: float, p2: float,
                r2: float, m2: float, grow: float) -> tuple[float, float, float]:
    """softmax's ``_either``: :func:`_either`, where both are NaN the larger radii."""
    d, p, m = _either(a, d1, p1, m1, b, d2, p2, r2, m2, grow)
    if a != a and b != b:
        d = _maximum(d1, d2)
        p = _maximum(p1, p2)
    return d, p, m


@_inline
def _by_one(a: float, ad: float, ap: float, ar: float, rel_u: float, rel_tiny: float,
            grow: float, u64: float, fmax: float, divide: bool
            ) -> tuple[float, float, float, float]:
    """``a / 1`` (``divide``: :func:`_div`) or ``a * 1`` (:func:`_mul`, ``rel_u`` its
    ``u``, ``rel_tiny`` its ``tiny``, ``grow`` its ``1 + u``) of an exact 1 (value 1,
    every radius 0), their operations with the constants' parts left out where IEEE
    gives the same bits: ``x / 1 = x * 1 = x``, ``_rmul(x, 0) = 0``, ``_rmul(x, 1) =
    x`` (0 for a 0), no ``wild`` product (an exact factor 1), so ``(x + 0) / 1`` is
    ``x + 0`` and ``(0 + x) + 0`` stays as it is (each turns a -0 into 0, as there)."""
    q = abs(a)
    if divide:
        d = ad + 0.0
        p = ap + 0.0
        r = ar + 0.0
    else:
        d = (0.0 + ad) + 0.0
        p = (0.0 + ap) + 0.0
        r = (0.0 + ar) + 0.0
    r = r + u64 * q
    s = ((q + d) + r) * rel_u + rel_tiny
    d = d * grow + s
    p = p * grow + s
    over = (q + d) >= fmax
    d = np.inf if over else d
    p = np.inf if over else p
    return a, d, p, r


@_inline
def _log_softmax_backward_lane(i: int, y: Any, yd: Any, yp: Any, yr: Any, g: Any, gd: Any,
                               gp: Any, gr: Any, s: Any, c: Any, scalars: Any, params: Any,
                               value: Any, det: Any, prob: Any, ref: Any, mag: Any,
                               one_hot: bool, ones: bool) -> None:
    """Row ``i`` of :func:`log_softmax_backward_rows` (``one_hot``: the factored form
    too; ``ones``: 1 and ``1 / 1`` exact ones, :func:`_by_one`; constants where it is
    called)."""
    u, tiny, u64, fmax = params[0], params[1], params[2], params[3]
    ulps, per_x, of_one, ref_unit = params[4], params[5], params[6], params[7]
    rel_u, rel_tiny, grow_div, grow = params[8], params[9], params[10], params[11]
    ov, od, op, orr = scalars[0, 0], scalars[0, 1], scalars[0, 2], scalars[0, 3]
    qv, qd, qp, qr = scalars[1, 0], scalars[1, 1], scalars[1, 2], scalars[1, 3]
    sv, sd, sp, sr = s[i, 0], s[i, 1], s[i, 2], s[i, 3]
    cv, cd, cp, cr = c[i, 0], c[i, 1], c[i, 2], c[i, 3]
    for j in range(y.shape[1]):
        pv, pd, pp, pr = _exp(y[i, j], yd[i, j], yp[i, j], yr[i, j], ulps, per_x, of_one, u,
                              tiny, ref_unit, fmax)
        if ones:
            a1v, a1d, a1p, a1r = _by_one(pv, pd, pp, pr, rel_u, rel_tiny, grow_div, u64, fmax,
                                         True)
            a2v, a2d, a2p, a2r = _by_one(pv, pd, pp, pr, u, tiny, 1.0 + u, u64, fmax, False)
        else:
            a1v, a1d, a1p, a1r = _div(pv, pd, pp, pr, ov, od, op, orr, rel_u, rel_tiny,
                                      grow_div, u64, fmax)
            a2v, a2d, a2p, a2r = _mul(pv, pd, pp, pr, qv, qd, qp, qr, u, tiny, u64, fmax)
        idd, ipp, imm = _either_nan(a1v, a1d, a1p, abs(a1v), a2v, a2d, a2p, a2r, abs(a2v),
                                    grow)
        kd, kp, km = _either_nan(pv, pd, pp, abs(pv), a1v, idd, ipp, a1r, imm, grow)
        wv, wd, wp, wr = _mul(pv, kd, kp, pr, sv, sd, sp, sr, u, tiny, u64, fmax)
        gv, gdd, gpp, grr = g[i, j], gd[i, j], gp[i, j], gr[i, j]
        rv, rd, rp, rr, rm = _sub(gv, gdd, gpp, grr, wv, wd, wp, wr, u, tiny, u64, False,
                                  0, 0, fmax)
        if one_hot:
            oh = 1.0 if (gv != 0.0 or gdd != 0.0) else 0.0
            fv, fd, fp, fr, fm = _sub(pv, kd, kp, pr, oh, 0.0, 0.0, 0.0, u, tiny, u64,
                                      False, 0, 0, fmax)
            hv, hd, hp, hr = _mul(fv, fd, fp, fr, cv, cd, cp, cr, u, tiny, u64, fmax)
            rd, rp, rm = _either_nan(rv, rd, rp, rm, hv, hd, hp, hr, abs(hv), grow)
        value[i, j] = rv
        det[i, j] = rd
        prob[i, j] = rp
        ref[i, j] = rr
        mag[i, j] = rm


@_par
def log_softmax_backward_rows(y: Any, yd: Any, yp: Any, yr: Any, g: Any, gd: Any, gp: Any,
                              gr: Any, s: Any, c: Any, single: Any, scalars: Any, params: Any,
                              ones: bool, value: Any, det: Any, prob: Any, ref: Any,
                              mag: Any) -> None:
    """Per element: ``g - p s`` (``s`` the row's sum of ``g``, ``p`` the softmax a
    kernel holds: ``exp(y)``, or it divided by 1 or times ``1 / 1``), and in rows
    where ``g`` has one nonzero entry ``-c`` (``single``) also ``(p - onehot) c``,
    each by the primitives (``log_softmax_backward_rule``'s formulations). Per
    row ``s``, ``c``: value, det, prob, ref_err; ``scalars``: 1 and ``1 / 1`` as
    the claim evaluates them (rows of value, det, prob, ref_err); ``ones``: both
    are an exact 1 (:func:`_by_one` then: the same bits); ``params``: u, tiny, u64,
    the accumulation's largest number, exp's ulps, per_x, of_one, the reference's
    unit, the division's ``rel u``, ``rel tiny``, ``1 + rel u``, either's growth."""
    for i in numba.prange(y.shape[0]):
        if single[i]:
            if ones:
                _log_softmax_backward_lane(i, y, yd, yp, yr, g, gd, gp, gr, s, c, scalars,
                                           params, value, det, prob, ref, mag, True, True)
            else:
                _log_softmax_backward_lane(i, y, yd, yp, yr, g, gd, gp, gr, s, c, scalars,
                                           params, value, det, prob, ref, mag, True, False)
        elif ones:
            _log_softmax_backward_lane(i, y, yd, yp, yr, g, gd, gp, gr, s, c, scalars,
                                       params, value, det, prob, ref, mag, False, True)
        else:
            _log_softmax_backward_lane(i, y, yd, yp, yr, g, gd, gp, gr, s, c, scalars,
                                       params, value, det, prob, ref, mag, False, False)
