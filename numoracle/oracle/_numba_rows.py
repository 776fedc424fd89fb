"""The whole-rule loops of the softmax family, compiled by numba (imported only
where numba is installed, through :mod:`~numoracle.oracle.fused_cpu`).

A softmax or log-softmax rule composes a dozen primitives (a maximum, a
subtraction, two exponentials, sums, divisions, the online bound); each makes
several passes over the whole input on NumPy. Here the elementwise part of a
whole rule is two loops over the rows (lanes of the last axis), run in parallel
over the rows: one before the rule's sums (the shifted exponential and its
radii, the exponential of the unshifted input, the online bound's terms) and
one after (the quotients or differences and their radii, both formulations and
the choice between them). Each performs the primitives' float64 operations in
their order (:mod:`~numoracle.oracle._numba_loops`: the same bits) but for ``exp``
and ``expm1``, which are :mod:`~numoracle.oracle._numba_exp`'s (arithmetic that
vectorises, within its proven error of the functions; the radii's allowance for the
reference's own error covers it: the values may differ from NumPy's in their last
bits); the sums of the exponentials stay NumPy's (their summation order sets their
bits), the online bound's terms are summed in the loop (a bound: its order matters
not).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from ._numba_counts import larger_counts_row, larger_counts_self
from ._numba_exp import exp as _exp_v
from ._numba_exp import EXPM1_SMALL, expm1_up, expm1_up_small
from ._numba_loops import _decided, _float_bits, _maximum, _rmul

_par = numba.njit(cache=True, nogil=True, parallel=True)
_jit = numba.njit(cache=True, nogil=True)
#: the scalar forms the loops call: inlined into them (numba's own inlining), so that a
#: loop whose arguments are contiguous and whose branches are loop-invariant vectorises
_inline = numba.njit(cache=True, nogil=True, inline="always")


@_par
def row_max(x: Any, xd: Any, xp_: Any, xr: Any, out: Any) -> bool:
    """Per row: the largest value, det, prob and ref_err (``out[:, :4]``: the
    maximum's radii are the largest along the row), the largest ``x + det + ref_err``
    (``out[:, 4]``) and how many entries are masked (``out[:, 5]``: an exact
    ``-inf``); whether every other value and every radius is finite."""
    rows, cols = x.shape
    bad = 0
    for i in numba.prange(rows):
        mv, md, mp, mr, mh = -np.inf, -np.inf, -np.inf, -np.inf, -np.inf
        fin = True
        masked = 0
        for j in range(cols):
            v, d, p, r = x[i, j], xd[i, j], xp_[i, j], xr[i, j]
            hole = v == -np.inf and d == 0.0 and r == 0.0
            masked += hole
            fin = fin and (abs(v) < np.inf or hole) and abs(d) < np.inf and abs(p) < np.inf \
                and abs(r) < np.inf
            mv = max(mv, v)
            md = max(md, d)
            mp = max(mp, p)
            mr = max(mr, r)
            mh = max(mh, v + (d + r))
        out[i, 0] = mv
        out[i, 1] = md
        out[i, 2] = mp
        out[i, 3] = mr
        out[i, 4] = mh
        out[i, 5] = masked
        if not fin:
            bad += 1
    return bad == 0


_MANT = np.uint64(0xFFFFFFFFFFFFF)
_HIDDEN = np.uint64(1 << 52)
_ONE = np.uint64(1)


@_inline
def _on_grid(x: float, t: int, emin: int, fmax: float) -> bool:
    """``_numba_loops._representable`` without a branch or a table: whether float64
    ``x`` is a value of the format (``t``, ``emin``, ``fmax``): NaN, the infinities
    and zeros are; else within range and a multiple of ``2^k``, ``k = max(floor(log2
    |x|), emin) - t`` (-1075 the floor of a float64 subnormal), that is the low ``k -
    e`` bits of its significand zero, ``2^e`` the unit of that significand (a mask of
    at most 63 bits: a significand has 53)."""
    a = abs(x)
    b = _float_bits(a)
    e_field = np.int64(b >> np.uint64(52))
    normal = e_field != 0
    sig = (b & _MANT) | (_HIDDEN if normal else np.uint64(0))
    floor_log2 = e_field - 1023 if normal else np.int64(-1075)
    unit = (e_field if normal else np.int64(1)) - 1075
    low_bits = max(floor_log2, emin) - t - unit
    low_bits = min(max(low_bits, 0), 63)
    mask = (_ONE << np.uint64(low_bits)) - _ONE
    return (a == 0.0) | (not a <= 1.7976931348623157e308) | ((a <= fmax) & ((sig & mask) == 0))


@_inline
def _shifted(xv: float, ad: float, ap: float, ar: float, m: float, md: float, mp: float,
             mr: float, u: float, tiny: float, u64: float, test_exact: bool, t: int, emin: int,
             fmax: float) -> tuple[float, float, float, float]:
    """``x - m`` as tracked ``sub`` computes it (its loops ``add_radii`` and
    ``add_exact``): value, det, prob, ref_err."""
    y = -1.0 * m
    v = xv + y
    mm = abs(v)
    r = (ar + mr) + u64 * mm
    s = mm + r
    s = s * u
    s = s + tiny
    grow = 1.0 + u
    d = (ad + md) * grow + s
    p = (ap + mp) * grow + s
    if test_exact:  # (each part computed, then chosen: the loop vectorises)
        bb = v - xv
        held = (ad == 0.0) & (md == 0.0) & (ar == 0.0) & (mr == 0.0) \
            & ((xv - (v - bb)) + (y - bb) == 0.0) & _on_grid(v, t, emin, fmax)
        r = 0.0 if held else r
        d = 0.0 if held else d
        p = 0.0 if held else p
    return v, d, p, r


@_inline
def _exp_from(v: float, td: float, tp: float, tr: float, lip: float, value: float,
              ulps: float, per_x: float, of_one: float, u: float, tiny: float,
              ref_unit: float, acc_max: float) -> tuple[float, float, float, float]:
    """``exp`` of a tracked element as ``elementary`` computes it (its loop
    ``elementary_radii``, a Lipschitz bound ``lip = exp(v + (td + tr))``), given
    its exponentials ``lip`` and ``value = exp(v)`` (:func:`_exp_calls`): value, det,
    prob, ref_err. (A zero
    ``ref_err`` gives the same bits as the rule's form without it.)"""
    reach = td + tr
    va = abs(value)
    d = _rmul(lip, td)
    p = _rmul(lip, tp)
    r = ref_unit * va
    r = _rmul(lip, tr) + r
    grown = ulps + per_x * (abs(v) + reach)  # (each form computed, then chosen: the
    k = grown if per_x != 0.0 else ulps       # loop vectorises)
    e = ((2.0 * k) * u) * ((va + d) + r) + k * tiny
    e_one = e + (2.0 * u) * of_one
    e = e_one if of_one != 0.0 else e
    d = d + e
    p = p + e
    over = (va + d) >= acc_max
    d = np.inf if over else d
    p = np.inf if over else p
    return value, d, p, r


@_inline
def _exp(v: float, td: float, tp: float, tr: float, ulps: float, per_x: float, of_one: float,
         u: float, tiny: float, ref_unit: float, acc_max: float
         ) -> tuple[float, float, float, float]:
    """:func:`_exp_from` with its calls."""
    return _exp_from(v, td, tp, tr, _exp_v(v + (td + tr)), _exp_v(v), ulps, per_x,
                     of_one, u, tiny, ref_unit, acc_max)


@_inline
def _special(v: float, d: float, r: float) -> bool:
    """ieee's special point: an exact 0 or infinity, or NaN with a finite reach."""
    reach = d + r
    return (reach == 0.0 and (v == 0.0 or abs(v) == np.inf)) or (v != v and abs(reach) < np.inf)


@_inline
def _shifted_lane(x: Any, xd: Any, xp_: Any, xr: Any, m: float, md: float, mp: float,
                  mr: float, u: float, tiny: float, u64: float, test_exact: bool, t: int,
                  emin: int, fmax: float, sv: Any, sd: Any, sp: Any, sr: Any) -> None:
    """One row of ``x - m`` (:func:`_shifted`) into ``s*`` (``test_exact`` a constant
    where it is called: the loop without it vectorises)."""
    for j in range(x.size):
        sv[j], sd[j], sp[j], sr[j] = _shifted(x[j], xd[j], xp_[j], xr[j], m, md, mp, mr, u,
                                              tiny, u64, test_exact, t, emin, fmax)


@_inline
def _exp_calls(v: Any, d: Any, r: Any, lip: Any, value: Any) -> None:
    """A row's two exponentials of :func:`_exp`: ``exp(v + (d + r))`` into ``lip`` and
    ``exp(v)`` into ``value`` (:mod:`~numoracle.oracle._numba_exp`'s: the loop
    vectorises)."""
    for j in range(v.size):
        value[j] = _exp_v(v[j])
        lip[j] = _exp_v(v[j] + (d[j] + r[j]))


@_inline
def _exp_finish(x: Any, v: Any, td: Any, tp: Any, tr: Any, lip: Any, value: Any,
                ulps: float, per_x: float, of_one: float, u: float, tiny: float,
                ref_unit: float, acc_max: float, od: Any, op: Any, orr: Any) -> tuple[
                    int, int, int]:
    """A row of :func:`_exp_from` after its calls (``lip``, ``value``): its radii into
    ``o*`` (which may be ``t*``: each element is read before it is written), an
    entry of ``x`` that is ``-inf`` (masked) an exact 0; how many entries are an
    unmasked special point, how many have a zero det, a zero ref_err (masked ones
    counted)."""
    n_special, n_d, n_r = 0, 0, 0
    for j in range(v.size):
        val, d, p, r = _exp_from(v[j], td[j], tp[j], tr[j], lip[j], value[j], ulps, per_x,
                                 of_one, u, tiny, ref_unit, acc_max)
        hole = x[j] == -np.inf
        val = 0.0 if hole else val
        d = 0.0 if hole else d
        p = 0.0 if hole else p
        r = 0.0 if hole else r
        n_special += (not hole) and _special(val, d, r)
        n_d += d == 0.0
        n_r += r == 0.0
        value[j] = val
        od[j] = d
        op[j] = p
        orr[j] = r
    return n_special, n_d, n_r


#: entries of a row that :func:`shifted_exp_rows` takes at a time (its buffers for them
#: stay in the first-level cache)
_BLOCK = 512


@_par
def shifted_exp_rows(x: Any, xd: Any, xp_: Any, xr: Any, mx: Any, test_exact: bool,
                     unshifted: bool, shared: bool, params: Any, ints: Any, ev: Any, ed: Any,
                     ep: Any, er: Any, extra: Any, xe: Any, xed: Any, xep: Any, xer: Any,
                     flags: Any) -> None:
    """Per row: ``e = exp(x - max x)`` (value and radii), the sum of the online bound's
    terms (``softmax.online_radius``: ``(|e| + det) expm1(u gap (1 + 2^-20) + k (2 ulps
    + 1) u)`` with ``k`` the entries that may be larger, 0 where ``e`` is 0; ``expm1``
    rounded up, :func:`~numoracle.oracle._numba_exp.expm1_up`) into ``extra``, and with
    ``unshifted`` ``exp(x)``. ``mx``: :func:`row_max`'s; ``shared``: the input's det
    and prob are one array (so are the exponentials': ``ep`` and ``xep`` are left
    unwritten); ``params``: u, tiny, u64, fmax, exp's ulps, per_x, of_one, the
    reference's unit, the accumulation's largest number, the online bound's u;
    ``ints``: t, emin. ``flags`` per row: a special point in ``e`` or ``exp(x)`` (0),
    a zero det of ``x - m`` (1), of its ref_err (2), of ``e``'s det (3), ref_err (4),
    of ``exp(x)``'s det (5), ref_err (6). A masked entry (``-inf``, row_max's) gives
    exact zeros, as ieee decides ``x - m = -inf`` and ``exp`` of it. Each row: the
    count of larger entries, then blocks of :data:`_BLOCK` entries in passes (``x -
    m``, its ``exp`` (:mod:`~numoracle.oracle._numba_exp`), the rest of ``exp``, the
    terms, ``exp(x)``), each vectorised."""
    rows, cols = x.shape
    u, tiny, u64, fmax = params[0], params[1], params[2], params[3]
    ulps, per_x, of_one, ref_unit, acc_max = params[4], params[5], params[6], params[7], \
        params[8]
    uo = params[9]
    t, emin = ints[0], ints[1]
    for i in numba.prange(rows):
        m, md, mp, mr, top = mx[i, 0], mx[i, 1], mx[i, 2], mx[i, 3], mx[i, 4]
        larger = np.empty(cols)  # (the counts as floats: the terms' loop reads them so)
        buf = np.empty((6, _BLOCK))
        sv, sd, sp, sr, lip, scratch = buf[0], buf[1], buf[2], buf[3], buf[4], buf[5]
        lo_row, hi_row = np.empty(cols), np.empty(cols)
        spread = 0
        for j in range(cols):
            r = xd[i, j] + xr[i, j]
            spread += r != 0.0
            lo_row[j] = x[i, j] - r
            hi_row[j] = x[i, j] + r
        if spread > 0:
            larger_counts_row(lo_row, hi_row, larger)
        else:  # (an exact row: lo and hi are x, the count of one array)
            larger_counts_self(hi_row, larger)
        n0, n1, n2, n3, n4, n5, n6 = 0, 0, 0, 0, 0, 0, 0
        total = 0.0
        for j0 in range(0, cols, _BLOCK):
            w = min(_BLOCK, cols - j0)
            j1 = j0 + w
            xi, xdi, xpi, xri = x[i, j0:j1], xd[i, j0:j1], xp_[i, j0:j1], xr[i, j0:j1]
            evi, edi, eri = ev[i, j0:j1], ed[i, j0:j1], er[i, j0:j1]
            epi = scratch[:w] if shared else ep[i, j0:j1]
            bv, bd, bp, br, bl = sv[:w], sd[:w], sp[:w], sr[:w], lip[:w]
            if test_exact:
                _shifted_lane(xi, xdi, xpi, xri, m, md, mp, mr, u, tiny, u64, True, t, emin,
                              fmax, bv, bd, bp, br)
            else:
                _shifted_lane(xi, xdi, xpi, xri, m, md, mp, mr, u, tiny, u64, False, t, emin,
                              fmax, bv, bd, bp, br)
            for j in range(w):  # (a masked entry's x - m counts as exact: its exp is)
                hole = xi[j] == -np.inf
                n1 += hole or bd[j] == 0.0
                n2 += hole or br[j] == 0.0
            _exp_calls(bv, bd, br, bl, evi)
            c0, c3, c4 = _exp_finish(xi, bv, bd, bp, br, bl, evi, ulps, per_x, of_one, u,
                                     tiny, ref_unit, acc_max, edi, epi, eri)
            n0 += c0
            n3 += c3
            n4 += c4
            large = 0
            for j in range(w):  # the online bound's arguments, into sv (each form
                gap = top - lo_row[j0 + j]  # computed, then chosen: the loop vectorises)
                grown = ulps + per_x * gap
                c = 2.0 * (grown if per_x != 0.0 else ulps) + 1.0
                arg = uo * gap * (1.0 + 2.0**-20) + larger[j0 + j] * c * uo
                large += not arg < EXPM1_SMALL  # (NaN counted)
                bv[j] = arg
            if large == 0:  # its terms, into sv (expm1_up's bits without its exp)
                for j in range(w):
                    val = evi[j]
                    term = (abs(val) + edi[j]) * expm1_up_small(bv[j])
                    bv[j] = term if val != 0.0 else 0.0
            else:
                for j in range(w):
                    val = evi[j]
                    term = (abs(val) + edi[j]) * expm1_up(bv[j])
                    bv[j] = term if val != 0.0 else 0.0
            for j in range(w):
                total += bv[j]
            if unshifted:
                xei, xedi, xeri = xe[i, j0:j1], xed[i, j0:j1], xer[i, j0:j1]
                xepi = scratch[:w] if shared else xep[i, j0:j1]
                _exp_calls(xi, xdi, xri, bl, xei)
                c0, c5, c6 = _exp_finish(xi, xi, xdi, xpi, xri, bl, xei, ulps, per_x, of_one,
                                         u, tiny, ref_unit, acc_max, xedi, xepi, xeri)
                n0 += c0
                n5 += c5
                n6 += c6
        extra[i] = total
        flags[i, 0] = n0 > 0
        flags[i, 1] = n1 > 0
        flags[i, 2] = n2 > 0
        flags[i, 3] = n3 > 0
        flags[i, 4] = n4 > 0
        flags[i, 5] = n5 > 0
        flags[i, 6] = n6 > 0


@_inline
def _div(a: float, ad: float, ap: float, ar: float, b: float, bd: float, bp: float, br: float,
         rel_u: float, rel_tiny: float, grow: float, u64: float, acc_max: float
         ) -> tuple[float, float, float, float]:
    """``a / b`` as ``elementwise.div`` computes it: value, det, prob, ref_err."""
    value = a / b
    q = abs(value)
    ab = abs(b)
    room = ab - bd
    d = (ad + _rmul(q, bd)) / room if room > 0.0 else np.inf
    room = ab - bp
    p = (ap + _rmul(q, bp)) / room if room > 0.0 else np.inf
    room = ab - br
    r = (ar + _rmul(q, br)) / room if room > 0.0 else np.inf
    r = r + u64 * q
    s = ((q + d) + r) * rel_u + rel_tiny
    d = d * grow + s
    p = p * grow + s
    if (q + d) >= acc_max:
        d = np.inf
        p = np.inf
    return value, d, p, r


@_inline
def _mul(x: float, xd: float, xp_: float, xr: float, y: float, yd: float, yp: float, yr: float,
         u: float, tiny: float, u64: float, fmax: float) -> tuple[float, float, float, float]:
    """``x y`` as the loop ``mul_radii`` computes it: value, det, prob, ref_err."""
    v = x * y
    m = abs(v)
    ax, ay = abs(x), abs(y)
    d = (_rmul(ax, yd) + _rmul(xd, ay)) + _rmul(xd, yd)
    p = (_rmul(ax, yp) + _rmul(xp_, ay)) + _rmul(xp_, yp)
    r = ((_rmul(ax, yr) + _rmul(xr, ay)) + _rmul(xr, yr)) + u64 * m
    s = ((m + d) + r) * u + tiny
    grow = 1.0 + u
    d = d * grow + s
    p = p * grow + s
    over = (m + d) >= fmax
    wild = (not abs(xd) < np.inf and y == 0.0 and yd == 0.0) or (
        not abs(yd) < np.inf and x == 0.0 and xd == 0.0)
    d = np.nan if wild else d
    p = np.nan if wild else p
    d = np.inf if over else d
    p = np.inf if over else p
    return v, d, p, r


@_inline
def _either(a: float, d1: float, p1: float, m1: float, b: float, d2: float, p2: float,
            r2: float, m2: float, grow: float) -> tuple[float, float, float]:
    """tracked ``either`` of two elements (its loop ``either_radii``): det, prob, mag."""
    gap = 0.0 if a == b else abs(b - a)
    gap = gap * grow
    gap = gap + r2
    d = _maximum(d1, gap + d2)
    p = _maximum(p1, gap + p2)
    split = ((a != a) != (b != b)) or ((abs(a) == np.inf or abs(b) == np.inf) and a != b)
    if split:
        d = np.nan
        p = np.nan
    return d, p, _maximum(m1, m2)


@_inline
def _softmax_lane(i: int, ev: Any, ed: Any, ep: Any, er: Any, tot: Any, rec: Any,
                  params: Any, value: Any, det: Any, prob: Any, ref: Any, mag: Any,
                  carry: bool) -> None:
    """Row ``i`` of :func:`softmax_rows` (``carry`` a constant where it is called: the
    loop without it vectorises)."""
    u, tiny, u64, acc_max = params[0], params[1], params[2], params[3]
    rel_u, rel_tiny, grow_div, grow_either = params[4], params[5], params[6], params[7]
    s, sd, sp, sr = tot[i, 0], tot[i, 1], tot[i, 2], tot[i, 3]
    c, cd, cp, cr = rec[i, 0], rec[i, 1], rec[i, 2], rec[i, 3]
    for j in range(ev.shape[1]):
        a, ad, ap, ar = ev[i, j], ed[i, j], ep[i, j], er[i, j]
        v1, d1, p1, r1 = _div(a, ad, ap, ar, s, sd, sp, sr, rel_u, rel_tiny, grow_div,
                              u64, acc_max)
        v2, d2, p2, r2 = _mul(a, ad, ap, ar, c, cd, cp, cr, u, tiny, u64, acc_max)
        m1, m2 = abs(v1), abs(v2)
        if carry:  # the special values (a masked entry's exact 0) ieee decides
            ok, w = _decided(3, a, ad + ar, s, sd + sr, True)
            if ok:
                v1, d1, p1, r1, m1 = w, 0.0, 0.0, 0.0, (0.0 if w != w else abs(w))
            ok, w = _decided(2, a, ad + ar, c, cd + cr, False)
            if ok:
                v2, d2, p2, r2, m2 = w, 0.0, 0.0, 0.0, (0.0 if w != w else abs(w))
        d, p, m = _either(v1, d1, p1, m1, v2, d2, p2, r2, m2, grow_either)
        value[i, j] = v1
        det[i, j] = d
        prob[i, j] = p
        ref[i, j] = r1
        mag[i, j] = m


@_par
def softmax_rows(ev: Any, ed: Any, ep: Any, er: Any, tot: Any, rec: Any, carry: bool,
                 params: Any, value: Any, det: Any, prob: Any, ref: Any, mag: Any) -> None:
    """Per element: ``e / s`` or ``e (1 / s)`` (``softmax``'s two formulations, by
    ``elementwise.div``, ``mul`` and ``either``), ``tot`` and ``rec`` per row the sum
    ``s`` and ``1 / s`` (value, det, prob, ref_err). ``params``: u, tiny, u64,
    the accumulation's largest number, the division's ``rel u``, ``rel tiny``,
    ``1 + rel u``, either's growth."""
    for i in numba.prange(ev.shape[0]):
        if carry:
            _softmax_lane(i, ev, ed, ep, er, tot, rec, params, value, det, prob, ref, mag, True)
        else:
            _softmax_lane(i, ev, ed, ep, er, tot, rec, params, value, det, prob, ref, mag, False)


@_inline
def _sub(x: float, xd: float, xp_: float, xr: float, y: float, yd: float, yp: float, yr: float,
         u: float, tiny: float, u64: float, test_exact: bool, t: int, emin: int, fmax: float
         ) -> tuple[float, float, float, float, float]:
    """``x - y`` as tracked ``sub`` computes it: value, det, prob, ref_err, mag."""
    v, d, p, r = _shifted(x, xd, xp_, xr, y, yd, yp, yr, u, tiny, u64, test_exact, t, emin,
                          fmax)
    return v, d, p, r, abs(x) + abs(-1.0 * y)


@_inline
def _deviation_lane(i: int, x: Any, xd: Any, xp_: Any, xr: Any, mx: Any, params: Any,
                    ints: Any, dv: Any, dd: Any, dp: Any, dr: Any, test: bool) -> None:
    """Row ``i`` of ``x - m`` (``m`` its maximum) into the row buffers ``d*``, with
    ``test`` (a constant where it is called) its exact test."""
    u, tiny, u64, fmax = params[0], params[1], params[2], params[3]
    t, emin = ints[0], ints[1]
    m, md, mp, mr = mx[i, 0], mx[i, 1], mx[i, 2], mx[i, 3]
    for j in range(x.shape[1]):
        dv[j], dd[j], dp[j], dr[j] = _shifted(x[i, j], xd[i, j], xp_[i, j], xr[i, j], m, md,
                                              mp, mr, u, tiny, u64, test, t, emin, fmax)


@_inline
def _log_softmax_lane(i: int, x: Any, xd: Any, xp_: Any, xr: Any, dv_: Any, dd_: Any,
                      dp_: Any, dr_: Any, logs: Any, top: Any, plain: Any, exact: Any,
                      params: Any, ints: Any, value: Any, det: Any, prob: Any, ref: Any,
                      mag: Any, row_ok: bool, test: bool) -> None:
    """Row ``i`` of :func:`log_softmax_rows` after ``x - m`` (``d*``, the row's
    buffers; ``row_ok`` and ``test``, whether a later subtraction tests for an exact
    result, constants where it is called: the loop without them vectorises)."""
    u, tiny, u64, fmax, grow = params[0], params[1], params[2], params[3], params[4]
    t, emin = ints[0], ints[1]
    lv, ld, lp, lr = logs[i, 0], logs[i, 1], logs[i, 2], logs[i, 3]
    tv, td, tp, tr = top[i, 0], top[i, 1], top[i, 2], top[i, 3]
    pv, pd, pp, pr = plain[i, 0], plain[i, 1], plain[i, 2], plain[i, 3]
    e1, e2, e3 = test and exact[1], test and exact[2], test and exact[3]
    for j in range(x.shape[1]):
        xv, ad, ap, ar = x[i, j], xd[i, j], xp_[i, j], xr[i, j]
        v1, d1, p1, r1, m1 = _sub(dv_[j], dd_[j], dp_[j], dr_[j], lv, ld, lp, lr, u, tiny, u64,
                                  e1, t, emin, fmax)
        v2, d2, p2, r2, m2 = _sub(xv, ad, ap, ar, tv, td, tp, tr, u, tiny, u64, e2, t, emin,
                                  fmax)
        d, p, m_ = _either(v1, d1, p1, m1, v2, d2, p2, r2, m2, grow)
        if row_ok:
            v3, d3, p3, r3, m3 = _sub(xv, ad, ap, ar, pv, pd, pp, pr, u, tiny, u64, e3, t,
                                      emin, fmax)
            if abs(d3) < np.inf and abs(v3) < np.inf:
                d, p, m_ = _either(v1, d, p, m_, v3, d3, p3, r3, m3, grow)
        value[i, j] = v1
        det[i, j] = d
        prob[i, j] = p
        ref[i, j] = r1
        mag[i, j] = m_


@_par
def log_softmax_rows(x: Any, xd: Any, xp_: Any, xr: Any, mx: Any, logs: Any, top: Any,
                     plain: Any, ok: Any, exact: Any, params: Any, ints: Any, value: Any,
                     det: Any, prob: Any, ref: Any, mag: Any) -> None:
    """Per element: ``(x - m) - l`` or ``x - (m + l)`` (``l`` the log of the
    shifted sum; ``top``: ``m + l``), and where the row's ``ok`` says so also
    ``x - log(sum(exp(x)))`` (``plain``), each by tracked ``sub`` and covered by
    ``either`` (``log_softmax``'s formulations). Per row ``mx`` as
    :func:`row_max`'s, ``logs``, ``top``, ``plain``: value, det, prob, ref_err;
    ``exact``: whether each subtraction tests for an exact result (``x - m``,
    ``d - l``, ``x - top``, ``x - plain``). ``params``: u, tiny, u64, fmax, either's
    growth; ``ints``: t, emin. Per row ``x - m`` first (an exact input's maximum is
    exact: its test runs on every entry), then the rest."""
    cols = x.shape[1]
    test = exact[1] or exact[2] or exact[3]
    for i in numba.prange(x.shape[0]):
        dv, dd, dp, dr = np.empty(cols), np.empty(cols), np.empty(cols), np.empty(cols)
        if exact[0]:
            _deviation_lane(i, x, xd, xp_, xr, mx, params, ints, dv, dd, dp, dr, True)
        else:
            _deviation_lane(i, x, xd, xp_, xr, mx, params, ints, dv, dd, dp, dr, False)
        if ok[i]:
            if test:
                _log_softmax_lane(i, x, xd, xp_, xr, dv, dd, dp, dr, logs, top, plain, exact,
                                  params, ints, value, det, prob, ref, mag, True, True)
            else:
                _log_softmax_lane(i, x, xd, xp_, xr, dv, dd, dp, dr, logs, top, plain, exact,
                                  params, ints, value, det, prob, ref, mag, True, False)
        elif test:
            _log_softmax_lane(i, x, xd, xp_, xr, dv, dd, dp, dr, logs, top, plain, exact,
                              params, ints, value, det, prob, ref, mag, False, True)
        else:
            _log_softmax_lane(i, x, xd, xp_, xr, dv, dd, dp, dr, logs, top, plain, exact,
                              params, ints, value, det, prob, ref, mag, False, False)
