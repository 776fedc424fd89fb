"""Upper bounds of the radii a contraction propagates, from float32 GEMMs.

A contraction whose operand carries a radius adds the products ``|a| @ r_b`` and
``r_a @ |b|`` of nonnegative matrices to its radii
(:func:`~numoracle.oracle.tracked.matmul`): GEMMs as long as the contraction's own,
one for each of its radii (deterministic, probabilistic, the reference's). On the
CPU a float32 GEMM takes half the time of a float64 one. Here such a product is
computed in float32 and grown into a float64 upper bound of the exact product:

* the magnitudes are those the contraction's magnitude sum ``S`` already rounded up
  to float32 (:func:`~numoracle.oracle.fused.fused_single_parts`); the radius is
  scaled by a power of two ``2^s`` and rounded up to float32 (one loop of numba's,
  after one that finds its range), ``s`` chosen so that every nonzero product of two
  elements lies in float32's normal range (at least ``2^-126``) and no sum of ``c``
  such products can overflow (each at most ``2^(126 - ceil(log2 c))``);
* then every operation of the GEMM (products, sums, in any order, fused or not)
  rounds a normal float32 number: the computed sum of ``c`` terms is at least
  ``1 - gamma_c(2^-24)`` of the exact sum of the (rounded-up, scaled) terms, and no
  product underflows or is flushed to zero; a longer contraction is summed in GEMMs
  of :data:`~numoracle.oracle.fused.SINGLE_CHUNK` terms added in float64
  (:func:`~numoracle.oracle.fused.single_sum`);
* the sum times ``(1 + 2 gamma_{c+1}(2^-24)) 2^-s`` (one float64 rounding, within
  the growth's margin; the scaling back exact: every nonzero result lies above
  float64's smallest normal) is an upper bound of the exact product, above it by
  less than ``2^-11`` of itself (the growth, float32's rounding, the operands
  rounded up): the magnitude sum ``S``'s own margin
  (:func:`~numoracle.oracle.fused.single_growth`).

Where no such ``s`` exists (operands whose nonzero elements span more than about
``2^240`` together), an operand holds a NaN, an infinity or only zeros, is not
laid out contiguously (C or Fortran order, or a permuted view of such an array: a
stack of transposed matrices, as attention's backward pass multiplies), or the GEMM is too small for the conversion to pay
(:data:`PRODUCT_MIN`, :data:`SIDE_MIN`), or numba is missing or switched off
(``NUMORACLE_NUMBA=0``), :func:`upper_product` returns None and the caller's
float64 GEMM runs, as it always did.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import numpy as np

from . import fused_cpu
from .fused import SINGLE_CHUNK, scratch, single_growth, single_sum

__all__ = ["Magnitudes", "upper_product", "radii_product", "PRODUCT_MIN", "SIDE_MIN"]

#: multiply-adds from which a radius's product runs in float32 (below, the GEMM is
#: too short for the radius's two passes to pay)
PRODUCT_MIN = 1 << 24
#: the least extent of the magnitudes' free axis (the output's rows for ``|a| @ r``,
#: its columns for ``r @ |b|``): the float32 GEMM saves time in proportion to it,
#: the radius's conversion costs its own size
SIDE_MIN = 64
#: the largest scaling exponent: a nonzero result (at least 2^-126 scaled by 2^-s)
#: stays above float64's smallest normal, so that scaling back is exact
_MAX_SCALE = 896
#: the scratch slots (:func:`~numoracle.oracle.fused.scratch`) of the radius in float32
#: and of the float32 product
_RADIUS_SLOT, _PRODUCT_SLOT = 9, 10


@cache
def _loops() -> Any:
    """The compiled loops, or None where numba is missing or switched off."""
    if not fused_cpu.available():
        return None
    from . import _numba_single  # noqa: PLC0415 - numba is optional

    return _numba_single


def _memory_order(a: np.ndarray) -> list[int] | None:
    """The axes of ``a`` from the largest stride to the smallest where ``a`` with its
    axes so permuted is C-contiguous (a C- or Fortran-contiguous array, or a stack of
    transposed matrices: a permuted view of a contiguous array), else None."""
    order = sorted(range(a.ndim), key=lambda k: -abs(a.strides[k]))
    return order if a.transpose(order).flags.c_contiguous else None


def _flat(a: np.ndarray) -> np.ndarray | None:
    """The elements of a contiguous array in memory order (a view; also those of a
    permuted view of one: :func:`_memory_order`), None for any other layout."""
    if a.flags.c_contiguous:
        return a.reshape(-1)
    if a.flags.f_contiguous:
        return a.reshape(-1, order="F")
    order = _memory_order(a)
    return None if order is None else a.transpose(order).reshape(-1)


def _laid_out_as(slot: int, a: np.ndarray) -> np.ndarray:
    """A float32 scratch array shaped as ``a`` whose elements lie in memory in the
    order of ``a``'s (:func:`_flat` visits both alike): ``a`` contiguous, or a
    permuted view of a contiguous array."""
    if a.flags.c_contiguous or a.flags.f_contiguous:
        return scratch(slot, a, np.float32)
    order = _memory_order(a)
    assert order is not None  # (the caller found the radius's range by _flat)
    return scratch(slot, a.transpose(order), np.float32).transpose(np.argsort(order))


def _range(a: np.ndarray) -> tuple[float, float] | None:
    """The smallest nonzero and the largest element of a nonnegative array, None where
    it has none nonzero, holds a NaN, an infinity or a negative number, or is not
    contiguous."""
    flat = _flat(a)
    if flat is None:
        return None
    if flat.dtype == np.float64:  # (from the bits: a loop that vectorises)
        bits = _loops().nonnegative_range_bits(flat.view(np.int64))
        lo, hi, bad = (*np.array(bits[:2], dtype=np.int64).view(np.float64), bits[2])
    else:
        lo, hi, bad = _loops().nonnegative_range(flat)
    return None if bad or not lo <= hi else (float(lo), float(hi))


class Magnitudes:
    """An operand's magnitudes ``|a|`` rounded up to float32 (every nonzero one in
    float32's normal range: :func:`~numoracle.oracle.fused_cpu.single_magnitudes`),
    their range found once for the products of all of a contraction's radii."""

    def __init__(self, single: np.ndarray) -> None:
        self.single = single
        self._range: tuple[float, float] | None | bool = False

    def range(self) -> tuple[float, float] | None:
        if self._range is False:
            self._range = _range(self.single)
        return self._range  # type: ignore[return-value]


