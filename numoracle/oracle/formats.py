"""Floating-point formats and bit-exact quantization, in NumPy or CuPy.

A :class:`Format` is described by its explicit mantissa bits ``t`` and its
exponent range; ``u = 2**-(t+1)`` is the unit roundoff of round-to-nearest and
``2**-t`` that of truncation (round toward zero).

:func:`quantize` rounds float64 values into a format exactly as hardware does:
round-to-nearest-even (``"rne"``) or truncation (``"rz"``), with gradual
underflow, overflow to infinity (``rne``) or to the largest finite value
(``rz``), and NaN kept. Both functions run where their argument lives: a
CuPy array is quantized on its device (no round trip through the host).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidArgument
from .xp import array_module

__all__ = [
    "Format",
    "FP64",
    "FP32",
    "TF32",
    "BF16",
    "FP16",
    "FORMATS",
    "ROUNDINGS",
    "get_format",
    "chunk_size",
    "quantize",
    "representable",
    "UNREPRESENTABLE",
    "SUBNORMAL",
    "NOT_FINITE",
    "OFF_SINGLE",
    "SINGLE_UP",
]

ROUNDINGS = ("rne", "rz")
#: elements per chunk of a pass done in pieces on the host
_CHUNK = 1 << 16
#: the same on a GPU, where every chunk costs kernel launches: far larger
_DEVICE_CHUNK = 1 << 24


def chunk_size(xp: object) -> int:
    """Elements per chunk of an elementwise pass done in pieces to bound its
    temporaries: small on the host (cache-sized), large on a GPU (few launches)."""
    return _CHUNK if xp is np else _DEVICE_CHUNK


@dataclass(frozen=True)
class Format:
    """A binary floating-point format.

    Parameters
    ----------
    name : str
        Short name (``"fp32"``).
    t : int
        Explicit mantissa bits (23 for fp32); precision ``p = t + 1``.
    emin, emax : int
        Exponent of the smallest normal and of the largest finite number.
    """

    name: str
    t: int
    emin: int
    emax: int

    @property
    def p(self) -> int:
        """Significant bits, the implicit one included."""
        return self.t + 1

    def unit_roundoff(self, rounding: str = "rne") -> float:
        """``u``: 2^-p for round-to-nearest, 2^-t for truncation."""
        _check_rounding(rounding)
        return 2.0 ** -(self.p if rounding == "rne" else self.t)

    @property
    def u(self) -> float:
        """Unit roundoff of round-to-nearest."""
        return 2.0**-self.p

    @property
    def tiny(self) -> float:
        """Smallest positive normal number, 2^emin."""
        return 2.0**self.emin

    @property
    def max(self) -> float:
        """Largest finite number, (2 - 2^-t) * 2^emax."""
        return (2.0 - 2.0**-self.t) * 2.0**self.emax

    def __str__(self) -> str:
        return self.name


FP64 = Format("fp64", 52, -1022, 1023)
FP32 = Format("fp32", 23, -126, 127)
TF32 = Format("tf32", 10, -126, 127)
BF16 = Format("bf16", 7, -126, 127)
FP16 = Format("fp16", 10, -14, 15)

#: the flags a pass over an operand reports as to a format
#: (:func:`~numoracle.oracle.fused.operand_facts`, on the GPU and the CPU alike): off the
#: format's grid, subnormal, not finite; OFF_SINGLE only where the magnitudes are float32,
#: on the CPU (a magnitude float32 does not hold)
UNREPRESENTABLE, SUBNORMAL, NOT_FINITE, OFF_SINGLE = 1, 2, 4, 8
#: a magnitude rounded up to float32 where float32 does not hold it: ``m * SINGLE_UP`` lies
#: 1 or 2 ulps above the nearest float32 ``m`` (normal, finite), in float32's arithmetic
SINGLE_UP = np.float32(1.0 + 2.0**-23)

FORMATS: dict[str, Format] = {f.name: f for f in (FP64, FP32, TF32, BF16, FP16)}

#: formats NumPy has as dtypes, whose casts :func:`quantize` uses for ``rne``
_NATIVE: dict[Format, type] = {FP32: np.float32, FP16: np.float16}


def get_format(name: str | Format) -> Format:
    """Look a format up by name (``"fp32"``, ``"bf16"``, ...)."""
    if isinstance(name, Format):
        return name
    try:
        return FORMATS[name]
    except (KeyError, TypeError):
        raise InvalidArgument(
            f"format {name!r} is unknown; use one of {sorted(FORMATS)}"
        ) from None


def _check_rounding(rounding: str) -> None:
    if rounding not in ROUNDINGS:
        raise InvalidArgument(
            f"{rounding=} is not a rounding mode; use 'rne' (round to nearest, "
            "ties to even) or 'rz' (truncation)"
        )


def quantize(x: np.ndarray | float, fmt: Format | str, rounding: str = "rne") -> np.ndarray:
    """Round float64 values into ``fmt``, bit-exactly; returns float64.

    Examples
    --------
    >>> float(quantize(1 + 2**-11, "tf32"))   # a tie: rounds to even
    1.0
    >>> float(quantize(1 + 3 * 2**-12, "tf32", "rz"))
    1.0
    """
    fmt = get_format(fmt)
    _check_rounding(rounding)
    xp = array_module(x)
    x = xp.asarray(x, dtype=xp.float64)
    if fmt.t >= 52:
        return xp.array(x, copy=True)
    native = _NATIVE.get(fmt)
    if native is not None and rounding == "rne" and xp is np:
        # the IEEE conversion rounds to nearest-even, to subnormals and to Inf as the
        # general path does (bit for bit, tests/oracle/test_formats.py), in one pass.
        # Host only: CuPy's kernels are compiled with -ftz, which flushes subnormals.
        with np.errstate(over="ignore"):
            return np.asarray(x).astype(native).astype(np.float64)
    return _quantize_general(x, fmt, rounding, xp)


def _quantize_general(x: Any, fmt: Format, rounding: str, xp: Any) -> Any:
    """:func:`quantize` for any format and rounding, by scaling to the format's
    quantum at each value's exponent (NumPy or CuPy float64 ``x``)."""
    with np.errstate(invalid="ignore", over="ignore"):
        _, e = xp.frexp(x)  # |x| = m * 2**e, m in [0.5, 1)
        exp = xp.maximum(e.astype(xp.int64) - 1, fmt.emin)
        quantum = xp.ldexp(xp.ones((), dtype=xp.float64), (exp - fmt.t).astype(xp.int32))
        scaled = x / quantum  # exact: division by a power of two, no underflow
        r = xp.rint(scaled) if rounding == "rne" else xp.trunc(scaled)
        y = r * quantum
        big = xp.abs(y) > fmt.max
        if bool(xp.any(big)):
            y = xp.where(big, xp.copysign(np.inf if rounding == "rne" else fmt.max, x), y)
        y = xp.where(xp.isfinite(x), y, x)
    return y


def representable(x: np.ndarray, fmt: Format | str) -> np.ndarray:
    """True where ``x`` is exactly a value of ``fmt`` (NaN counts as representable)."""
    xp = array_module(x)
    x = xp.asarray(x, dtype=xp.float64)
    flat = x.reshape(-1)
    out = xp.empty(flat.shape, dtype=bool)
    step = chunk_size(xp)
    for lo in range(0, flat.size, step):  # chunks keep the temporaries small
        part = flat[lo:lo + step]
        out[lo:lo + step] = (quantize(part, fmt) == part) | xp.isnan(part)
    return out.reshape(x.shape)
