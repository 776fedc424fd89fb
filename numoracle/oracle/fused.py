"""The bound arithmetic after a contraction's GEMMs, one pass where the device allows.

A contraction's radii are affine in its magnitude sum ``S`` and its rounding to
the output format is affine in ``|value|``: each is a handful of elementwise
steps over output-sized arrays. On NumPy they stay separate in-place passes;
on CuPy each group is one kernel (memory traffic, not arithmetic, sets the pace
there). The kernels perform the same float64 operations in the same order as
the NumPy passes, compiled without fused multiply-add contraction, so both
give the same bits. The exact regime's grid (the lowest set bit of an array) is
one kernel on CuPy too, and several device scalars come to the host in one
transfer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .xp import array_module

__all__ = ["fused", "contraction_radii", "rounding_screen", "add_rounding", "lowest_set_bit",
           "device_scalars", "own_array", "rounded"]

#: separate roundings, as NumPy's passes (no a*b+c contracted into one fma)
_NO_FMA = ("--fmad=false",)
_KERNELS: dict[str, Any] = {}


def _kernel(name: str) -> Any:
    """The CuPy kernel ``name`` (built on first use; CuPy caches its compilation)."""
    if name not in _KERNELS:
        import cupy  # noqa: PLC0415 - only for device arrays

        if name == "contraction":
            _KERNELS[name] = cupy.ElementwiseKernel(
                "float64 grow, float64 tiny_sum, float64 det_coef, float64 prob_coef, "
                "float64 eta, float64 g64",
                "float64 S, float64 det, float64 prob, float64 ref",
                "double s = S * grow; s = s + tiny_sum; S = s;"
                "det = s * det_coef + eta; prob = s * prob_coef + eta;"
                "ref = s * g64 + tiny_sum;",
                "numoracle_contraction_radii", options=_NO_FMA)
        elif name == "rounding":
            _KERNELS[name] = cupy.ElementwiseKernel(
                "float64 v, float64 ref, float64 u, float64 grow, float64 tiny",
                "float64 det, float64 prob",
                "double m = fabs(v) + ref; m = m * u; m = m + tiny;"
                "det = det * grow + m; prob = prob * grow + m;",
                "numoracle_add_rounding", options=_NO_FMA)
        elif name == "screen":  # mapped here, reduced by CuPy's max (a ReductionKernel
            # of everything to one number runs one block of threads: slow at this size)
            _KERNELS[name] = cupy.ElementwiseKernel(
                "float64 v, float64 ref, float64 det", "float64 top",
                "top = det == 0.0 ? __longlong_as_double(0x7ff0000000000000LL)"
                " : fabs(v) + ref + det;", "numoracle_rounding_screen", options=_NO_FMA)
        else:  # "lsb": the exponent of each element's lowest set bit, from its bits
            _KERNELS[name] = cupy.ElementwiseKernel(
                "float64 x, int32 none", "int32 e",
                "long long b = __double_as_longlong(x); int E = (int)((b >> 52) & 0x7ff);"
                "long long m = b & 0xfffffffffffffLL;"
                "if (x == 0.0 || E == 0x7ff) e = none;"
                "else if (E == 0) e = -1075 + __ffsll(m);"
                "else e = E - 1076 + __ffsll(m | 0x10000000000000LL);",
                "numoracle_lsb_exponent")
    return _KERNELS[name]


def fused(xp: Any) -> bool:
    """Whether the arrays of ``xp`` get the one-kernel forms (CuPy's do)."""
    return bool(xp.__name__ == "cupy")


def contraction_radii(S: Any, grow: Any, tiny_sum: Any, det_coef: Any, prob_coef: Any,
                      eta: Any, g64: Any) -> tuple[Any, Any, Any]:
    """Make ``S`` (a float64 magnitude sum, in place) an upper bound,
    ``S (1 + 2 gamma_n(u64)) + n 2^-1074`` (``grow``, ``tiny_sum``), and return
    the radii affine in it: ``det_coef S + eta``, ``prob_coef S + eta`` and the
    reference's own ``g64 S + tiny_sum`` (the coefficients floats, or arrays
    broadcastable to ``S`` where the accumulation length varies)."""
    xp = array_module(S)
    if fused(xp):
        det, prob, ref = (xp.empty_like(S) for _ in range(3))
        _kernel("contraction")(grow, tiny_sum, det_coef, prob_coef, eta, g64, S, det, prob,
                               ref)
        return det, prob, ref
    S *= grow
    S += tiny_sum
    return _affine(S, det_coef, eta), _affine(S, prob_coef, eta), _affine(S, g64, tiny_sum)


def _affine(S: Any, coef: Any, const: Any) -> Any:
    """``coef * S + const`` in a fresh array, with no temporary."""
    out = S * coef
    out += const
    return out


def rounding_screen(value: Any, ref_err: Any, det: Any) -> float | None:
    """On CuPy: ``max(|value| + ref_err + det)``, infinite where some ``det`` is 0
    and NaN where any term is; one kernel and CuPy's max, one synchronisation. ``None`` on
    NumPy, whose separate passes cost less than the sum's temporary."""
    xp = array_module(value)
    if not fused(xp) or not value.size:
        return None
    return float(xp.max(_kernel("screen")(value, ref_err, det)))  # CuPy's max keeps NaN


def lowest_set_bit(x: Any, none: int, sync: bool = True) -> Any:
    """On CuPy: the exponent of the lowest set bit over the nonzero finite
    elements of float64 ``x`` (``none`` where there are none), in one pass and
    one synchronisation; with ``sync=False`` as a 0-d device array, for
    :func:`device_scalars`. ``None`` on NumPy (its vectorised path is the caller's)."""
    xp = array_module(x)
    if not fused(xp):
        return None
    low = xp.min(_kernel("lsb")(x, none)) if x.size else xp.asarray(none, dtype=xp.int32)
    return int(low) if sync else low


def device_scalars(scalars: list[Any]) -> list[float]:
    """Several 0-d device arrays brought to the host in one transfer (one
    synchronisation); integers up to 2^53 come back exact."""
    xp = array_module(scalars[0])
    return [float(v) for v in xp.stack([xp.asarray(v, dtype=xp.float64)
                                          for v in scalars]).get()]


def add_rounding(value: Any, ref_err: Any, det: Any, prob: Any, u: float, tiny: float,
                 mag: Any = None) -> tuple[Any, Any]:
    """The radii after one more rounding to a format of unit roundoff ``u`` and
    smallest normal ``tiny``: ``r (1 + u) + u (|value| + ref_err) + tiny`` for
    ``r`` in ``det``, ``prob``; in place where a radius is an array of its own.
    ``mag``: ``|value| + ref_err`` where the caller has it (used up here)."""
    xp = array_module(value)
    if fused(xp) and mag is None:
        det, prob = own_array(det, value.shape, xp), own_array(prob, value.shape, xp)
        _kernel("rounding")(value, ref_err, u, 1.0 + u, tiny, det, prob)
        return det, prob
    if mag is None:
        mag = xp.abs(value)
        mag += ref_err
    mag *= u
    mag += tiny
    return rounded(det, mag, u), rounded(prob, mag, u)


def rounded(radius: Any, scaled_mag: Any, u: float) -> Any:
    """``radius (1 + u) + scaled_mag``, where ``scaled_mag = u |value| + 2^emin``:
    one more rounding; in place when ``radius`` is an array of its own."""
    shape = np.broadcast_shapes(getattr(radius, "shape", ()), getattr(scaled_mag, "shape", ()))
    out = own_array(radius, shape, array_module(scaled_mag))
    out *= 1.0 + u
    out += scaled_mag
    return out


def own_array(r: Any, shape: tuple[int, ...], xp: Any) -> Any:
    """``r`` itself where it is a writeable array of ``shape`` that no other array
    views; else a copy of it at that shape."""
    flags = getattr(r, "flags", None)
    own = (getattr(r, "base", 0) is None and bool(getattr(flags, "writeable", True))
           and getattr(r, "shape", None) == shape)
    return r if own else xp.array(xp.broadcast_to(r, shape), dtype=xp.float64)
