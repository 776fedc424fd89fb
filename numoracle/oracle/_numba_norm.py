"""The whole-rule loops of layer norm, compiled by numba (imported only where numba is
installed, through :mod:`~numoracle.oracle.fused_cpu`).

Layer norm's rule (:mod:`~numoracle.oracle.traced.library.normalization`) composes
subtractions, products and widenings of whole arrays around its sums (the mean, the
sum of squared deviations; backward the means of ``g w`` and ``g w xhat`` and the
column sums), each several passes on NumPy. Here each stretch between sums is one loop
over the rows (lanes of the normalised axes), parallel over the rows, performing the
primitives' float64 operations in their order (the scalar forms of
:mod:`~numoracle.oracle._numba_rows`, with the exact tests of
:mod:`~numoracle.oracle._numba_loops`: the same bits); the sums stay NumPy's.

Each loop tests every element for an exact result (operands exact there, the float64
result exact and held by the format), where the primitives test only when some element
of each operand may be exact: no element passes the element's test otherwise, so the
bits are the same.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from ._numba_loops import _representable, _two_product_error
from ._numba_rows import _mul, _shifted

_par = numba.njit(cache=True, nogil=True, parallel=True)
_jit = numba.njit(cache=True, nogil=True)


@_jit
def _times(x: float, xd: float, xp_: float, xr: float, y: float, yd: float, yp: float,
           yr: float, u: float, tiny: float, u64: float, t: int, emin: int, fmax: float
           ) -> tuple[float, float, float, float]:
    """``x y`` as ``elementwise.mul`` computes it, its exact test included
    (``mul_radii`` then ``mul_exact``): value, det, prob, ref_err."""
    v, d, p, r = _mul(x, xd, xp_, xr, y, yd, yp, yr, u, tiny, u64, fmax)
    if (xd == 0.0 and yd == 0.0 and xr == 0.0 and yr == 0.0 and abs(v) < np.inf
            and (v != 0.0 or x == 0.0 or y == 0.0) and d != np.inf
            and _two_product_error(x, y, v) == 0.0 and _representable(v, t, emin, fmax)):
        return v, 0.0, 0.0, 0.0
    return v, d, p, r


@_jit
def _minus(x: float, xd: float, xp_: float, xr: float, y: float, yd: float, yp: float,
           yr: float, u: float, tiny: float, u64: float, t: int, emin: int, fmax: float
           ) -> tuple[float, float, float, float]:
    """``x - y`` as tracked ``sub`` computes it, its exact test included."""
    return _shifted(x, xd, xp_, xr, y, yd, yp, yr, u, tiny, u64, True, t, emin, fmax)


@_par
def row_top(x: Any, xd: Any, xr: Any, out: Any) -> None:
    """Per row: the largest ``|x| + det + ref_err`` (NaN where one is NaN, as
    NumPy's ``max``)."""
    rows, cols = x.shape
    for i in numba.prange(rows):
        top = -np.inf
        for j in range(cols):
            a = (abs(x[i, j]) + xd[i, j]) + xr[i, j]
            if a != a:
                top = a
                break
            top = a if a > top else top
        out[i] = top


@_par
def deviation_squares(x: Any, xd: Any, xp_: Any, xr: Any, mean: Any, params: Any, ints: Any,
                      value: Any, det: Any, prob: Any, ref: Any) -> None:
    """Per element: ``d d`` with ``d = x - mean`` (the two-pass variance's terms, by
    tracked ``sub`` and ``elementwise.mul``); ``mean`` per row: value, det, prob,
    ref_err. ``params``: u, tiny, u64, the accumulation's largest number; ``ints``:
    t, emin."""
    rows, cols = x.shape
    u, tiny, u64, fmax = params[0], params[1], params[2], params[3]
    t, emin = ints[0], ints[1]
    for i in numba.prange(rows):
        m, md, mp, mr = mean[i, 0], mean[i, 1], mean[i, 2], mean[i, 3]
        for j in range(cols):
            v, d, p, r = _minus(x[i, j], xd[i, j], xp_[i, j], xr[i, j], m, md, mp, mr, u, tiny,
                                u64, t, emin, fmax)
            v, d, p, r = _times(v, d, p, r, v, d, p, r, u, tiny, u64, t, emin, fmax)
            value[i, j] = v
            det[i, j] = d
            prob[i, j] = p
            ref[i, j] = r


@_par
def normalized_rows(x: Any, xd: Any, xp_: Any, xr: Any, mean: Any, rstd: Any, w: Any, b: Any,
                    has_w: bool, has_b: bool, params: Any, ints: Any, value: Any, det: Any,
                    prob: Any, ref: Any, mag: Any) -> None:
    """Per element: ``(x - mean) rstd`` widened for a kernel that folds the statistics
    (``normalization.normalized``), with ``has_w`` times ``w`` (unbounded where the
    folded products may overflow: ``normalization.fold_magnitude``), with ``has_b``
    plus ``b`` widened by ``u |b|`` (``normalization.affine``). ``mean``, ``rstd`` per
    row and ``w``, ``b`` per column: value, det, prob, ref_err. ``params``: u, tiny,
    u64, the accumulation's largest number; ``ints``: t, emin."""
    rows, cols = x.shape
    u, tiny, u64, fmax = params[0], params[1], params[2], params[3]
    t, emin = ints[0], ints[1]
    two_u, half_max = 2.0 * u, fmax / 2
    for i in numba.prange(rows):
        m, md, mp, mr = mean[i, 0], mean[i, 1], mean[i, 2], mean[i, 3]
        s, sd, sp, sr = rstd[i, 0], rstd[i, 1], rstd[i, 2], rstd[i, 3]
        scale = (abs(s) + sd) + sr
        top_m = (abs(m) + md) + mr
        for j in range(cols):
            xv, ad, ap, ar = x[i, j], xd[i, j], xp_[i, j], xr[i, j]
            v, d, p, r = _minus(xv, ad, ap, ar, m, md, mp, mr, u, tiny, u64, t, emin, fmax)
            v, d, p, r = _times(v, d, p, r, s, sd, sp, sr, u, tiny, u64, t, emin, fmax)
            extra = (two_u * (abs(xv) + abs(m))) * scale
            d = d + extra
            p = p + extra
            mg = abs(v)
            if has_w:
                fold = ((((abs(xv) + ad) + ar) + top_m) + 1.0) * scale
                wv, wd = w[0, j], w[1, j]
                v, d, p, r = _times(v, d, p, r, wv, wd, w[2, j], w[3, j], u, tiny, u64, t, emin,
                                    fmax)
                mg = abs(v)
                if fold * (abs(wv) + wd) >= half_max:
                    d = np.inf
                    p = np.inf
            if has_b:
                bv = b[0, j]
                # add(out, b) is sub(out, -b): negation is exact, -(-b) is b's bits
                mg = abs(v) + abs(bv)
                v, d, p, r = _minus(v, d, p, r, -bv, b[1, j], b[2, j], b[3, j], u, tiny, u64, t,
                                    emin, fmax)
                extra = u * abs(bv)
                d = d + extra
                p = p + extra
            value[i, j] = v
            det[i, j] = d
            prob[i, j] = p
            ref[i, j] = r
            mag[i, j] = mg


@_par
def backward_products(x: Any, xd: Any, xp_: Any, xr: Any, g: Any, gd: Any, gp: Any, gr: Any,
                      mean: Any, rstd: Any, w: Any, has_w: bool, want_gxh: bool, want_gh: bool,
                      params: Any, ints: Any, gx: Any, gxd: Any, gxp: Any, gxr: Any, hv: Any,
                      hd: Any, hp: Any, hr: Any, kv: Any, kd: Any, kp: Any, kr: Any) -> None:
    """Per element of layer norm's backward, before its sums: with ``xhat = (x - mean)
    rstd`` and ``gx = g w`` (``has_w``; else ``g``, nothing written), into ``gx*`` that
    product, with ``want_gxh`` ``gx xhat`` into ``h*``, with ``want_gh`` ``g xhat``
    into ``k*`` (value, det, prob, ref_err; by ``elementwise.mul`` and tracked
    ``sub``). ``mean``, ``rstd`` per row, ``w`` per column: value, det, prob,
    ref_err. ``params``: u, tiny, u64, the accumulation's largest number; ``ints``:
    t, emin."""
    rows, cols = x.shape
    u, tiny, u64, fmax = params[0], params[1], params[2], params[3]
    t, emin = ints[0], ints[1]
    for i in numba.prange(rows):
        m, md, mp, mr = mean[i, 0], mean[i, 1], mean[i, 2], mean[i, 3]
        s, sd, sp, sr = rstd[i, 0], rstd[i, 1], rstd[i, 2], rstd[i, 3]
        for j in range(cols):
            v, d, p, r = _minus(x[i, j], xd[i, j], xp_[i, j], xr[i, j], m, md, mp, mr, u, tiny,
                                u64, t, emin, fmax)
            v, d, p, r = _times(v, d, p, r, s, sd, sp, sr, u, tiny, u64, t, emin, fmax)
            a, ad, ap, ar = g[i, j], gd[i, j], gp[i, j], gr[i, j]
            if want_gh:
                kv[i, j], kd[i, j], kp[i, j], kr[i, j] = _times(a, ad, ap, ar, v, d, p, r, u,
                                                                tiny, u64, t, emin, fmax)
            if has_w:
                a, ad, ap, ar = _times(a, ad, ap, ar, w[0, j], w[1, j], w[2, j], w[3, j], u,
                                       tiny, u64, t, emin, fmax)
                gx[i, j], gxd[i, j], gxp[i, j], gxr[i, j] = a, ad, ap, ar
            if want_gxh:
                hv[i, j], hd[i, j], hp[i, j], hr[i, j] = _times(a, ad, ap, ar, v, d, p, r, u,
                                                                tiny, u64, t, emin, fmax)


@_par
def input_grad_rows(x: Any, xd: Any, xp_: Any, xr: Any, g: Any, gd: Any, gp: Any, gr: Any,
                    mean: Any, rstd: Any, a: Any, b: Any, params: Any, ints: Any, value: Any,
                    det: Any, prob: Any, ref: Any, mag: Any) -> None:
    """Per element: ``rstd ((g - a) - xhat b)`` with ``xhat = (x - mean) rstd``
    (``normalization._input_grad`` after its means ``a`` and ``b``; ``g`` the
    weighted gradient). ``mean``, ``rstd``, ``a``, ``b`` per row: value, det, prob,
    ref_err. ``params``: u, tiny, u64, the accumulation's largest number; ``ints``:
    t, emin."""
    rows, cols = x.shape
    u, tiny, u64, fmax = params[0], params[1], params[2], params[3]
    t, emin = ints[0], ints[1]
    for i in numba.prange(rows):
        m, md, mp, mr = mean[i, 0], mean[i, 1], mean[i, 2], mean[i, 3]
        s, sd, sp, sr = rstd[i, 0], rstd[i, 1], rstd[i, 2], rstd[i, 3]
        av, ad, ap, ar = a[i, 0], a[i, 1], a[i, 2], a[i, 3]
        bv, bd, bp, br = b[i, 0], b[i, 1], b[i, 2], b[i, 3]
        for j in range(cols):
            v, d, p, r = _minus(x[i, j], xd[i, j], xp_[i, j], xr[i, j], m, md, mp, mr, u, tiny,
                                u64, t, emin, fmax)
            v, d, p, r = _times(v, d, p, r, s, sd, sp, sr, u, tiny, u64, t, emin, fmax)
            v, d, p, r = _times(v, d, p, r, bv, bd, bp, br, u, tiny, u64, t, emin, fmax)
            c, cd, cp, cr = _minus(g[i, j], gd[i, j], gp[i, j], gr[i, j], av, ad, ap, ar, u, tiny,
                                   u64, t, emin, fmax)
            c, cd, cp, cr = _minus(c, cd, cp, cr, v, d, p, r, u, tiny, u64, t, emin, fmax)
            c, cd, cp, cr = _times(c, cd, cp, cr, s, sd, sp, sr, u, tiny, u64, t, emin, fmax)
            value[i, j] = c
            det[i, j] = cd
            prob[i, j] = cp
            ref[i, j] = cr
            mag[i, j] = abs(c)
