"""Per-element ratios ``err / bound`` and what a verdict reads of them.

:func:`ratios` is the ratio of each element (0 where both are 0, Inf where only
the bound is, 0 (unjudged) where the bound is NaN); :func:`nonfinite_parts`
finds NaN and Inf placed where the reference has none; :func:`max_median` the
largest ratio and the median; :func:`rows` the pieces, whole rows along the
first axis, in which :func:`~numoracle.checking.verdict.compare` judges an
output too large to judge at once.

On a GPU a large output's median is found without a sorted copy (CuPy sorts a
whole copy of the array for it, twice the array's memory with the sort's own):
the k-th smallest value is found by bisection over the order of float64 bit
patterns, each step a count of the elements at or below a threshold
(:func:`kth_smallest`), the same value a sort gives.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..oracle.xp import array_module

__all__ = ["ratios", "nonfinite_parts", "sentence", "max_median", "kth_smallest", "rows",
           "part", "SORT_MAX", "SELECT_LEAST"]

#: outputs up to this many elements get their median and maximum from one sort
#: on the host (NumPy's median costs tens of microseconds however small the array)
SORT_MAX = 1 << 12
#: arrays of more elements than this get their median by :func:`kth_smallest` (no
#: sorted copy), not by the namespace's median
SELECT_LEAST = 1 << 24


def ratios(err: Any, bound: Any) -> Any:
    """``err / bound``; 0 where both are 0, Inf where only the bound is; 0
    (unjudged) where the bound is NaN, or Inf against a finite error."""
    xp = array_module(err)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = err / bound
    if bound.size and float(xp.min(bound)) > 0.0 and float(xp.max(bound)) < np.inf:
        return r  # every bound positive and finite (NaN fails both tests): nothing to mend
    r = xp.where(bound == 0, xp.where(err == 0, 0.0, xp.inf), r)
    unjudged = xp.isnan(bound) | (xp.isinf(bound) & xp.isfinite(err))
    return xp.where(unjudged, 0.0, r)


#: what each misplaced non-finite value is called, in the order a verdict names them
_WHAT = ("NaN where the reference is not NaN", "a number where the reference is NaN",
         "Inf where the reference is finite", "not the reference's Inf")


def nonfinite_parts(got: Any, ref: Any, bound: Any, nan_may_spread: bool = False
                    ) -> tuple[Any, list[tuple[str, int, tuple[int, ...]]]]:
    """Elements whose NaN/Inf placement is wrong, and, per kind found, (what, how
    many, the first's index).

    A bound of Inf (the kernel may overflow) lets a NaN or an Inf stand where the
    reference is finite; a NaN bound (the model allows either of two results)
    leaves the element unjudged; ``nan_may_spread`` (a model's ``nan_spreads``,
    in a case with non-finite inputs) lets a NaN stand anywhere."""
    xp = array_module(got)
    ref_nan, got_nan = xp.isnan(ref), xp.isnan(got)
    ref_inf, got_inf = xp.isinf(ref), xp.isinf(got)
    may_overflow = xp.isinf(bound)  # inf - inf = NaN is legitimate after an overflow
    judged = ~xp.isnan(bound)
    nan_bad = got_nan & ~ref_nan & ~may_overflow & judged
    if nan_may_spread:
        nan_bad &= False
    nan_missing = ref_nan & ~got_nan & judged
    inf_bad = got_inf & ~ref_inf & ~ref_nan & ~may_overflow & judged
    inf_wrong = ref_inf & ~(got == ref) & ~may_overflow & judged
    bad = nan_bad | nan_missing | inf_bad | inf_wrong
    if not bool(bad.any()):
        return bad, []
    parts = []
    for mask, what in zip((nan_bad, nan_missing, inf_bad, inf_wrong), _WHAT, strict=True):
        if bool(mask.any()):
            first = tuple(int(i) for i in xp.argwhere(mask)[0])
            parts.append((what, int(mask.sum()), first))
    return bad, parts


def sentence(parts: list[tuple[str, int, tuple[int, ...]]]) -> str | None:
    """The verdict's sentence of :func:`nonfinite_parts`' kinds (None: none)."""
    if not parts:
        return None
    return "; ".join(f"{what} at {count} element(s), first at {first}"
                     for what, count, first in parts)


def max_median(xp: Any, r: Any) -> tuple[float, float]:
    """``(max(r), median(r))`` as ``xp.max`` and ``xp.median`` give them (NaN
    if ``r`` holds one; the mean of the two middle values for an even count),
    ``(0, 0)`` for an empty ``r``."""
    if not r.size:
        return 0.0, 0.0
    if xp is np and r.size <= SORT_MAX:
        s = np.sort(r, axis=None)  # NaN sorts last
        n = s.size
        top = float(s[-1])
        if top != top:
            return top, top
        mid = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
        return top, float(mid)
    if r.size <= SELECT_LEAST:
        return float(xp.max(r)), float(xp.median(r))
    top = float(xp.max(r))
    if top != top:
        return top, top
    n = int(r.size)
    upper = kth_smallest(xp, r, n // 2)
    if n % 2:
        return top, upper
    lower = kth_smallest(xp, r, n // 2 - 1)
    return top, float((np.float64(lower) + np.float64(upper)) / 2)


def _key(x: float) -> int:
    """An integer in the order of the float64 ``x`` (-0.0 just below 0.0)."""
    bits = struct.unpack("<q", struct.pack("<d", x))[0]
    return bits if bits >= 0 else -(bits & 0x7FFF_FFFF_FFFF_FFFF) - 1


def _value(key: int) -> float:
    """The float64 of :func:`_key`'s ``key``."""
    bits = key if key >= 0 else (-key - 1) | -0x8000_0000_0000_0000
    return float(struct.unpack("<d", struct.pack("<q", bits))[0])


def kth_smallest(xp: Any, r: Any, k: int) -> float:
    """The ``k``-th smallest element of ``r`` (0-based; ``r`` without NaN), as a full
    sort would place it: the least float64 ``t`` (in bit-pattern order) with more than
    ``k`` elements at or below it, found by bisection, each step one count of ``r <= t``
    (no copy of ``r``, at most 64 steps)."""
    lo, hi = _key(float(xp.min(r))), _key(float(xp.max(r)))
    while lo < hi:
        mid = (lo + hi) // 2
        if int(xp.count_nonzero(r <= _value(mid))) > k:
            hi = mid
        else:
            lo = mid + 1
    return _value(lo)


def rows(shape: tuple[int, ...], piece: int) -> Iterator[tuple[int, int]]:
    """Ranges ``[i0, i1)`` of whole rows along the first axis of ``shape``, each of at
    most ``piece`` elements (a row more than that alone)."""
    per_row = int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1
    step = max(1, piece // max(per_row, 1))
    for i0 in range(0, shape[0], step):
        yield i0, min(shape[0], i0 + step)


def part(a: Any, shape: tuple[int, ...], i0: int, i1: int) -> Any:
    """Rows ``i0:i1`` of ``a``, an array broadcastable to ``shape``: sliced where it
    has that first axis, whole where it broadcasts along it."""
    if getattr(a, "ndim", 0) == len(shape) and shape and a.shape[0] == shape[0] != 1:
        return a[i0:i1]
    return a
