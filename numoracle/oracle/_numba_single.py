"""The loops of :mod:`~numoracle.oracle.single_products`, compiled by numba (imported
only where numba is installed and not switched off, through
:func:`~numoracle.oracle.fused_cpu.available`): the range of a nonnegative array, and
its elements scaled by a power of two and rounded up to float32."""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from .formats import SINGLE_UP

_jit = numba.njit(cache=True, nogil=True)


@_jit
def nonnegative_range(x: Any) -> tuple[float, float, bool]:
    """The smallest nonzero element (``inf`` where there is none), the largest, and
    whether some element is not a finite number ``>= 0`` (NaN, an infinity, a
    negative number), of a 1-D array (float64 or float32)."""
    lo, hi, bad = np.inf, 0.0, False
    for i in range(x.size):
        a = np.float64(x[i])
        bad |= not (a >= 0.0 and a <= 1.7976931348623157e308)
        hi = max(hi, a)
        lo = min(lo, a if a != 0.0 else np.inf)
    return lo, hi, bad


@_jit
def nonnegative_range_bits(x: Any) -> tuple[int, int, bool]:
    """:func:`nonnegative_range` of a float64 array from its bits (``x`` viewed as
    int64: a finite ``+0.0`` or positive number's bits are a nonnegative integer
    ordered as the number; an infinity, a NaN or a negative number's (``-0.0``
    too) lie outside ``[0, 0x7ff0000000000000)``): the smallest nonzero and the
    largest element's bits (``0x7ff0000000000000``, inf's, where none is nonzero),
    branch-free integer minima and maxima that vectorise."""
    top = np.int64(0x7FF0000000000000)
    lo, hi, bad = top, np.int64(0), False
    for i in range(x.size):
        b = x[i]
        bad |= (b < 0) | (b >= top)
        hi = max(hi, b)
        lo = min(lo, b if b != 0 else top)
    return lo, hi, bad


@_jit
def scaled_single(x: Any, scale: float, out: Any) -> None:
    """``x scale`` (``scale`` a power of two: exact) rounded up to float32 into ``out``:
    the nearest float32 where it holds the product, else one or two ulps above (the
    rounding of :func:`~numoracle.oracle._numba_loops.magnitudes_single`; every
    nonzero product within float32's normal range, as the caller ensures)."""
    for i in range(x.size):
        a = x[i] * scale
        m = np.float32(a)
        out[i] = m if np.float64(m) >= a else m * SINGLE_UP


@_jit
def widened(x: Any, scale: float, out: Any) -> None:
    """``x`` (float32) in float64 times ``scale``, into ``out`` (NumPy's ``astype``
    and ``*=``: one rounding, the product's)."""
    for i in range(x.size):
        out[i] = np.float64(x[i]) * scale
