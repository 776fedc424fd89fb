"""``exp`` and ``expm1`` in float64 arithmetic alone, for numba's loops: no call to
the C library, no table, no branch, so that a loop calling them vectorises (the C
library's ``exp`` is a scalar call, several times the cost of the arithmetic).
Imported only where numba is installed.

:func:`exp` is within :data:`EXP_REL` of ``e^x`` relative (about 1.1 float64
ulps), plus ``2^-1075`` absolute where the result is subnormal, over the whole
float64 domain; ``exp(-inf) = 0``, ``exp(+inf) = inf``, NaN gives NaN, and
arguments past the overflow threshold give ``inf``, past the underflow one ``0``.
:func:`expm1_up` is at least ``e^a - 1`` for ``a >= 0`` and within :data:`EXPM1_REL`
above it.

The proof (``u = 2^-53``; every operation round-to-nearest, none contracted into
a fused multiply-add: numba's default):

1. Reduction. ``x`` is clamped to ``[-746, 710]`` (``e^-746 < 2^-1075`` rounds to
   0; ``e^710`` overflows: the clamp changes no result). ``k = RN(x / ln 2)`` by
   the shifter ``1.5 * 2^52``, ``|k| <= 1077``. ``k * LN2_HI`` is exact
   (``LN2_HI`` has 32 significant bits, ``k`` 11), and so is ``x - k LN2_HI``
   (Sterbenz: for ``k != 0`` the two are within a factor 2 of each other, as
   ``|x - k ln 2| <= 0.3466 <= |k ln 2| / 2``). ``r = (x - k LN2_HI) - k LN2_LO``
   rounds twice: ``|k LN2_LO| <= 2.1e-7``, its rounding ``<= 2.3e-23``; the
   subtraction's ``<= u |r|``; ``|ln 2 - (LN2_HI + LN2_LO)| <= 2^-86`` adds
   ``1.4e-23``. So ``r = x - k ln 2 + d`` with ``|r| <= 0.34658`` and
   ``|d| <= 0.3466 u + 4e-23``: a relative error ``e^d - 1 <= 0.3467 u`` in the
   result.
2. ``e^r`` by its Taylor polynomial of degree 13, ``1 + (r + r^2 Q(r))``: the
   truncation is at most ``e^0.3466 0.3466^14 / 14! < 0.08 u`` of ``e^r``. ``Q``
   by Horner from ``RN(1/13!)``: each step ``q_j = RN(c_j + RN(r q_{j+1}))`` adds
   at most ``u (|c_j| + |r q_{j+1}|) + u |r q_{j+1}|`` (coefficient, sum, product)
   to ``|r|`` times the error before it; from ``j = 13`` down to ``2`` that sums
   to at most ``1.27 u`` absolute (``|Q| <= 0.561``). ``t = RN(r^2)`` (relative
   ``u``), ``w = RN(t q)``: ``|w| <= 0.0674``, its error at most
   ``0.1202 (1.27 u + 0.561 u) + 0.0674 u <= 0.29 u``; ``s = RN(r + w)``:
   ``|s| <= e^0.3466 - 1 = 0.4142``, its error at most ``0.29 u + 0.4142 u``;
   ``p = RN(1 + s)`` adds half an ulp of ``p``: ``u`` relative. For ``r >= 0``
   (``p >= 1``) that is ``0.71 u + u`` relative; for ``r < 0`` (``|s| <= 0.293``,
   ``p >= 0.7071``, half an ulp ``u / 2``) ``(0.29 u + 0.293 u) / 0.7071 + 0.71 u``
   (``= 1.53 u``). With steps 1 and 2: at most ``1.71 u + 0.35 u + 0.08 u`` and
   the products of the small terms: :data:`EXP_REL` ``= 2.2 u``.
3. Scaling by ``2^k`` as ``(p 2^k1) 2^k2`` (``k1 = floor(k/2)``, ``k2 = k - k1``,
   each a normal power of 2): ``p 2^k1`` is exact and normal, the second product
   rounds once, exactly where ``p 2^k`` is not a normal number: a subnormal result
   gains at most ``2^-1075``, an overflowing one is ``inf`` (``2^1024`` never
   formed).

:func:`expm1_up` for ``a >= 0``: below ``0.3466`` the same polynomial without
its 1, ``a + a^2 Q(a)``, all terms positive (relative errors: ``Q`` ``2.3 u``,
``a^2 Q`` ``4.4 u``, of a term at most ``0.164`` of the sum, so ``0.73 u``, and
the sum's ``u``: ``1.8 u`` with the truncation); above, ``exp(a) - 1``, whose
``2.2 u`` grow by ``e^a / (e^a - 1) <= 3.42`` and the subtraction's ``u``:
``8.6 u``. The result is multiplied by ``1 + 2^-48`` (``> 1 + 8.6 u + u``, that
product's rounding), so that it is an upper bound: :data:`EXPM1_REL` ``= 2^-47``
above ``e^a - 1`` at most.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from ._numba_loops import _float_bits

__all__ = ["exp", "expm1_up", "expm1_up_small", "exp_into", "expm1_up_into", "EXP_REL",
           "EXPM1_REL", "EXPM1_SMALL"]

_U = 2.0**-53
#: the largest error of :func:`exp` relative to ``e^x`` (module docstring), where the
#: result is normal
EXP_REL = 2.2 * _U
#: how far above ``e^a - 1`` :func:`expm1_up` may be, relative
EXPM1_REL = 2.0**-47

_INV_LN2 = 1.4426950408889634
#: ``ln 2`` split: 32 significant bits (fdlibm's ``ln2_hi``), the rest rounded
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_SHIFTER = 6755399441055744.0  # 1.5 * 2^52: x + it - it rounds x to an integer
_BIAS = 4503599627371519.0  # 2^52 + 1023: the exponent field of 2^j in the low bits
_C = [1.0 / math.factorial(j) for j in range(14)]  # RN(1 / j!)
_C2, _C3, _C4, _C5, _C6, _C7 = _C[2], _C[3], _C[4], _C[5], _C[6], _C[7]
_C8, _C9, _C10, _C11, _C12, _C13 = _C[8], _C[9], _C[10], _C[11], _C[12], _C[13]
_UP = 1.0 + 2.0**-48
_SMALL = 0.3466
#: the arguments below which :func:`expm1_up` is its polynomial (:func:`expm1_up_small`)
EXPM1_SMALL = _SMALL

_inline = numba.njit(cache=True, nogil=True, inline="always")
_jit = numba.njit(cache=True, nogil=True)


@intrinsic
def _from_bits(typingctx: Any, b: Any) -> Any:
    """The float64 of a uint64's bits (a bit cast: :func:`_float_bits` undone)."""
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.uint64), codegen


