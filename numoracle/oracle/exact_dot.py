"""Error-free float64 contractions by slicing (the Ozaki scheme), with a proven bound.

:func:`exact_matmul` computes ``a @ b (+ bias)`` of float64 arrays as a
double-double ``hi + lo`` and a componentwise bound ``err`` on
``|hi + lo - exact|``, with GEMMs only (NumPy on the host, CuPy on a GPU: the
array namespace of the operands): no per-element Python.

Method. Each row ``i`` of ``a`` (each column ``j`` of ``b``) is split into
slices ``a = sum_p 2^{s_p,i} M_p + R`` where ``M_p`` holds integers of at most
``beta`` bits (``|M_p| <= 2^(beta-1)``), taken from the top of what is left of the
row (the scale ``2^{s_p,i}`` follows the largest remaining element, so a gap
in a row's exponents costs no slice), at most ``ceil(TARGET_BITS / beta)``
slices per side. The contraction length ``k`` fixes ``beta`` so that
``k 2^(2 beta - 2) <= 2^53``: every partial sum of ``M_p @ N_r`` is an integer
below ``2^53``, so the GEMM is exact **in any order** (with or without FMA,
blocked or not). Scaling a slice product by ``2^(s_p,i + t_r,j)`` is exact
unless it underflows (at most ``2^-1074`` each).

Bound. With ``N`` exact terms ``t`` (slice products and the bias) summed by
TwoSum into ``hi`` and the errors into ``lo`` (Ogita, Rump & Oishi 2005,
Sum2), ``|hi + lo - sum t| <= gamma_N(u)^2 sum |t|``, ``u = 2^-53``. What the
slices leave, ``a b - a_s b_s = R_a b + a_s R_b``, is bounded by the GEMMs
``|R_a| |b| + |a_s| |R_b|`` rounded up. So::

    err = gamma_N^2 (1 + gamma_N) T + N 2^-1074 + (1 + gamma_(k+2)) E_rem + 2k 2^-1074

with ``T`` the float64 sum of ``|t|`` and ``E_rem`` the remainder GEMMs (0 and
skipped when the slices took every bit). Where this exceeds the error wanted
(``tol``; a row whose elements span more binades than the slices took), the
element is summed exactly in Python integers instead (every float64 is
``m 2^e``), within a budget of products. Elements whose row of ``a`` or column
of ``b`` holds a NaN or an infinity get ``hi = NaN``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .xp import array_module as _xp
from .xp import filled, like

__all__ = ["exact_matmul", "slice_bits"]

U = 2.0**-53
TINY = 2.0**-1074
#: bits a float64 operand is sliced into at most, per side, below each row's
#: (column's) largest element, before the rest is bounded instead: the bound is
#: then about ``2^-66 (max_k |a_ik|) sum_k |b_kj|``, below ``2^-60 S`` for rows
#: whose largest element is within 2^6 of their mean magnitude, and 2^-60 S is
#: under 1% of the tightest float64 kernel bound (``gamma_1(2^-53) S``)
TARGET_BITS = 66


def slice_bits(k: int) -> int:
    """Bits per slice for a contraction of length ``k``: the largest ``beta``
    with ``k 2^(2 beta - 2) <= 2^53`` (every slice GEMM is then exact)."""
    if k < 1:
        return 26
    return (55 - math.ceil(math.log2(k))) // 2


def _gamma(n: int) -> float:
    nu = n * U
    return nu / (1.0 - nu) * (1.0 + 2.0 * U)  # rounded up


def _slices(x: Any, axis: int, beta: int, max_slices: int, xp: Any) -> tuple[list, Any]:
    """Integer slices ``M_p`` (float64 holding integers, ``|M_p| <= 2^(beta-1)``)
    and their exponents ``s_p`` (keepdims along ``axis``), with ``x = sum_p
    ldexp(M_p, s_p) + R`` exactly; returns the list and ``R``."""
    rest = x
    out = []
    for _ in range(max_slices):
        mu = xp.max(xp.abs(rest), axis=axis, keepdims=True)
        if not bool(xp.any(mu)):
            break
        _, e = xp.frexp(mu)  # mu < 2^e
        s = xp.maximum(e.astype(xp.int32) - (beta - 1), -1074)
        s = xp.where(mu == 0, -1074, s).astype(xp.int32)
        # |r| < 2^(beta-1); elements far below the largest may underflow here,
        # but then their nearest integer is 0 all the same
        m = xp.rint(xp.ldexp(rest, -s))
        # exact: m 2^s is an integer of beta bits on the grid 2^-1074, and what
        # rest loses by rounding to the grid 2^s is representable
        rest = rest - xp.ldexp(m, s)
        out.append((m, s))
    return out, rest


#: an element whose slice bound exceeds this share of its terms' magnitude
#: (a row whose elements span far more binades than the slices took) ...
LOOSE = 2.0**-60
#: ... is summed exactly in integers, up to this many (element x term) products
#: per call; beyond it the slice bound stands (sound, looser)
FALLBACK_TERMS = 1 << 21


def _exact_elements(a: Any, b: Any, bias: Any, mask: Any, hi: Any, lo: Any, err: Any,
                    xp: Any) -> None:
    """Overwrite ``hi``, ``lo``, ``err`` where ``mask``: the exact sum of the
    products in Python integers (every float64 is ``m 2^e``, ``m`` an integer),
    rounded to a double-double (``hi`` correctly rounded, ``lo`` the rest
    correctly rounded: error at most ``u |lo| + 2^-1074``)."""
    idx = np.argwhere(xp.asnumpy(mask) if xp is not np else mask)
    k = a.shape[-1]
    if len(idx) * k > FALLBACK_TERMS:
        return
    ah = xp.asnumpy(a) if xp is not np else a
    bh = xp.asnumpy(b) if xp is not np else b
    shape = mask.shape
    ab = np.broadcast_to(ah, shape[:-2] + ah.shape[-2:])
    bb = np.broadcast_to(bh, shape[:-2] + bh.shape[-2:])
    cb = None if bias is None else np.broadcast_to(
        xp.asnumpy(bias) if xp is not np else bias, shape)
    vals = np.empty((len(idx), 3))
    for row, ix in enumerate(map(tuple, idx)):
        lead, i, j = ix[:-2], ix[-2], ix[-1]
        terms = [(_int_of(x), _int_of(y)) for x, y in zip(ab[lead + (i,)].tolist(),
                                                          bb[lead + (slice(None), j)].tolist(),
                                                          strict=True)]
        prods = [(ma * mb, ea + eb) for (ma, ea), (mb, eb) in terms if ma and mb]
        if cb is not None:
            prods.append(_int_of(float(cb[ix])))
        e0 = min((e for m, e in prods if m), default=0)
        total = sum(m << (e - e0) for m, e in prods)
        h = _to_float(total, e0)
        if not math.isfinite(h):  # beyond float64's range: the caller keeps float64
            vals[row] = h, 0.0, math.inf
            continue
        rest = total - _int_at(h, e0)
        r = _to_float(rest, e0)
        vals[row] = h, r, abs(r) * U + TINY
    for col, arr in enumerate((hi, lo, err)):
        arr[tuple(like(idx.T, arr))] = like(vals[:, col], arr)


def _int_of(x: float) -> tuple[int, int]:
    """``x = m 2^e`` with integers ``m`` and ``e``."""
    num, den = float(x).as_integer_ratio()
    return num, -(den.bit_length() - 1)


def _int_at(x: float, e0: int) -> int:
    """``x / 2^e0`` as an integer (``x`` a float on the grid ``2^e0``)."""
    m, e = _int_of(x)
    return m << (e - e0) if e >= e0 else m >> (e0 - e)


def _to_float(total: int, e0: int) -> float:
    """``total 2^e0`` correctly rounded to float64."""
    from fractions import Fraction  # noqa: PLC0415 - rare path

    try:
        return float(total << e0) if e0 >= 0 else float(Fraction(total, 1 << -e0))
    except OverflowError:
        return math.inf if total > 0 else -math.inf


def _two_sum(a: Any, b: Any) -> tuple[Any, Any]:
    """Knuth's TwoSum: ``s + err = a + b`` exactly, ``s = fl(a + b)`` (three
    temporaries, the rest in place)."""
    s = a + b
    bb = s - a
    err = s - bb
    xp = _xp(err)
    xp.subtract(a, err, out=err)  # a - (s - bb)
    xp.subtract(b, bb, out=bb)  # b - bb
    err += bb
    return s, err


def exact_matmul(a: Any, b: Any, bias: Any = None, *, tol: Any = None,
                 target_bits: int = TARGET_BITS) -> tuple[Any, Any, Any]:
    """``a @ b (+ bias)`` as a double-double with a bound on its error.

    Parameters
    ----------
    a, b : array
        float64, ``(..., m, k)`` and ``(..., k, n)`` (NumPy or CuPy; batch
        dimensions broadcast as in ``matmul``).
    bias : array, optional
        Added exactly; broadcastable to the output.
    tol : float or array, optional
        The error wanted per element (broadcastable to the output); where the
        slice bound exceeds it, the element is summed exactly in integers
        (within a budget of products). Default: ``2^-60`` times the magnitude
        of the element's terms.
    target_bits : int
        Bits below each row's (column's) largest element the slices take before
        the rest is bounded rather than multiplied.

    Returns
    -------
    hi, lo, err : array
        ``|hi + lo - exact| <= err`` elementwise (see the module docstring);
        ``hi`` is NaN where a row of ``a`` or a column of ``b`` is not finite, and
        not finite where a slice product overflows.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.array([[1.0, 1e-30, -1.0]])
    >>> b = np.array([[1.0], [1.0], [1.0]])
    >>> hi, lo, err = exact_matmul(a, b)
    >>> float(hi[0, 0]), float(err[0, 0]) < 1e-60
    (1e-30, True)
    """
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        return _exact_matmul(a, b, bias, tol, target_bits)


def _exact_matmul(a: Any, b: Any, bias: Any, tol: Any, target_bits: int) -> tuple[Any, Any, Any]:
    xp = _xp(a)
    a = xp.asarray(a, dtype=xp.float64)
    b = xp.asarray(b, dtype=xp.float64)
    k = a.shape[-1]
    beta = slice_bits(k)
    max_slices = max(1, -(-target_bits // beta))
    fa, fb = xp.isfinite(a), xp.isfinite(b)
    bad_a, bad_b = not bool(fa.all()), not bool(fb.all())
    if bad_a:
        a = xp.where(fa, a, 0.0)
    if bad_b:
        b = xp.where(fb, b, 0.0)
    sa, ra = _slices(a, -1, beta, max_slices, xp)
    sb, rb = _slices(b, -2, beta, max_slices, xp)
    shape = np.broadcast_shapes(a.shape[:-1] + (1,), b.shape[:-2] + (1, b.shape[-1]))
    hi = filled(xp, shape, 0.0, a)  # (on the operands' device: torch's namespace
    lo = filled(xp, shape, 0.0, a)  # makes arrays on its default device otherwise)
    mag = filled(xp, shape, 0.0, a)
    n_terms = 0
    if bias is not None:
        hi = hi + like(xp.asarray(bias, dtype=xp.float64), a)
        mag += xp.abs(hi)
        n_terms = 1
    for ma, ea in sa:
        for mb, eb in sb:
            t = ma @ mb  # exact GEMM
            xp.ldexp(t, ea + eb, out=t)  # exact unless it underflows
            hi, e = _two_sum(hi, t)
            lo += e
            del e
            xp.abs(t, out=t)
            mag += t
            del t
            n_terms += 1
    hi, lo = _two_sum(hi, lo)
    g = _gamma(max(n_terms, 1))
    err = mag * (g * g * (1.0 + g))
    err += n_terms * TINY
    if bool(xp.any(ra)) or bool(xp.any(rb)):
        abs_ra, abs_rb = xp.abs(ra), xp.abs(rb)
        rem = abs_ra @ xp.abs(b) + xp.abs(a - ra) @ abs_rb
        rem *= 1.0 + _gamma(k + 2)  # two GEMMs of k terms, then their sum
        rem += 2 * k * TINY
        err += rem
        # what the slices left is not small beside the terms: exact integers there
        loose = err > (LOOSE * (mag + rem) if tol is None else tol)
        if bool(xp.any(loose)):
            _exact_elements(a, b, bias, loose, hi, lo, err, xp)
    if bad_a or bad_b:
        bad = (~fa).any(axis=-1)[..., :, None] | (~fb).any(axis=-2)[..., None, :]
        hi = xp.where(bad, xp.nan, hi)
    return hi, lo, err