def _scale(mag: tuple[float, float], rad: tuple[float, float], c: int) -> int | None:
    """The exponent ``s`` of the radius's scaling (see the module docstring), from the
    binary exponents of the ranges (``2^(e-1) <= v < 2^e``), or None where none fits."""
    e_mlo, e_mhi = (math.frexp(v)[1] for v in mag)
    e_rlo, e_rhi = (math.frexp(v)[1] for v in rad)
    log_c = (c - 1).bit_length()  # ceil(log2 c)
    low = max(-125 - e_rlo,             # the radius's nonzero elements normal in float32
              -124 - e_mlo - e_rlo,     # every nonzero product too
              -_MAX_SCALE)
    high = min(127 - e_rhi,             # the radius's largest at most 2^127, rounded up
               126 - e_mhi - e_rhi - log_c,  # c products, grown, below 2^127
               _MAX_SCALE)
    return None if low > high else (low + high) // 2


def _pays(mags: np.ndarray, radius: np.ndarray, mags_first: bool) -> bool:
    """Whether the float32 product of ``mags`` and ``radius`` (stacks of matrices
    whose inner extents agree) is large enough to pay for the radius's conversion
    (:data:`PRODUCT_MIN`, :data:`SIDE_MIN`), the loops there."""
    if mags.ndim < 2 or radius.ndim < 2 or _loops() is None:
        return False
    x_shape, y_shape = (mags.shape, radius.shape) if mags_first else (radius.shape, mags.shape)
    k, side = x_shape[-1], (x_shape[-2] if mags_first else y_shape[-1])
    if y_shape[-2] != k:
        return False
    macs = math.prod(np.broadcast_shapes(x_shape[:-2], y_shape[:-2])) * x_shape[-2] * k * y_shape[-1]
    return side >= SIDE_MIN and macs >= PRODUCT_MIN


def radii_product(ra: np.ndarray, rb: np.ndarray) -> np.ndarray | None:
    """An upper bound (float64) of ``ra @ rb``, the product of two operands' radii
    (float64, stacks of matrices), from float32 GEMMs: the smaller of the two rounded
    up to float32 (:func:`~numoracle.oracle.fused_cpu.single_magnitudes`: at least
    itself) takes the magnitudes' place in :func:`upper_product`. None where that
    does not run, or where a nonzero element of the smaller one lies outside
    float32's normal range (then the caller's float64 GEMM)."""
    if not (type(ra) is np.ndarray and type(rb) is np.ndarray
            and ra.dtype == rb.dtype == np.float64):
        return None
    first = ra.size <= rb.size  # (the smaller one converted twice, the larger once)
    small, other = (ra, rb) if first else (rb, ra)
    if not _pays(small, other, first) or _range(small) is None:
        return None  # (a NaN, an infinity, a negative radius or only zeros: float64's)
    m32 = fused_cpu.single_magnitudes(small)
    return None if m32 is None else upper_product(Magnitudes(m32), other, first)


def upper_product(mags: Magnitudes, radius: np.ndarray, mags_first: bool) -> np.ndarray | None:
    """An upper bound (float64) of ``|a| @ radius`` (``mags_first``) or ``radius @
    |b|``, ``mags`` the magnitudes ``|a|`` or ``|b|`` rounded up to float32, from
    float32 GEMMs (see the module docstring); None where it does not run (then the
    caller's float64 GEMM). Both operands stacks of matrices (at least 2-D)."""
    m32 = mags.single
    if not _pays(m32, radius, mags_first):
        return None
    x_shape, y_shape = (m32.shape, radius.shape) if mags_first else (radius.shape, m32.shape)
    k = x_shape[-1]
    rad_range = _range(radius)
    mag_range = None if rad_range is None else mags.range()
    if rad_range is None or mag_range is None:
        return None
    s = _scale(mag_range, rad_range, min(k, SINGLE_CHUNK))
    if s is None:
        return None
    loops = _loops()
    r32 = _laid_out_as(_RADIUS_SLOT, radius)  # (both used at once, then dropped:
    loops.scaled_single(_flat(radius), math.ldexp(1.0, s), _flat(r32))  # no fresh pages)
    shape = np.broadcast_shapes(x_shape[:-2], y_shape[:-2]) + (x_shape[-2], y_shape[-1])
    out32 = scratch(_PRODUCT_SLOT, np.broadcast_to(np.float32(0), shape), np.float32) if (
        k <= SINGLE_CHUNK) else None
    total = single_sum(m32, r32, out32) if mags_first else single_sum(r32, m32, out32)
    grow = math.ldexp(single_growth(k)[0], -s)
    if total.dtype == np.float64:  # (summed in chunks: float64 already, its own)
        total *= grow
        return total
    out = np.empty(total.shape)
    loops.widened(total.reshape(-1), grow, out.reshape(-1))
    return out
