"""The whole-rule loops of layer norm, compiled by numba (imported only where numba is
installed, through :mod:`~numoracle.oracle.fused_cpu`).

Layer norm's rule (:mod:`~numoracle.oracle.traced.library.normalization`) composes
subtractions, products and widenings of whole arrays around its sums (the mean, the
sum of squared deviations; backward the means of ``g w`` and ``g w xhat`` and the
column sums), each several passes on NumPy. Here each stretch between sums is one loop
over the rows (lanes of the normalised axes), on one core (as the loops of
:mod:`~numoracle.oracle.fused_cpu`: the sums' BLAS threads spin on the others),
performing the primitives' float64 operations in their order (the scalar forms of
:mod:`~numoracle.oracle._numba_rows`, with the exact tests of
:mod:`~numoracle.oracle._numba_loops`: the same bits); the sums stay NumPy's.

Where some element of the operands may be exact (``test``: the primitives'
``may_be_exact``) a loop tests each element for an exact result (operands exact there,
the float64 result exact and held by the format), as the primitives do; elsewhere
the loops leave the tests out (no element would pass one) and vectorise. The arrays
they take are C-contiguous (a loop over broadcast radii does not vectorise).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from ._numba_loops import _float_bits, _representable, _two_product_error
from ._numba_rows import _mul, _shifted

_loop = numba.njit(cache=True, nogil=True)
_inline = numba.njit(cache=True, nogil=True, inline="always")


@_inline
def _finer(v: float, t: int) -> bool:
    """Whether float64 ``v`` is normal and has a set bit below its ``t + 1`` leading
    significant bits: then its lowest set bit lies below ``floor(log2 |v|) - t``, so
    it is no value of a format of ``t`` fraction bits (``_representable`` is False)
    and no exact test need run (branch-free: a loop of these vectorises)."""
    b = _float_bits(v)
    e = (b >> np.uint64(52)) & np.uint64(0x7FF)
    low = (np.uint64(1) << np.uint64(max(52 - t, 0))) - np.uint64(1)
    return ((b & low) != np.uint64(0)) & (e != np.uint64(0)) & (e != np.uint64(0x7FF))


@_inline
def _times(x: float, xd: float, xp_: float, xr: float, y: float, yd: float, yp: float,
           yr: float, u: float, tiny: float, u64: float, t: int, emin: int, fmax: float,
           test: bool) -> tuple[float, float, float, float]:
    """``x y`` as ``elementwise.mul`` computes it, with ``test`` its exact test
    (``mul_radii`` then ``mul_exact``): value, det, prob, ref_err."""
    v, d, p, r = _mul(x, xd, xp_, xr, y, yd, yp, yr, u, tiny, u64, fmax)
    if test and (xd == 0.0 and yd == 0.0 and xr == 0.0 and yr == 0.0 and abs(v) < np.inf
                 and (v != 0.0 or x == 0.0 or y == 0.0) and d != np.inf and not _finer(v, t)
                 and _two_product_error(x, y, v) == 0.0 and _representable(v, t, emin, fmax)):
        return v, 0.0, 0.0, 0.0
    return v, d, p, r


@_inline
def _minus(x: float, xd: float, xp_: float, xr: float, y: float, yd: float, yp: float,
           yr: float, u: float, tiny: float, u64: float, t: int, emin: int, fmax: float,
           test: bool) -> tuple[float, float, float, float]:
    """``x - y`` as tracked ``sub`` computes it, with ``test`` its exact test."""
    return _shifted(x, xd, xp_, xr, y, yd, yp, yr, u, tiny, u64, test, t, emin, fmax)


@_inline
def _row(a: Any, i: int) -> int:
    """The row of ``a`` that row ``i`` reads: ``i``, or 0 where ``a`` is one row (an
    exact operand's zero radius, :func:`~numoracle.oracle.fused_cpu.radius_rows`: read
    from cache, not from an array of the input's size)."""
    return min(i, a.shape[0] - 1)


@_loop
def row_top(x: Any, xd: Any, xr: Any, out: Any) -> None:
    """Per row: the largest ``|x| + det + ref_err`` (NaN where one is NaN, as
    NumPy's ``max``)."""
    rows, cols = x.shape
    for i in range(rows):
        top = -np.inf
        nan = False
        di, ri = _row(xd, i), _row(xr, i)
        for j in range(cols):
            a = (abs(x[i, j]) + xd[di, j]) + xr[ri, j]
            nan |= a != a
            top = a if a > top else top
        out[i] = np.nan if nan else top


@_inline
def _squares_lane(i: int, o: int, x: Any, xd: Any, xp_: Any, xr: Any, mean: Any,
                  params: Any, ints: Any, value: Any, det: Any, prob: Any, ref: Any,
                  test: bool) -> None:
    """Row ``i`` of ``(x - mean)^2`` into row ``o`` of the outputs."""
    u, tiny, u64, fmax = params[0], params[1], params[2], params[3]
    t, emin = ints[0], ints[1]
    m, md, mp, mr = mean[i, 0], mean[i, 1], mean[i, 2], mean[i, 3]
    di, pi, ri = _row(xd, i), _row(xp_, i), _row(xr, i)
    for j in range(x.shape[1]):
        v, d, p, r = _minus(x[i, j], xd[di, j], xp_[pi, j], xr[ri, j], m, md, mp, mr, u, tiny,
                            u64, t, emin, fmax, test)
        v, d, p, r = _times(v, d, p, r, v, d, p, r, u, tiny, u64, t, emin, fmax, test)
        value[o, j] = v
        det[o, j] = d
        prob[o, j] = p
        ref[o, j] = r


@_loop
def deviation_squares(x: Any, xd: Any, xp_: Any, xr: Any, mean: Any, test: bool, params: Any,
                      ints: Any, value: Any, det: Any, prob: Any, ref: Any) -> None:
    """Per element: ``d d`` with ``d = x - mean`` (the two-pass variance's terms, by
    tracked ``sub`` and ``elementwise.mul``; ``test``: whether ``d`` may be exact
    somewhere); ``mean`` per row: value, det, prob, ref_err. ``params``: u, tiny,
    u64, the accumulation's largest number; ``ints``: t, emin."""
    for i in range(x.shape[0]):
        if test:
            _squares_lane(i, i, x, xd, xp_, xr, mean, params, ints, value, det, prob, ref, True)
        else:
            _squares_lane(i, i, x, xd, xp_, xr, mean, params, ints, value, det, prob, ref,
                          False)


@_inline
def _part_sum(row: Any, absolute: bool) -> float:
    """The float64 sum of row 0 of ``row`` (with ``absolute`` of its magnitudes) as
    four partial sums of every fourth term, added ``(s0 + s1) + (s2 + s3)``: a fixed
    order (the same bits on every machine; the loop vectorises), a float64 sum in
    some order as the contraction's GEMV is."""
    n = row.shape[1]
    s0 = s1 = s2 = s3 = 0.0
    for j in range(0, n - n % 4, 4):
        a0, a1, a2, a3 = row[0, j], row[0, j + 1], row[0, j + 2], row[0, j + 3]
        if absolute:
            a0, a1, a2, a3 = abs(a0), abs(a1), abs(a2), abs(a3)
        s0 += a0
        s1 += a1
        s2 += a2
        s3 += a3
    for j in range(n - n % 4, n):
        s0 += abs(row[0, j]) if absolute else row[0, j]
    return (s0 + s1) + (s2 + s3)


@_inline
def _lane_sums(value: Any, det: Any, prob: Any, ref: Any, out: Any, i: int) -> None:
    """Into row ``i`` of ``out`` the sums (:func:`_part_sum`) of row 0 of ``value``,
    of its magnitudes, of ``det``, ``prob`` and ``ref``."""
    out[i, 0] = _part_sum(value, False)
    out[i, 1] = _part_sum(value, True)
    out[i, 2] = _part_sum(det, False)
    out[i, 3] = _part_sum(prob, False)
    out[i, 4] = _part_sum(ref, False)


@_loop
def deviation_square_sums(x: Any, xd: Any, xp_: Any, xr: Any, mean: Any, test: bool,
                          params: Any, ints: Any, value: Any, det: Any,
                          prob: Any, ref: Any, sums: Any) -> None:
    """Per row: the sums of :func:`deviation_squares`' terms (:func:`_lane_sums`), each
    row's terms formed into the one-row ``value``, ``det``, ``prob``, ``ref`` (kept
    in cache) and summed there: no array of the input's size is written."""
    for i in range(x.shape[0]):
        if test:
            _squares_lane(i, 0, x, xd, xp_, xr, mean, params, ints, value, det, prob, ref, True)
        else:
            _squares_lane(i, 0, x, xd, xp_, xr, mean, params, ints, value, det, prob, ref,
                          False)
        _lane_sums(value, det, prob, ref, sums, i)


@_inline
def _normalized_lane(i: int, x: Any, xd: Any, xp_: Any, xr: Any, mean: Any, rstd: Any,
                     w: Any, b: Any, has_w: bool, has_b: bool, params: Any, ints: Any,
                     value: Any, det: Any, prob: Any, ref: Any, mag: Any, test: bool) -> None:
    u, tiny, u64, fmax = params[0], params[1], params[2], params[3]
    t, emin = ints[0], ints[1]
    two_u, half_max = 2.0 * u, fmax / 2
    m, md, mp, mr = mean[i, 0], mean[i, 1], mean[i, 2], mean[i, 3]
    s, sd, sp, sr = rstd[i, 0], rstd[i, 1], rstd[i, 2], rstd[i, 3]
    scale = (abs(s) + sd) + sr
    top_m = (abs(m) + md) + mr
    di, pi, ri = _row(xd, i), _row(xp_, i), _row(xr, i)
    for j in range(x.shape[1]):
        xv, ad, ap, ar = x[i, j], xd[di, j], xp_[pi, j], xr[ri, j]
        v, d, p, r = _minus(xv, ad, ap, ar, m, md, mp, mr, u, tiny, u64, t, emin, fmax, test)
        v, d, p, r = _times(v, d, p, r, s, sd, sp, sr, u, tiny, u64, t, emin, fmax, test)
        extra = (two_u * (abs(xv) + abs(m))) * scale
        d = d + extra
        p = p + extra
        mg = abs(v)
        if has_w:
            fold = ((((abs(xv) + ad) + ar) + top_m) + 1.0) * scale
            wv, wd = w[0, j], w[1, j]
            v, d, p, r = _times(v, d, p, r, wv, wd, w[2, j], w[3, j], u, tiny, u64, t, emin,
                                fmax, test)
            mg = abs(v)
            big = fold * (abs(wv) + wd) >= half_max
            d = np.inf if big else d
            p = np.inf if big else p
        if has_b:
            bv = b[0, j]
            # add(out, b) is sub(out, -b): negation is exact, -(-b) is b's bits
            mg = abs(v) + abs(bv)
            v, d, p, r = _minus(v, d, p, r, -bv, b[1, j], b[2, j], b[3, j], u, tiny, u64, t,
                                emin, fmax, test)
            extra = u * abs(bv)
            d = d + extra
            p = p + extra
        value[i, j] = v
        det[i, j] = d
        prob[i, j] = p
        ref[i, j] = r
        mag[i, j] = mg


@_loop
def normalized_rows(x: Any, xd: Any, xp_: Any, xr: Any, mean: Any, rstd: Any, w: Any, b: Any,
                    has_w: bool, has_b: bool, test: bool, params: Any, ints: Any, value: Any,
                    det: Any, prob: Any, ref: Any, mag: Any) -> None:
    """Per element: ``(x - mean) rstd`` widened for a kernel that folds the statistics
    (``normalization.normalized``), with ``has_w`` times ``w`` (unbounded where the
    folded products may overflow: ``normalization.fold_magnitude``), with ``has_b``
    plus ``b`` widened by ``u |b|`` (``normalization.affine``); ``test``: whether
    ``x - mean`` may be exact somewhere (every later step's result is exact only where
    it is). ``mean``, ``rstd`` per row and ``w``, ``b`` per column: value, det, prob,
    ref_err. ``params``: u, tiny, u64, the accumulation's largest number; ``ints``:
    t, emin. Without ``test``, the affine form's flags are constants of its own copy of
    the loop (a branch less per element, folded away)."""
    for i in range(x.shape[0]):
        if test:
            _normalized_lane(i, x, xd, xp_, xr, mean, rstd, w, b, has_w, has_b, params, ints,
                             value, det, prob, ref, mag, True)
        elif has_w and has_b:
            _normalized_lane(i, x, xd, xp_, xr, mean, rstd, w, b, True, True, params, ints,
                             value, det, prob, ref, mag, False)
        else:
            _normalized_lane(i, x, xd, xp_, xr, mean, rstd, w, b, has_w, has_b, params, ints,
                             value, det, prob, ref, mag, False)


@_inline
def _weighted_lane(i: int, o: int, g: Any, gd: Any, gp: Any, gr: Any, w: Any, params: Any,
                   ints: Any, gx: Any, gxd: Any, gxp: Any, gxr: Any, test: bool) -> None:
    """Row ``i`` of ``g w`` into row ``o`` of ``gx*``: the products without their exact
    test (the loop vectorises), then with ``test`` the test where both operands are
    exact, the radii 0 where it passes: ``_times``' results. A row none of whose
    products may be a value of the format (:func:`_finer`, one pass that vectorises)
    skips the test."""
    u, tiny, u64, fmax = params[0], params[1], params[2], params[3]
    t, emin = ints[0], ints[1]
    gdi, gpi, gri = _row(gd, i), _row(gp, i), _row(gr, i)
    for j in range(g.shape[1]):
        a, ad, ap, ar = _times(g[i, j], gd[gdi, j], gp[gpi, j], gr[gri, j], w[0, j], w[1, j],
                               w[2, j], w[3, j], u, tiny, u64, t, emin, fmax, False)
        gx[o, j] = a
        gxd[o, j] = ad
        gxp[o, j] = ap
        gxr[o, j] = ar
    if not test:
        return
    maybe = 0  # products that may be values of the format (a pass that vectorises)
    for j in range(g.shape[1]):
        maybe += not _finer(gx[o, j], t)
    if maybe == 0:
        return
    for j in range(g.shape[1]):
        if gd[gdi, j] != 0.0 or gr[gri, j] != 0.0 or w[1, j] != 0.0 or w[3, j] != 0.0:
            continue
        x, y, v = g[i, j], w[0, j], gx[o, j]
        if (abs(v) < np.inf and (v != 0.0 or x == 0.0 or y == 0.0) and gxd[o, j] != np.inf
                and _representable(v, t, emin, fmax) and _two_product_error(x, y, v) == 0.0):
            gxd[o, j] = 0.0
            gxp[o, j] = 0.0
            gxr[o, j] = 0.0


@_inline
def _weighted_rows(i: int, o: int, g: Any, gd: Any, gp: Any, gr: Any, w: Any, has_w: bool,
                   params: Any, ints: Any, gx: Any, gxd: Any, gxp: Any, gxr: Any,
                   test: bool) -> tuple[Any, Any, Any, Any]:
    """The rows that row ``i``'s products after ``g w`` read: with ``has_w`` row ``i``
    of ``g w`` formed into row ``o`` of ``gx*`` (:func:`_weighted_lane`, ``test`` its
    exact test) and ``gx*``, else ``g`` itself."""
    if has_w:
        _weighted_lane(i, o, g, gd, gp, gr, w, params, ints, gx, gxd, gxp, gxr, test)
        return gx, gxd, gxp, gxr
    return g, gd, gp, gr


@_inline
def _products_lane(i: int, o: int, x: Any, xd: Any, xp_: Any, xr: Any, g: Any, gd: Any,
                   gp: Any, gr: Any, gx: Any, gxd: Any, gxp: Any, gxr: Any, mean: Any,
                   rstd: Any, want_gxh: bool, want_gh: bool, params: Any, ints: Any, hv: Any,
                   hd: Any, hp: Any, hr: Any, kv: Any, kd: Any, kp: Any, kr: Any,
                   test: bool) -> None:
    """Row ``i``'s ``g xhat`` and ``gx xhat`` into row ``o`` of ``k*`` and ``h*``."""
    u, tiny, u64, fmax = params[0], params[1], params[2], params[3]
    t, emin = ints[0], ints[1]
    m, md, mp, mr = mean[i, 0], mean[i, 1], mean[i, 2], mean[i, 3]
    s, sd, sp, sr = rstd[i, 0], rstd[i, 1], rstd[i, 2], rstd[i, 3]
    di, pi, ri = _row(xd, i), _row(xp_, i), _row(xr, i)
    gdi, gpi, gri = _row(gd, i), _row(gp, i), _row(gr, i)
    svi, sdi, spi, sri = _row(gx, i), _row(gxd, i), _row(gxp, i), _row(gxr, i)
    for j in range(x.shape[1]):
        v, d, p, r = _minus(x[i, j], xd[di, j], xp_[pi, j], xr[ri, j], m, md, mp, mr, u, tiny,
                            u64, t, emin, fmax, test)
        v, d, p, r = _times(v, d, p, r, s, sd, sp, sr, u, tiny, u64, t, emin, fmax, test)
        if want_gh:
            a, ad, ap, ar = _times(g[i, j], gd[gdi, j], gp[gpi, j], gr[gri, j], v, d, p, r, u,
                                   tiny, u64, t, emin, fmax, test)
            kv[o, j] = a
            kd[o, j] = ad
            kp[o, j] = ap
            kr[o, j] = ar
        if want_gxh:
            a, ad, ap, ar = _times(gx[svi, j], gxd[sdi, j], gxp[spi, j], gxr[sri, j], v, d, p, r, u,
                                   tiny, u64, t, emin, fmax, test)
            hv[o, j] = a
            hd[o, j] = ad
            hp[o, j] = ap
            hr[o, j] = ar


@_loop
def backward_products(x: Any, xd: Any, xp_: Any, xr: Any, g: Any, gd: Any, gp: Any, gr: Any,
                      mean: Any, rstd: Any, w: Any, has_w: bool, want_gxh: bool, want_gh: bool,
                      test_gx: bool, test: bool, params: Any, ints: Any, gx: Any, gxd: Any,
                      gxp: Any, gxr: Any, hv: Any, hd: Any, hp: Any, hr: Any, kv: Any, kd: Any,
                      kp: Any, kr: Any) -> None:
    """Per element of layer norm's backward, before its sums: with ``xhat = (x - mean)
    rstd`` and ``gx = g w`` (``has_w``, into ``gx*``; else ``g``, nothing written),
    with ``want_gxh`` ``gx xhat`` into ``h*``, with ``want_gh`` ``g xhat`` into
    ``k*`` (value, det, prob, ref_err; by ``elementwise.mul`` and tracked ``sub``).
    Per row ``gx`` first (with its exact test where
    ``test_gx``), then the rest from
    it (``test``: whether ``x - mean`` may be exact somewhere). ``mean``, ``rstd``
    per row, ``w`` per column: value, det, prob, ref_err. ``params``: u, tiny, u64,
    the accumulation's largest number; ``ints``: t, emin."""
    for i in range(x.shape[0]):
        src, srcd, srcp, srcr = _weighted_rows(i, i, g, gd, gp, gr, w, has_w, params, ints,
                                               gx, gxd, gxp, gxr, test_gx)
        if test:
            _products_lane(i, i, x, xd, xp_, xr, g, gd, gp, gr, src, srcd, srcp, srcr, mean,
                           rstd, want_gxh, want_gh, params, ints, hv, hd, hp, hr, kv, kd, kp,
                           kr, True)
        else:
            _products_lane(i, i, x, xd, xp_, xr, g, gd, gp, gr, src, srcd, srcp, srcr, mean,
                           rstd, want_gxh, want_gh, params, ints, hv, hd, hp, hr, kv, kd, kp,
                           kr, False)


@_inline
def _summed_products(i: int, x: Any, xd: Any, xp_: Any, xr: Any, g: Any, gd: Any, gp: Any,
                     gr: Any, src: Any, srcd: Any, srcp: Any, srcr: Any, mean: Any, rstd: Any,
                     want_gxh: bool, want_gh: bool, params: Any, ints: Any, hv: Any, hd: Any,
                     hp: Any, hr: Any, kv: Any, kd: Any, kp: Any, kr: Any, test: bool) -> None:
    """Row ``i``'s products (:func:`_products_lane`) into the one-row ``h*`` and ``k*``
    for the sums after them: without ``test``, with both wanted, the flags constants
    of their own copy of the lane (it vectorises)."""
    if test:
        _products_lane(i, 0, x, xd, xp_, xr, g, gd, gp, gr, src, srcd, srcp, srcr, mean,
                       rstd, want_gxh, want_gh, params, ints, hv, hd, hp, hr, kv, kd, kp,
                       kr, True)
    elif want_gxh and want_gh:
        _products_lane(i, 0, x, xd, xp_, xr, g, gd, gp, gr, src, srcd, srcp, srcr, mean,
                       rstd, True, True, params, ints, hv, hd, hp, hr, kv, kd, kp, kr, False)
    else:
        _products_lane(i, 0, x, xd, xp_, xr, g, gd, gp, gr, src, srcd, srcp, srcr, mean,
                       rstd, want_gxh, want_gh, params, ints, hv, hd, hp, hr, kv, kd, kp,
                       kr, False)


@_inline
def _product_sums(i: int, n: int, src: Any, srcd: Any, srcp: Any, srcr: Any, hv: Any,
                  hd: Any, hp: Any, hr: Any, kv: Any, kd: Any, kp: Any, kr: Any,
                  want_rows: bool, want_cols: bool, rows_a: Any, rows_b: Any,
                  cols: Any) -> None:
    """Row ``i``'s part of layer norm backward's sums, after its products
    (:func:`_products_lane`): with ``want_rows`` the sums (:func:`_lane_sums`) of row
    ``i`` of ``src`` (``g w``, or ``g``) into ``rows_a`` and of the one-row ``h*``
    (``g w xhat``) into ``rows_b``; with ``want_cols`` the one-row ``k*`` (``g xhat``,
    ``n`` columns) added to the column sums ``cols`` (value, magnitude, det, prob,
    ref_err by rows: each column's terms added in row order)."""
    if want_rows:
        svi, sdi, spi, sri = _row(src, i), _row(srcd, i), _row(srcp, i), _row(srcr, i)
        _lane_sums(src[svi:svi + 1], srcd[sdi:sdi + 1], srcp[spi:spi + 1],
                   srcr[sri:sri + 1], rows_a, i)
        _lane_sums(hv, hd, hp, hr, rows_b, i)
    if want_cols:
        for j in range(n):
            v = kv[0, j]
            cols[0, j] += v
            cols[1, j] += abs(v)
            cols[2, j] += kd[0, j]
            cols[3, j] += kp[0, j]
            cols[4, j] += kr[0, j]


@_loop
def backward_sums(x: Any, xd: Any, xp_: Any, xr: Any, g: Any, gd: Any, gp: Any, gr: Any,
                  mean: Any, rstd: Any, w: Any, has_w: bool, want_gxh: bool, want_gh: bool,
                  test_gx: bool, test: bool, params: Any, ints: Any, gx: Any, gxd: Any,
                  gxp: Any, gxr: Any, hv: Any, hd: Any, hp: Any, hr: Any, kv: Any, kd: Any,
                  kp: Any, kr: Any, rows_a: Any, rows_b: Any, cols: Any) -> None:
    """:func:`backward_products` with the sums its products are for: ``g w`` (with
    ``has_w``) into the one-row ``gx*``; with ``want_gxh`` the sums (:func:`_lane_sums`)
    of each row of ``gx`` (``g`` without ``w``) into ``rows_a`` and of ``gx xhat``,
    formed in the one-row ``h*``, into ``rows_b``; with ``want_gh`` the column sums of
    ``g xhat``, formed in the one-row ``k*``, into ``cols`` (value, magnitude, det,
    prob, ref_err by rows; each column's terms added in row order; the products by
    :func:`_summed_products`)."""
    n = x.shape[1]
    for i in range(x.shape[0]):
        src, srcd, srcp, srcr = _weighted_rows(i, 0, g, gd, gp, gr, w, has_w, params, ints,
                                               gx, gxd, gxp, gxr, test_gx)
        _summed_products(i, x, xd, xp_, xr, g, gd, gp, gr, src, srcd, srcp, srcr, mean, rstd,
                         want_gxh, want_gh, params, ints, hv, hd, hp, hr, kv, kd, kp, kr,
                         test)
        _product_sums(i, n, src, srcd, srcp, srcr, hv, hd, hp, hr, kv, kd, kp, kr, want_gxh,
                      want_gh, rows_a, rows_b, cols)


@_inline
def _input_grad_lane(i: int, x: Any, xd: Any, xp_: Any, xr: Any, g: Any, gd: Any, gp: Any,
                     gr: Any, mean: Any, rstd: Any, a: Any, b: Any, params: Any, ints: Any,
                     value: Any, det: Any, prob: Any, ref: Any, mag: Any, test: bool) -> None:
    u, tiny, u64, fmax = params[0], params[1], params[2], params[3]
    t, emin = ints[0], ints[1]
    m, md, mp, mr = mean[i, 0], mean[i, 1], mean[i, 2], mean[i, 3]
    s, sd, sp, sr = rstd[i, 0], rstd[i, 1], rstd[i, 2], rstd[i, 3]
    av, ad, ap, ar = a[i, 0], a[i, 1], a[i, 2], a[i, 3]
    bv, bd, bp, br = b[i, 0], b[i, 1], b[i, 2], b[i, 3]
    di, pi, ri = _row(xd, i), _row(xp_, i), _row(xr, i)
    gvi, gdi, gpi, gri = _row(g, i), _row(gd, i), _row(gp, i), _row(gr, i)
    for j in range(x.shape[1]):
        v, d, p, r = _minus(x[i, j], xd[di, j], xp_[pi, j], xr[ri, j], m, md, mp, mr, u, tiny,
                            u64, t, emin, fmax, test)
        v, d, p, r = _times(v, d, p, r, s, sd, sp, sr, u, tiny, u64, t, emin, fmax, test)
        v, d, p, r = _times(v, d, p, r, bv, bd, bp, br, u, tiny, u64, t, emin, fmax, test)
        c, cd, cp, cr = _minus(g[gvi, j], gd[gdi, j], gp[gpi, j], gr[gri, j], av, ad, ap, ar, u,
                               tiny, u64, t, emin, fmax, test)
        c, cd, cp, cr = _minus(c, cd, cp, cr, v, d, p, r, u, tiny, u64, t, emin, fmax, test)
        c, cd, cp, cr = _times(c, cd, cp, cr, s, sd, sp, sr, u, tiny, u64, t, emin, fmax, test)
        value[i, j] = c
        det[i, j] = cd
        prob[i, j] = cp
        ref[i, j] = cr
        mag[i, j] = abs(c)


@_loop
def input_grad_rows(x: Any, xd: Any, xp_: Any, xr: Any, g: Any, gd: Any, gp: Any, gr: Any,
                    mean: Any, rstd: Any, a: Any, b: Any, test: bool, params: Any, ints: Any,
                    value: Any, det: Any, prob: Any, ref: Any, mag: Any, w: Any, has_w: bool,
                    test_gx: bool, wv: Any, wd: Any, wp: Any, wr: Any) -> None:
    """Per element: ``rstd ((g - a) - xhat b)`` with ``xhat = (x - mean) rstd``
    (``normalization._input_grad`` after its means ``a`` and ``b``; ``g`` the
    weighted gradient, with ``has_w`` formed here first per row, ``g w`` as
    :func:`backward_products` forms it into the one-row ``w*``; ``test``: whether
    ``x - mean`` or ``g - a`` may be exact somewhere). ``mean``, ``rstd``, ``a``,
    ``b`` per row, ``w`` per column: value, det, prob, ref_err. ``params``: u, tiny,
    u64, the accumulation's largest number; ``ints``: t, emin."""
    for i in range(x.shape[0]):
        if has_w:
            _weighted_lane(i, 0, g, gd, gp, gr, w, params, ints, wv, wd, wp, wr, test_gx)
            if test:
                _input_grad_lane(i, x, xd, xp_, xr, wv, wd, wp, wr, mean, rstd, a, b, params,
                                 ints, value, det, prob, ref, mag, True)
            else:
                _input_grad_lane(i, x, xd, xp_, xr, wv, wd, wp, wr, mean, rstd, a, b, params,
                                 ints, value, det, prob, ref, mag, False)
        elif test:
            _input_grad_lane(i, x, xd, xp_, xr, g, gd, gp, gr, mean, rstd, a, b, params, ints,
                             value, det, prob, ref, mag, True)
        else:
            _input_grad_lane(i, x, xd, xp_, xr, g, gd, gp, gr, mean, rstd, a, b, params, ints,
                             value, det, prob, ref, mag, False)


@_inline
def _mean_of_parts(parts: Any, i: int, fin: Any) -> tuple[float, float, float, float, bool]:
    """Row ``i`` of ``parts`` (the float64 sums of a row's values, magnitudes, det, prob
    and ref_err) as ``tracked.sum_of_parts`` makes its sum, then divided by the row's
    length as ``tracked.mul_scalar`` divides (its NumPy passes' operations in their
    order): value, det, prob, ref_err, and whether either decides otherwise here (a
    part not finite, ``S`` beyond the accumulator, a NaN radius, the float64 reference
    not precise enough, a sum's det 0: its exact test). ``fin``: the sum's
    coefficients (``tracked.parts_coefficients``), the escalation share, the divisor
    and the division's (``tracked.scalar_coefficients``)."""
    sv, sm, sd, sp, sr = parts[i, 0], parts[i, 1], parts[i, 2], parts[i, 3], parts[i, 4]
    grow, tiny_mag, det_coef, prob_coef, eta = fin[0], fin[1], fin[2], fin[3], fin[4]
    g64, tiny_sum, acc_max, share, c = fin[5], fin[6], fin[7], fin[8], fin[9]
    k, ref_coef, scale_coef, radius_coef, grow1, tiny = (fin[10], fin[11], fin[12], fin[13],
                                                          fin[14], fin[15])
    bad = not (abs(sm) < np.inf and abs(sd) < np.inf and abs(sp) < np.inf
               and abs(sr) < np.inf)
    s = sm + sd
    s = s * grow
    s = s + tiny_mag
    det = s * det_coef + eta
    prob = s * prob_coef + eta
    ref = s * g64 + tiny_sum
    ref = ref + sr
    det = det + sd
    prob = prob + sp
    bad = bad or s > acc_max or det != det or det == 0.0
    bad = bad or (ref > share * min(det, prob) and abs(sv) < np.inf)
    v = sv / c
    r = ref * k
    r = r + (ref_coef * abs(v) + 5e-324)
    q = (abs(sv) + ref) * scale_coef
    q = q + tiny
    d = det * radius_coef
    d = d * grow1 + q
    p = prob * radius_coef
    p = p * grow1 + q
    return v, d, p, r, bad


@_loop
def backward_merged(x: Any, xd: Any, xp_: Any, xr: Any, g: Any, gd: Any, gp: Any, gr: Any,
                    mean: Any, rstd: Any, w: Any, has_w: bool, want_gh: bool, test_gx: bool,
                    test: bool, params: Any, ints: Any, fin: Any, gx: Any, gxd: Any, gxp: Any,
                    gxr: Any, hv: Any, hd: Any, hp: Any, hr: Any, kv: Any, kd: Any, kp: Any,
                    kr: Any, rows_a: Any, rows_b: Any, cols: Any, means: Any, value: Any,
                    det: Any, prob: Any, ref: Any, mag: Any, flags: Any) -> None:
    """:func:`backward_sums` (the sums of ``g w`` and ``g w xhat``; the column sums of
    ``g xhat`` with ``want_gh``) and :func:`input_grad_rows` in one pass over the rows:
    per row ``g w`` (with ``has_w``, into the one-row ``gx*``, formed once), the
    products and their sums, the row's means (:func:`_mean_of_parts`, into
    ``means[0, i]`` and ``means[1, i]``), then its input gradient while the row is in
    cache: the lanes of the two loops, the same bits as they give with the sums
    finished between them. ``flags[0]``: rows where a mean decides otherwise (the
    caller discards the pass), ``flags[1]``, ``flags[2]``: rows whose sum of ``g w``'s
    det, of ``g w xhat``'s, is positive (``sum_of_parts`` needs one in each)."""
    bad = 0
    positive_a = 0
    positive_b = 0
    n = x.shape[1]
    for i in range(x.shape[0]):
        src, srcd, srcp, srcr = _weighted_rows(i, 0, g, gd, gp, gr, w, has_w, params, ints,
                                               gx, gxd, gxp, gxr, test_gx)
        _summed_products(i, x, xd, xp_, xr, g, gd, gp, gr, src, srcd, srcp, srcr, mean, rstd,
                         True, want_gh, params, ints, hv, hd, hp, hr, kv, kd, kp, kr, test)
        _product_sums(i, n, src, srcd, srcp, srcr, hv, hd, hp, hr, kv, kd, kp, kr, True,
                      want_gh, rows_a, rows_b, cols)
        for q in range(2):
            v, d, p, r, off = _mean_of_parts(rows_a if q == 0 else rows_b, i, fin)
            means[q, i, 0] = v
            means[q, i, 1] = d
            means[q, i, 2] = p
            means[q, i, 3] = r
            bad += off
        if test:
            _input_grad_lane(i, x, xd, xp_, xr, src, srcd, srcp, srcr, mean, rstd, means[0],
                             means[1], params, ints, value, det, prob, ref, mag, True)
        else:
            _input_grad_lane(i, x, xd, xp_, xr, src, srcd, srcp, srcr, mean, rstd, means[0],
                             means[1], params, ints, value, det, prob, ref, mag, False)
        positive_a += rows_a[i, 2] > 0.0
        positive_b += rows_b[i, 2] > 0.0
    flags[0] = bad
    flags[1] = positive_a
    flags[2] = positive_b
