"""The exact contraction's passes in torch's namespace, on tensors directly.

A contraction of exact operands in torch's namespace (:class:`~numoracle.oracle.xp.
TorchNumPy`, on the CPU or a CUDA device) takes the path CuPy's kernels take
(:func:`~numoracle.oracle.fused.fused_exact`): each operand's facts from one series of
tensor operations (its magnitude, the lowest set bit of its nonzero finite elements,
the flags ``NOT_FINITE``, ``SUBNORMAL``, ``UNREPRESENTABLE``), all operands' facts
brought to the host in one read (one synchronisation on a device), then after the GEMMs
the radii of :func:`~numoracle.oracle.fused.exact_contraction_radii` and the rounding
of :func:`~numoracle.oracle.fused.store_rounding`. Every operation is torch's own on
the operands' device, called on the tensors (not through torch's NumPy API, whose
argument normalisation costs the host a hundred Python calls an operation), in the
order and with the roundings of the NumPy passes: the same bits (each float64
operation rounds once; no fused multiply-add).

``NUMORACLE_TORCH_PASSES=0`` in the environment (:data:`TORCH_PASSES`) leaves torch's
namespace on the general path of :mod:`~numoracle.oracle.tracked` (the same results,
by its primitives in torch's NumPy API).

The lowest set bit of a nonzero finite ``v`` is found as a value, ``2^lsb``: ``|v|``
minus ``|v|`` with its lowest significand bit cleared (exact: both share the
exponent), or ``|v|`` itself where the stored significand is 0 (a power of two). Its
minimum over an operand is a power of two that float64 holds (subnormals included),
so its exponent is read on the host exactly.
"""

from __future__ import annotations

import math
import os
from typing import Any

from .formats import NOT_FINITE, SUBNORMAL, UNREPRESENTABLE
from .xp import is_torch

__all__ = ["TORCH_PASSES", "available", "operand_facts", "exact_radii", "store_round",
           "representable"]

#: whether contractions of exact operands in torch's namespace take these passes
#: (``NUMORACLE_TORCH_PASSES=0``: the general path)
TORCH_PASSES = os.environ.get("NUMORACLE_TORCH_PASSES", "1") != "0"
#: the stored significand's bits of a float64
_SIGNIFICAND = (1 << 52) - 1


def available(xp: Any) -> bool:
    """Whether contractions of exact operands of ``xp`` take these passes: torch's
    namespace, with :data:`TORCH_PASSES`."""
    return TORCH_PASSES and is_torch(xp)


def _low_and_lead(mag: Any) -> tuple[Any, Any]:
    """Per element of float64 magnitudes ``mag`` (finite, nonzero where it matters):
    the value of its lowest set bit ``2^lsb`` and of its leading one ``2^floor(log2)``
    (0 for a subnormal)."""
    torch = _torch(mag)
    bits = mag.view(torch.int64)
    cleared = (bits & (bits - 1)).view(torch.float64)
    low = torch.where((bits & _SIGNIFICAND) == 0, mag, mag - cleared)
    lead = (bits & ~_SIGNIFICAND).view(torch.float64)
    return low, lead


def _held(mag: Any, low: Any, lead: Any, fmt: Any) -> Any:
    """Where a finite magnitude is a value of ``fmt``: within its range, its lowest set
    bit at or above the format's quantum at its exponent (``formats.representable``)."""
    torch = _torch(mag)
    quantum = torch.clamp(lead, min=math.ldexp(1.0, fmt.emin)) * math.ldexp(1.0, -fmt.t)
    return (mag <= fmt.max) & (low >= quantum)


def representable(value: Any, fmt: Any) -> Any:
    """Where float64 tensor ``value`` is exactly a value of ``fmt`` (a zero, an
    infinity and NaN count as representable), as
    :func:`~numoracle.oracle.formats.representable`."""
    mag = value.abs()
    low, lead = _low_and_lead(mag)
    return _held(mag, low, lead, fmt) | (mag == 0) | ~value.isfinite()