@_inline
def _pow2(j: float) -> float:
    """``2^j`` for an integral float ``j`` in ``[-1022, 1023]``, from its bits."""
    return _from_bits(_float_bits(j + _BIAS) << np.uint64(52))


@_inline
def _q(r: float) -> float:
    """``Q(r) = (e^r - 1 - r) / r^2`` by its Taylor polynomial (degree 11, Horner)."""
    q = _C13
    q = _C12 + r * q
    q = _C11 + r * q
    q = _C10 + r * q
    q = _C9 + r * q
    q = _C8 + r * q
    q = _C7 + r * q
    q = _C6 + r * q
    q = _C5 + r * q
    q = _C4 + r * q
    q = _C3 + r * q
    return _C2 + r * q


@_inline
def exp(x: float) -> float:
    """``e^x`` within :data:`EXP_REL` relative (``2^-1075`` more where subnormal)."""
    xc = x if x > -746.0 else -746.0  # (NaN too: its result chosen last)
    xc = xc if xc < 710.0 else 710.0
    k = (xc * _INV_LN2 + _SHIFTER) - _SHIFTER
    r = (xc - k * _LN2_HI) - k * _LN2_LO
    p = 1.0 + (r + (r * r) * _q(r))
    k1 = np.floor(k * 0.5)
    y = (p * _pow2(k1)) * _pow2(k - k1)
    return y if x == x else x


@_inline
def expm1_up_small(a: float) -> float:
    """:func:`expm1_up` of an ``a`` in ``[0, EXPM1_SMALL)`` (its bits: the polynomial
    alone, without the exponential of the larger arguments)."""
    return (a + (a * a) * _q(a)) * _UP


@_inline
def expm1_up(a: float) -> float:
    """An upper bound of ``e^a - 1`` for ``a >= 0`` (NaN for NaN), at most
    :data:`EXPM1_REL` above it."""
    small = expm1_up_small(a)  # (both computed, then chosen: a loop calling it vectorises)
    large = (exp(a) - 1.0) * _UP
    return small if a < _SMALL else large


@_jit
def exp_into(x: Any, out: Any) -> None:
    """:func:`exp` of a vector (a loop that vectorises)."""
    for i in range(x.size):
        out[i] = exp(x[i])


@_jit
def expm1_up_into(x: Any, out: Any) -> None:
    """:func:`expm1_up` of a vector."""
    for i in range(x.size):
        out[i] = expm1_up(x[i])
