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
    return _held(mag, low, lead, fmt) | (mag == 0) | ~(mag < math.inf)  # (NaN: not <)


#: an operand whose lowest set bit lies at or above ``2^DEEP_EXPONENT`` makes, with
#: another such, products on a grid no finer than float64's least subnormal
#: (``2 DEEP_EXPONENT = -1074``): no read of the grid is needed to know it
DEEP_EXPONENT = -537


def operand_facts(tensors: list[Any], fmt: Any, none: int
                  ) -> list[tuple[Any, Any, int, bool]]:
    """Each float64 tensor's magnitude (a tensor laid out as it), the least magnitude of
    the lowest set bits of its nonzero finite elements (a 0-d tensor, left on the device:
    infinite where there are none; :func:`lowest_exponent` and :func:`grid_thresholds`
    reads it) and its flags (:data:`NOT_FINITE`, :data:`SUBNORMAL`, :data:`UNREPRESENTABLE`
    as to ``fmt``, or'ed) and whether a lowest set bit lies below ``2^DEEP_EXPONENT``
    (:data:`DEEP_EXPONENT`); the flags of all of them read in one transfer. The lowest
    set bit is a value, not a decision: a recorded evaluation
    (:mod:`~numoracle.oracle.traced.recording`) reads only what it decides."""
    if not tensors:
        return []
    torch = _torch(tensors[0])
    mags, lows, found = [], [], []
    for t in tensors:
        mag = t.abs()
        mags.append(mag)
        if not t.numel():
            lows.append(torch.tensor(math.inf, dtype=torch.float64, device=t.device))
            found.append(torch.zeros(4, dtype=torch.bool, device=t.device))
            continue
        finite = mag < math.inf  # (NaN compares false; torch's isfinite makes four passes)
        counted = finite & (mag != 0)
        low, lead = _low_and_lead(mag)
        lows.append(torch.where(counted, low, math.inf).amin())
        found.append(torch.stack([
            (~finite).any(),
            (counted & (mag < fmt.tiny)).any(),
            (counted & ~_held(mag, low, lead, fmt)).any(),
            lows[-1] < math.ldexp(1.0, DEEP_EXPONENT)]))
    out = []
    for mag, low, (not_finite, subnormal, off, deep) in zip(
            mags, lows, torch.stack(found).tolist(), strict=True):  # (one read)
        flags = ((NOT_FINITE if not_finite else 0) | (SUBNORMAL if subnormal else 0)
                 | (UNREPRESENTABLE if off else 0))
        out.append((mag, low, flags, bool(deep)))
    return out


def lowest_exponent(low: Any, none: int) -> int:
    """The exponent of the lowest set bit a 0-d ``low`` of :func:`operand_facts` holds
    (``none`` for infinity: no nonzero finite element); one read."""
    value = float(low)
    return none if value == math.inf else math.frexp(value)[1] - 1


def grid_thresholds(lows: list[Any], none: int, acc_p: int, acc_emin: int, p64: int,
                    finest: int, device: Any, deep: bool = True) -> tuple[bool, Any, Any]:
    """The exact regime of a contraction of exact operands on the device: the grid
    ``2^e`` (``e`` the sum of the first two operands' lowest exponents, ``0`` where one
    has no nonzero finite element, at most a bias's: ``tracked._grid_exponent``) and
    the thresholds ``fits_acc = 2^(acc_p + e)`` (where ``e >= acc_emin``) and
    ``fits_64 = 2^(p64 + e)``, ``-1`` where there is no grid (``e >= 2^19``): 0-d
    tensors, never read. One read, where ``deep`` (some operand's lowest set bit below
    ``2^DEEP_EXPONENT``; else ``e`` cannot lie below ``finest = 2 DEEP_EXPONENT``):
    whether ``e`` lies below ``finest``. An operand's entry of ``lows`` is its ``low``
    of :func:`operand_facts`, or its lowest exponent where the host knows it (an int)."""
    import torch  # noqa: PLC0415 - only with torch's tensors

    exps = []
    for low in lows:
        if isinstance(low, int):
            exps.append(torch.tensor(low, dtype=torch.int64, device=device))
            continue
        finite = torch.isfinite(low)
        e = torch.frexp(torch.where(finite, low, 1.0)).exponent.to(torch.int64) - 1
        exps.append(torch.where(finite, e, none))
    e = torch.where(torch.maximum(exps[0], exps[1]) < none, exps[0] + exps[1], 0)
    if len(exps) > 2:
        e = torch.minimum(e, exps[2])
    grid = e < (1 << 19)
    k = torch.clamp(e, min=-4000, max=4000).to(torch.float64)
    one = torch.ones((), dtype=torch.float64, device=device)
    fits_acc = torch.where(grid & (e >= acc_emin), torch.ldexp(one, k + acc_p), -1.0)
    fits_64 = torch.where(grid, torch.ldexp(one, k + p64), -1.0)
    return deep and bool(e < finest), fits_acc, fits_64


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
    if not isinstance(fits_acc, float) or fits_acc >= 0.0:  # (a tensor: s >= 0 > -1)
        fits = s <= fits_acc
        det.masked_fill_(fits, 0.0)
        prob.masked_fill_(fits, 0.0)
    over = s > acc_max
    det.masked_fill_(over, math.inf)
    prob.masked_fill_(over, math.inf)
    if not isinstance(fits_64, float) or fits_64 >= 0.0:
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
