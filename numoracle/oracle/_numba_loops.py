"""The loops of :mod:`~numoracle.oracle.fused_cpu`, compiled by numba (imported
only where numba is installed). Each performs NumPy's float64 operations in
NumPy's order; see the CuPy kernels of :mod:`~numoracle.oracle.fused`, which
they mirror."""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from .formats import FP32, NOT_FINITE, OFF_SINGLE, SINGLE_UP, SUBNORMAL, UNREPRESENTABLE

_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
#: position of the set bit of 2^i, indexed by (2^i * _DEBRUIJN mod 2^64) >> 58
_CTZ = np.zeros(64, dtype=np.int64)
for _i in range(64):
    _CTZ[(((1 << _i) * int(_DEBRUIJN)) % (1 << 64)) >> 58] = _i

_jit = numba.njit(cache=True, nogil=True)
_SINGLE_TINY, _SINGLE_MAX = FP32.tiny, FP32.max


@_jit
def _ctz(m: Any) -> int:
    """Trailing zeros of a nonzero 64-bit word."""
    low = m & (~m + np.uint64(1))
    return _CTZ[(low * _DEBRUIJN) >> np.uint64(58)]


@_jit
def _lsb(b: Any, e_field: Any) -> tuple[int, int]:
    """The exponent of the lowest set bit of a nonzero finite float64 (its bits and
    exponent field), and ``floor(log2 |x|)`` (-1075 for a subnormal)."""
    mant = b & np.uint64(0xFFFFFFFFFFFFF)
    if e_field == 0:
        return -1074 + _ctz(mant), -1075
    return e_field - 1075 + _ctz(mant | np.uint64(0x10000000000000)), e_field - 1023


@_jit
def magnitudes(x: Any, ax: Any, tiny: float) -> int:
    """``|x|`` into ``ax``; NOT_FINITE and SUBNORMAL (a nonzero below ``tiny``),
    or'ed (branch-free: the loop vectorises)."""
    not_finite, subnormal = False, False
    for i in range(x.size):
        a = abs(x[i])
        ax[i] = a
        not_finite |= not a <= 1.7976931348623157e308
        subnormal |= (a < tiny) & (a != 0.0)
    return NOT_FINITE * not_finite + SUBNORMAL * subnormal


@_jit
def magnitudes_single(x: Any, ax: Any, tiny: float) -> int:
    """``|x|`` rounded up to float32 into ``ax`` (the nearest float32 where it holds
    ``|x|``, else one or two ulps above): :func:`magnitudes`' flags, and OFF_SINGLE
    where a nonzero ``|x|`` lies outside float32's normal range (branch-free)."""
    not_finite, subnormal, off = False, False, False
    for i in range(x.size):
        a = abs(x[i])
        m = np.float32(a)
        ax[i] = m if np.float64(m) >= a else m * SINGLE_UP
        not_finite |= not a <= 1.7976931348623157e308
        subnormal |= (a < tiny) & (a != 0.0)
        off |= (a != 0.0) & ~((a >= _SINGLE_TINY) & (a <= _SINGLE_MAX))
    return NOT_FINITE * not_finite + SUBNORMAL * subnormal + OFF_SINGLE * off


@_jit
def grid(x: Any, t: int, emin: int, fmax: float, none: int) -> tuple[int, int]:
    """The lowest set bit of the nonzero finite elements (``none`` where there are
    none), and UNREPRESENTABLE where one is off the format's grid or range."""
    bits = x.view(np.uint64)
    lowest, flags = none, 0
    for i in range(x.size):
        a = abs(x[i])
        if a != 0.0 and a <= 1.7976931348623157e308:
            b = bits[i]
            lsb, ex = _lsb(b, np.int64((b >> np.uint64(52)) & np.uint64(0x7FF)))
            lowest = min(lowest, lsb)
            if not (a <= fmax and lsb >= max(ex, emin) - t):
                flags = UNREPRESENTABLE
    return lowest, flags