def operand_facts(tensors: list[Any], fmt: Any, none: int
                  ) -> list[tuple[Any, int, int]]:
    """Each float64 tensor's magnitude (a tensor laid out as it), the exponent of the
    lowest set bit of its nonzero finite elements (``none`` where there are none) and
    its flags (:data:`NOT_FINITE`, :data:`SUBNORMAL`, :data:`UNREPRESENTABLE` as to
    ``fmt``, or'ed); the facts of all of them read in one transfer."""
    if not tensors:
        return []
    torch = _torch(tensors[0])
    mags, found = [], []
    for t in tensors:
        mag = t.abs()
        mags.append(mag)
        if not t.numel():
            found.append(torch.tensor([math.inf, 0.0, 0.0, 0.0], dtype=torch.float64,
                                      device=t.device))
            continue
        finite = mag.isfinite()
        counted = finite & (mag != 0)
        low, lead = _low_and_lead(mag)
        found.append(torch.stack([
            torch.where(counted, low, math.inf).amin(),
            (~finite).any(),
            (counted & (mag < fmt.tiny)).any(),
            (counted & ~_held(mag, low, lead, fmt)).any()]).to(torch.float64))
    out = []
    for mag, (low, not_finite, subnormal, off) in zip(
            mags, torch.stack(found).tolist(), strict=True):  # (one read)
        lsb = none if low == math.inf else math.frexp(low)[1] - 1
        flags = ((NOT_FINITE if not_finite else 0) | (SUBNORMAL if subnormal else 0)
                 | (UNREPRESENTABLE if off else 0))
        out.append((mag, lsb, flags))
    return out


def exact_radii(value: Any, S: Any, bias: Any, scalars: tuple[Any, ...], fmt: Any = None
                ) -> tuple[Any, Any, Any, Any]:
    """:func:`~numoracle.oracle.fused.exact_contraction_radii` on tensors: ``bias``
    added to ``value`` and ``|bias|`` to ``S`` (where there is one), ``S`` grown into
    an upper bound, the radii affine in it, the exact regime's zeros, the overflow's
    infinities, and with ``fmt`` the rounding to it (:func:`store_round`). Returns
    the grown ``S`` and the three radii (fresh tensors); ``value`` (the GEMM's own)
    changes in place. The coefficients are floats or tensors broadcastable to ``S``."""
    grow, tiny_mag, tiny_sum, det_coef, prob_coef, eta, g64, fits_acc, fits_64, acc_max = \
        scalars
    if bias is not None:
        value += bias
        S = S + bias.abs()
    s = S * grow
    s += tiny_mag
    det = s * det_coef
    det += eta
    prob = s * prob_coef
    prob += eta
    ref = s * g64
    ref += tiny_sum
    if fits_acc >= 0.0:
        fits = s <= fits_acc
        det.masked_fill_(fits, 0.0)
        prob.masked_fill_(fits, 0.0)
    over = s > acc_max
    det.masked_fill_(over, math.inf)
    prob.masked_fill_(over, math.inf)
    if fits_64 >= 0.0:
        ref.masked_fill_(s <= fits_64, 0.0)
    if fmt is not None:
        det, prob = store_round(value, ref, det, prob, fmt)
    return s, det, prob, ref


def store_round(value: Any, ref: Any, det: Any, prob: Any, fmt: Any) -> tuple[Any, Any]:
    """:func:`~numoracle.oracle.fused.store_rounding` on tensors: the radii after one
    more rounding to ``fmt`` (``r (1 + u) + u (|value| + ref) + tiny``), 0 where the
    value is exact (``det`` and ``ref`` 0) and ``fmt`` holds it, infinite where
    ``|value| + ref + det`` reaches ``fmt.max``. Fresh tensors."""
    m = value.abs()
    m += ref
    mu = m * fmt.u
    mu += fmt.tiny
    over = (m + det) >= fmt.max
    exact = (det == 0) & (ref == 0) & representable(value, fmt)
    grow = 1.0 + fmt.u
    d = det * grow
    d += mu
    p = prob * grow
    p += mu
    d.masked_fill_(exact, 0.0)
    p.masked_fill_(exact, 0.0)
    d.masked_fill_(over, math.inf)
    p.masked_fill_(over, math.inf)
    return d, p


def _torch(t: Any) -> Any:
    """torch (imported by the caller's namespace already)."""
    import torch  # noqa: PLC0415 - only with torch's tensors

    return torch