@_jit
def add_bias(value: Any, S: Any, bias: Any, grown: Any) -> None:
    """The bias along the last axis (rows of ``bias.size``): ``value`` in place,
    ``S`` (float32 or float64) plus ``|bias|`` into float64 ``grown``."""
    nb = bias.size
    for r in range(S.size // nb):
        for j in range(nb):
            i = r * nb + j
            value[i] = value[i] + bias[j]
            grown[i] = np.float64(S[i]) + abs(bias[j])


@_jit
def add_bias_in_place(value: Any, S: Any, bias: Any) -> None:
    """:func:`add_bias` of a float64 ``S`` in place, passed once (as
    :func:`exact_in_place`)."""
    nb = bias.size
    for r in range(S.size // nb):
        for j in range(nb):
            i = r * nb + j
            value[i] = value[i] + bias[j]
            S[i] = S[i] + abs(bias[j])


@_jit
def _radii(s: float, grow: float, tiny_mag: float, tiny_sum: float, det_coef: float,
           prob_coef: float, eta: float, g64: float, fits_acc: float, fits_64: float,
           acc_max: float) -> tuple[float, float, float, float]:
    """One element's grown ``S`` and radii (det, prob, the reference's)."""
    s = s * grow
    s = s + tiny_mag
    d = s * det_coef + eta
    p = s * prob_coef + eta
    r = s * g64 + tiny_sum
    fits = s <= fits_acc
    over = s > acc_max
    d = 0.0 if fits else d
    p = 0.0 if fits else p
    d = np.inf if over else d
    p = np.inf if over else p
    return s, d, p, (0.0 if s <= fits_64 else r)


@_jit
def contraction(S: Any, grow: float, tiny_mag: float, tiny_sum: float, det_coef: float,
                prob_coef: float, eta: float, g64: float, det: Any, prob: Any,
                ref: Any) -> None:
    """float64 ``S`` made an upper bound in place and the radii affine in it, with no
    exact regime and no overflow test (:func:`exact`'s operations without them; ``S``
    passed once, so that the loop vectorises: see :func:`exact_in_place`)."""
    for i in range(S.size):
        s = S[i] * grow
        s = s + tiny_mag
        S[i] = s
        det[i] = s * det_coef + eta
        prob[i] = s * prob_coef + eta
        ref[i] = s * g64 + tiny_sum


@_jit
def propagated(S: Any, grow: float, tiny_mag: float, tiny_sum: float, det_coef: float,
               prob_coef: float, eta: float, g64: float, acc_max: float, prop: Any,
               prop_p: Any, ref_prop: Any, shared: bool, with_ref: bool,
               ref: Any) -> tuple[bool, bool]:
    """:func:`contraction` of operands with radii: ``S + prop`` made an upper bound in
    place, the radii affine in it plus the propagated ``prop`` (``det``, into ``prop``
    in place), ``prop_p`` (``prob``, into ``prop_p`` in place; with ``shared`` the
    propagated term is ``prop``'s, ``prop_p`` only written) and with ``with_ref`` ``ref_prop`` (``ref``, into
    ``ref``). Returns whether some grown ``S`` is not finite, and whether some
    element may overflow (``S`` above ``acc_max``) or has a NaN ``det``."""
    not_finite, unknown = False, False
    for i in range(S.size):
        d_prop = prop[i]
        p_prop = d_prop if shared else prop_p[i]
        s = S[i] + d_prop
        s = s * grow
        s = s + tiny_mag
        S[i] = s
        d = s * det_coef + eta
        d = d + d_prop
        p = s * prob_coef + eta
        p = p + p_prop
        r = s * g64 + tiny_sum
        if with_ref:
            r = r + ref_prop[i]
        prop[i] = d
        prop_p[i] = p
        ref[i] = r
        not_finite |= not s <= 1.7976931348623157e308
        unknown |= (s > acc_max) | (d != d)
    return not_finite, unknown


@_jit
def exact(S: Any, grow: float, tiny_mag: float, tiny_sum: float, det_coef: float,
          prob_coef: float, eta: float, g64: float, fits_acc: float, fits_64: float,
          acc_max: float, grown: Any, det: Any, prob: Any, ref: Any) -> None:
    """``S`` (float32 or float64) made an upper bound in float64 into ``grown`` (``S``
    itself may be it), and the radii affine in it (branch-free: the loop vectorises)."""
    for i in range(S.size):
        s, d, p, r = _radii(np.float64(S[i]), grow, tiny_mag, tiny_sum, det_coef, prob_coef,
                            eta, g64, fits_acc, fits_64, acc_max)
        grown[i] = s
        det[i] = d
        prob[i] = p
        ref[i] = r


@_jit
def exact_in_place(S: Any, grow: float, tiny_mag: float, tiny_sum: float, det_coef: float,
                   prob_coef: float, eta: float, g64: float, fits_acc: float,
                   fits_64: float, acc_max: float, det: Any, prob: Any, ref: Any) -> None:
    """:func:`exact` of a float64 ``S`` grown in place, passed once: given as two
    arguments (``S`` and ``grown``, the same memory) the loop is not vectorised."""
    for i in range(S.size):
        s, d, p, r = _radii(S[i], grow, tiny_mag, tiny_sum, det_coef, prob_coef, eta, g64,
                            fits_acc, fits_64, acc_max)
        S[i] = s
        det[i] = d
        prob[i] = p
        ref[i] = r


@_jit
def exact_stored(value: Any, S: Any, grow: float, tiny_mag: float, tiny_sum: float,
                 det_coef: float, prob_coef: float, eta: float, g64: float, fits_acc: float,
                 fits_64: float, acc_max: float, grown: Any, det: Any, prob: Any, ref: Any,
                 u: float, grow_u: float, tiny: float, fmax: float, t: int, emin: int) -> None:
    """:func:`exact`, and the radii rounded to the output format (``u`` ... ``emin``)
    as :func:`store` rounds them, in the same pass."""
    held = 0
    for i in range(S.size):
        s, d, p, r = _radii(np.float64(S[i]), grow, tiny_mag, tiny_sum, det_coef, prob_coef,
                            eta, g64, fits_acc, fits_64, acc_max)
        grown[i] = s
        d, p, h = _rounded(value[i], r, d, p, u, grow_u, tiny, fmax)
        held += h
        det[i] = d
        prob[i] = p
        ref[i] = r
    if held:
        _store_exact(value, ref, det, prob, u, grow_u, tiny, fmax, t, emin)


@_jit
def _one_more_rounding(v: float, ri: float, di: float, pi: float, u: float, grow: float,
                       tiny: float, fmax: float) -> tuple[float, float, bool]:
    """One element's radii ``di``, ``pi`` after one more rounding, and whether the
    output may overflow (``|v| + ri + di`` reaching ``fmax``)."""
    m = abs(v) + ri
    mu = m * u
    mu = mu + tiny
    return di * grow + mu, pi * grow + mu, m + di >= fmax


@_jit
def _rounded(v: float, ri: float, di: float, pi: float, u: float, grow: float, tiny: float,
             fmax: float) -> tuple[float, float, bool]:
    """:func:`_one_more_rounding`, infinite where the output may overflow; unchanged
    where it is exact (``di`` and ``ri`` 0: said by the flag, for :func:`_store_exact`)."""
    d, p, over = _one_more_rounding(v, ri, di, pi, u, grow, tiny, fmax)
    if over:
        d = np.inf
        p = np.inf
    held = (di == 0.0) & (ri == 0.0)
    return (di if held else d), (pi if held else p), held


@_jit
def store(v: Any, ref: Any, det: Any, prob: Any, u: float, grow: float, tiny: float,
          fmax: float, t: int, emin: int) -> None:
    """One more rounding of the radii (branch-free: the loop vectorises). An exact
    element (``det`` and ``ref`` 0) is left as it is here and rounded by
    :func:`_store_exact` (after the loop, every other ``det`` is positive or NaN)."""
    held = 0
    for i in range(v.size):
        d, p, h = _rounded(v[i], ref[i], det[i], prob[i], u, grow, tiny, fmax)
        held += h
        det[i] = d
        prob[i] = p
    if held:
        _store_exact(v, ref, det, prob, u, grow, tiny, fmax, t, emin)


@_jit
def _store_exact(v: Any, ref: Any, det: Any, prob: Any, u: float, grow: float, tiny: float,
                 fmax: float, t: int, emin: int) -> None:
    """The exact elements :func:`store` left: 0 where the format holds the value,
    else rounded; infinite where the output may overflow."""
    bits = v.view(np.uint64)
    for i in range(v.size):
        if det[i] != 0.0 or ref[i] != 0.0:
            continue
        d, p, over = _one_more_rounding(v[i], 0.0, 0.0, prob[i], u, grow, tiny, fmax)
        m = abs(v[i])
        b = bits[i]
        e_field = np.int64((b >> np.uint64(52)) & np.uint64(0x7FF))
        held = True
        if e_field != 0x7FF and v[i] != 0.0:
            lsb, ex = _lsb(b, e_field)
            held = m <= fmax and lsb >= max(ex, emin) - t
        if held:
            d = 0.0
            p = 0.0
        if over:
            d = np.inf
            p = np.inf
        det[i] = d
        prob[i] = p


@_jit
def larger_counts(hi_sorted: Any, lo: Any, order: Any, out: Any) -> None:
    """Per row, for each ``lo[i]``: how many ``hi_sorted`` exceed it (a tie does
    not), visiting ``lo`` in ascending ``order`` with one merge over the row."""
    rows, n = lo.shape
    for r in range(rows):
        j = 0
        for q in range(n):
            k = order[r, q]
            v = lo[r, k]
            while j < n and hi_sorted[r, j] <= v:
                j += 1
            out[r, k] = n - j


@intrinsic
def _float_bits(typingctx: Any, x: Any) -> Any:
    """The bits of a float64 as a uint64 (a bit cast: no call, no memory)."""
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.IntType(64))
    return types.uint64(types.float64), codegen


@_jit
def _representable(x: float, t: int, emin: int, fmax: float) -> bool:
    """Whether float64 ``x`` is a value of the format (``t``, ``emin``, ``fmax``):
    NaN, the infinities and zeros are; else a multiple of its quantum, within range
    (its lowest set bit, from its bits: :func:`_lsb`, at least ``max(floor(log2 |x|),
    emin) - t``)."""
    a = abs(x)
    if a == 0.0 or not a <= 1.7976931348623157e308:  # a zero, an infinity, NaN
        return True
    if not a <= fmax:
        return False
    b = _float_bits(a)
    lsb, floor_log2 = _lsb(b, (b >> np.uint64(52)) & np.uint64(0x7FF))
    return lsb >= max(floor_log2, emin) - t


@_jit
def add_radii(av: Any, bv: Any, ad: Any, bd: Any, ap: Any, bp: Any, ar: Any, br: Any,
              sign: float, u: float, tiny: float, u64: float, value: Any, ref: Any, det: Any,
              prob: Any, mag: Any) -> None:
    """:func:`~numoracle.oracle.tracked.add` of rows (operands broadcast to the
    output's shape) of ``a`` and ``sign b`` (``sign`` 1 or -1: exact): its value,
    radii and magnitude in one pass, the same float64 operations in the same order
    as its NumPy passes (branch-free: the loop vectorises)."""
    rows, cols = value.shape
    grow = 1.0 + u
    for i in range(rows):
        for j in range(cols):
            x, y = av[i, j], sign * bv[i, j]
            v = x + y
            m = abs(v)
            r = (ar[i, j] + br[i, j]) + u64 * m
            s = m + r
            s = s * u
            s = s + tiny
            value[i, j] = v
            ref[i, j] = r
            det[i, j] = (ad[i, j] + bd[i, j]) * grow + s
            prob[i, j] = (ap[i, j] + bp[i, j]) * grow + s
            mag[i, j] = abs(x) + abs(y)


@_jit
def add_exact(av: Any, bv: Any, ad: Any, bd: Any, ar: Any, br: Any, sign: float, t: int,
              emin: int, fmax: float, value: Any, ref: Any, det: Any, prob: Any) -> None:
    """After :func:`add_radii`: the radii 0 where both operands are exact, the float64
    sum is exact (TwoSum's error term 0) and the format holds it."""
    rows, cols = value.shape
    for i in range(rows):
        for j in range(cols):
            if ad[i, j] != 0.0 or bd[i, j] != 0.0 or ar[i, j] != 0.0 or br[i, j] != 0.0:
                continue
            x, y, v = av[i, j], sign * bv[i, j], value[i, j]
            bb = v - x
            if (x - (v - bb)) + (y - bb) == 0.0 and _representable(v, t, emin, fmax):
                ref[i, j] = 0.0
                det[i, j] = 0.0
                prob[i, j] = 0.0


@_jit
def _maximum(a: float, b: float) -> float:
    """NumPy's ``maximum``: NaN where either is NaN."""
    if a != a or b != b:
        return a + b
    return b if b > a else a


@_jit
def either_radii(v1: Any, v2: Any, d1: Any, d2: Any, p1: Any, p2: Any, r2: Any, m1: Any,
                 m2: Any, grow: float, det: Any, prob: Any, mag: Any) -> bool:
    """:func:`~numoracle.oracle.tracked.either` of rows: the radii covering both
    results and the larger magnitude, in one pass, NaN where the two disagree about
    NaN or an infinity; whether any element did."""
    rows, cols = det.shape
    split_any = False
    for i in range(rows):
        for j in range(cols):
            a, b = v1[i, j], v2[i, j]
            gap = 0.0 if a == b else abs(b - a)
            gap = gap * grow
            gap = gap + r2[i, j]
            d = _maximum(d1[i, j], gap + d2[i, j])
            p = _maximum(p1[i, j], gap + p2[i, j])
            split = ((a != a) != (b != b)) or ((abs(a) == np.inf or abs(b) == np.inf)
                                               and a != b)
            if split:
                d = np.nan
                p = np.nan
                split_any = True
            det[i, j] = d
            prob[i, j] = p
            mag[i, j] = _maximum(m1[i, j], m2[i, j])
    return split_any


@_jit
def any_imprecise(v: Any, det: Any, prob: Any, ref: Any, share: float) -> bool:
    """Whether some finite element's reference radius exceeds ``share`` of the smaller
    kernel radius (a NaN kernel radius: no), as ``ref > share min(det, prob)``
    decides it (``share`` positive: ``share min(d, p)`` is ``min(share d, share p)``,
    which ``ref`` exceeds where it exceeds either), with no branch (the loop
    vectorises)."""
    rows, cols = v.shape
    found = False
    for i in range(rows):
        for j in range(cols):
            r, d, p = ref[i, j], det[i, j], prob[i, j]
            found |= (((r > share * d) | (r > share * p)) & (d == d) & (p == p)
                      & (abs(v[i, j]) <= 1.7976931348623157e308))
    return found


@_jit
def any_special(v: Any, det: Any, ref: Any) -> bool:
    """Whether some element is a special value known exactly (see
    :func:`~numoracle.oracle.traced.library.ieee.special_points`): reach 0 and the
    value 0 or infinite, or a NaN value with a finite reach."""
    rows, cols = v.shape
    for i in range(rows):
        for j in range(cols):
            x, r = v[i, j], det[i, j] + ref[i, j]
            if (r == 0.0 and (x == 0.0 or abs(x) == np.inf)) or (x != x and abs(r) < np.inf):
                return True
    return False


@_jit
def _rmul(x: float, y: float) -> float:
    """``x y`` of magnitudes and radii, 0 where either is 0 (``0 inf = 0``)."""
    return 0.0 if x == 0.0 or y == 0.0 else x * y


@_jit
def _two_product_error(x: float, y: float, p: float) -> float:
    """The rounding error of the float64 product ``p = x y`` (Dekker's TwoProduct,
    Veltkamp's splitting), as :func:`~numoracle.oracle.tracked.two_product_error`."""
    cx = 134217729.0 * x
    x_hi = cx - (cx - x)
    x_lo = x - x_hi
    cy = 134217729.0 * y
    y_hi = cy - (cy - y)
    y_lo = y - y_hi
    return ((x_hi * y_hi - p) + x_hi * y_lo + x_lo * y_hi) + x_lo * y_lo


@_jit
def scalar_radii(tv: Any, td: Any, tp: Any, tr: Any, c: float, divide: bool, k: float,
                 ref_coef: float, scale_coef: float, radius_coef: float, grow: float,
                 tiny: float, value: Any, ref: Any, det: Any, prob: Any, mag: Any) -> None:
    """:func:`~numoracle.oracle.tracked.mul_scalar` of rows (the operand broadcast to
    the output's shape) in one pass, its NumPy passes' operations in their order
    (without its exact test, which runs after on the results)."""
    rows, cols = value.shape
    for i in range(rows):
        for j in range(cols):
            x = tv[i, j]
            v = x / c if divide else x * c
            m = abs(v)
            r = tr[i, j] * k
            r = r + (ref_coef * m + 5e-324)
            s = (abs(x) + tr[i, j]) * scale_coef
            s = s + tiny
            d = td[i, j] * radius_coef
            d = d * grow + s
            p = tp[i, j] * radius_coef
            p = p * grow + s
            value[i, j] = v
            ref[i, j] = r
            det[i, j] = d
            prob[i, j] = p
            mag[i, j] = m


@_jit
def mul_radii(av: Any, bv: Any, ad: Any, bd: Any, ap: Any, bp: Any, ar: Any, br: Any,
              u: float, tiny: float, u64: float, fmax: float, value: Any, ref: Any, det: Any,
              prob: Any, mag: Any) -> None:
    """:func:`~numoracle.oracle.elementwise.mul` of rows (operands broadcast to the
    output's shape) in one pass, its NumPy passes' operations in their order: the
    propagated radii and one rounding, NaN where an operand held as anything meets an
    exact 0, infinite where it may overflow (selections only: the loop vectorises)."""
    rows, cols = value.shape
    grow = 1.0 + u
    for i in range(rows):
        for j in range(cols):
            # written out rather than calling the scalar form (_numba_rows._mul): the call
            # keeps this loop from vectorising (three times slower at 2048 x 2048)
            x, y = av[i, j], bv[i, j]
            xd, yd, xr, yr = ad[i, j], bd[i, j], ar[i, j], br[i, j]
            v = x * y
            m = abs(v)
            ax, ay = abs(x), abs(y)
            d = (_rmul(ax, yd) + _rmul(xd, ay)) + _rmul(xd, yd)
            xp_, yp_ = ap[i, j], bp[i, j]
            p = (_rmul(ax, yp_) + _rmul(xp_, ay)) + _rmul(xp_, yp_)
            r = ((_rmul(ax, yr) + _rmul(xr, ay)) + _rmul(xr, yr)) + u64 * m
            s = ((m + d) + r) * u + tiny
            d = d * grow + s
            p = p * grow + s
            over = (m + d) >= fmax
            wild = (not abs(xd) < np.inf and y == 0.0 and yd == 0.0) or (
                not abs(yd) < np.inf and x == 0.0 and xd == 0.0)
            d = np.nan if wild else d
            p = np.nan if wild else p
            d = np.inf if over else d
            p = np.inf if over else p
            value[i, j] = v
            ref[i, j] = r
            det[i, j] = d
            prob[i, j] = p
            mag[i, j] = m


@_jit
def mul_exact(av: Any, bv: Any, ad: Any, bd: Any, ar: Any, br: Any, t: int, emin: int,
              fmax: float, value: Any, ref: Any, det: Any, prob: Any) -> None:
    """After :func:`mul_radii`: the radii 0 where both operands are exact and the
    product is (TwoProduct's error 0, no underflow, held by the format), unless it
    may overflow (an infinite radius there: exact operands have no other)."""
    rows, cols = value.shape
    for i in range(rows):
        for j in range(cols):
            if ad[i, j] != 0.0 or bd[i, j] != 0.0 or ar[i, j] != 0.0 or br[i, j] != 0.0:
                continue
            x, y, v = av[i, j], bv[i, j], value[i, j]
            if (abs(v) < np.inf and (v != 0.0 or x == 0.0 or y == 0.0)
                    and det[i, j] != np.inf and _two_product_error(x, y, v) == 0.0
                    and _representable(v, t, emin, fmax)):
                ref[i, j] = 0.0
                det[i, j] = 0.0
                prob[i, j] = 0.0


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _binary(op: int, x: float, y: float) -> float:
    """``x + y``, ``x - y``, ``x y`` or ``x / y`` (``op`` 0 to 3), IEEE's results."""
    if op == 0:
        return x + y
    if op == 1:
        return x - y
    if op == 2:
        return x * y
    return x / y


@_jit
def _corners(v: float, r: float) -> tuple[float, float]:
    """The ends of ``[v - r, v + r]`` (``r`` 0 where not finite or ``v`` is NaN), a
    zero end with the sign that keeps it inside, as ieee's ``_corners``."""
    if not (abs(r) < np.inf) or v != v:
        r = 0.0
    lo = v if r == 0.0 else v - r
    hi = v if r == 0.0 else v + r
    return (-0.0 if lo == 0.0 else lo), (0.0 if hi == 0.0 else hi)


@_jit
def _special(v: float, r: float) -> bool:
    return (r == 0.0 and (v == 0.0 or abs(v) == np.inf)) or (v != v and abs(r) < np.inf)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _decided(op: int, x: float, rx: float, y: float, ry: float,
             b_no_pole: bool) -> tuple[bool, float]:
    """Whether the operands decide the element exactly (one of them a special value
    known exactly, every corner of their intervals giving the same 0, infinity or
    NaN, ``b`` holding no pole inside with ``b_no_pole``), and that value."""
    if not (_special(x, rx) or _special(y, ry)):
        return False, 0.0
    ok = abs(rx) < np.inf and abs(ry) < np.inf
    xl, xh = _corners(x, rx)
    yl, yh = _corners(y, ry)
    if b_no_pole and yl < 0.0 and yh > 0.0:
        ok = False
    first = _binary(op, xl, yl)
    for k in range(3):  # the other corners: (xl, yh), (xh, yl), (xh, yh)
        other = _binary(op, xl if k == 0 else xh, yl if k == 1 else yh)
        ok = ok and (first == other or (first != first and other != other))
    ok = ok and (first == 0.0 or not abs(first) < np.inf)
    return ok, (0.0 if first == 0.0 else first)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def carry_count(op: int, av: Any, ar: Any, bv: Any, br: Any, b_no_pole: bool) -> int:
    """How many elements of rows of a binary operation the operands decide exactly
    (:func:`_decided`)."""
    rows, cols = av.shape
    decided = 0
    for i in range(rows):
        for j in range(cols):
            decided += _decided(op, av[i, j], ar[i, j], bv[i, j], br[i, j], b_no_pole)[0]
    return decided


@numba.njit(cache=True, nogil=True, error_model="numpy")
def carry_binary(op: int, av: Any, ar: Any, bv: Any, br: Any, b_no_pole: bool, value: Any,
                 det: Any, prob: Any, ref: Any, mag: Any) -> None:
    """ieee's ``carry`` of a binary operation of rows, in place on copies of its
    result (``value`` ... ``mag``): each element the operands decide exactly
    (:func:`_decided`) set to that value with radius 0."""
    rows, cols = value.shape
    for i in range(rows):
        for j in range(cols):
            ok, v = _decided(op, av[i, j], ar[i, j], bv[i, j], br[i, j], b_no_pole)
            if ok:
                value[i, j] = v
                det[i, j] = 0.0
                prob[i, j] = 0.0
                ref[i, j] = 0.0
                mag[i, j] = 0.0 if v != v else abs(v)


@_jit
def elementary_radii(v: Any, value: Any, lip: Any, td: Any, tp: Any, tr: Any, scale: Any,
                     zero: Any, shared: bool, has_ref: bool, has_scale: bool, has_zero: bool,
                     ulps: float, per_x: float, of_one: float, u: float, tiny: float,
                     ref_unit: float, acc_max: float, det: Any, prob: Any, ref: Any,
                     mag: Any) -> None:
    """:func:`~numoracle.oracle.elementwise.elementary`'s radii of rows from the
    function's values and Lipschitz bounds, in one pass, its NumPy passes'
    operations in their order: the propagated radii, the evaluation error (relative
    to ``scale``, else ``|value|``), ``|value|`` more where ``zero`` (``has_zero``),
    infinite where the result may overflow."""
    rows, cols = value.shape
    for i in range(rows):
        for j in range(cols):
            L, a_d, a_p, a_r = lip[i, j], td[i, j], tp[i, j], tr[i, j]
            va = abs(value[i, j])
            d = _rmul(L, a_d)
            p = d if shared else _rmul(L, a_p)
            r = ref_unit * va
            if has_ref:
                r = _rmul(L, a_r) + r
            reach = a_d + a_r if has_ref else a_d
            base = scale[i, j] if has_scale else va
            k = ulps + per_x * (abs(v[i, j]) + reach) if per_x != 0.0 else ulps
            e = ((2.0 * k) * u) * ((base + d) + r) + k * tiny
            if of_one != 0.0:
                e = e + (2.0 * u) * of_one
            d = d + e
            p = p + e
            if has_zero and zero[i, j]:
                d = d + va
                p = p + va
            if (va + d) >= acc_max:
                d = np.inf
                p = np.inf
            det[i, j] = d
            prob[i, j] = p
            ref[i, j] = r
            mag[i, j] = va
