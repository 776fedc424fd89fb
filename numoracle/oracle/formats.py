"""Floating-point formats and bit-exact quantization, in NumPy or CuPy.

A :class:`Format` is the one record of a floating-point format in the package:
its explicit mantissa bits ``t`` and exponent range (``u = 2**-(t+1)`` is the
unit roundoff of round-to-nearest, ``2**-t`` that of truncation), its largest
and smallest normal and subnormal numbers, whether it has subnormals and
infinities, the rounding its arithmetic uses, and its names in NumPy, torch,
CuPy and ml_dtypes. Every other table of formats queries it
(:func:`format_of` maps any dtype or name back to its format).

:func:`quantize` rounds float64 values into a format exactly as hardware does:
round-to-nearest-even (``"rne"``) or truncation (``"rz"``), with gradual
underflow, overflow to infinity (``rne``) or to the largest finite value
(``rz``), and NaN kept. Both functions run where their argument lives: a
CuPy array is quantized on its device (no round trip through the host).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any

import numpy as np

from ..errors import InvalidArgument
from .xp import array_module, filled, is_torch, reads_are_free

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
    "format_of",
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


class KeptHash:
    """A frozen dataclass's hash computed once, over the fields equality compares (the
    generated hash's value), and left out of its pickled state (another process hashes
    strings with another seed): formats and precision models key the oracle's caches,
    dozens of lookups a contraction. A dataclass takes it with ``__hash__ =
    KeptHash.__hash__`` in its body (else ``dataclass`` generates its own)."""

    def __hash__(self) -> int:
        h: int | None = self.__dict__.get("_hash")
        if h is None:
            h = hash(tuple(getattr(self, f.name) for f in fields(self)  # type: ignore[arg-type]
                           if f.compare))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}


@dataclass(frozen=True)
class Format(KeptHash):
    """A binary floating-point format.

    Parameters
    ----------
    name : str
        Short name (``"fp32"``).
    t : int
        Explicit mantissa bits (23 for fp32); precision ``p = t + 1``.
    emin, emax : int
        Exponent of the smallest normal and of the largest finite number.
    subnormals : bool
        Whether the format has gradual underflow (all IEEE formats here do;
        a kernel may still flush them: that is a claim of the precision model).
    infinities : bool
        Whether overflow gives an infinity (else the largest finite value).
    rounding : str
        The rounding of arithmetic into the format: ``"rne"``.
    numpy, torch, cupy, ml_dtypes : str or None
        The dtype's name in each library (``"float32"``, ``"bfloat16"``); None
        where the library has no such dtype (tf32 is a compute format only).
    """

    name: str
    t: int
    emin: int
    emax: int
    subnormals: bool = True
    infinities: bool = True
    rounding: str = "rne"
    numpy: str | None = None
    torch: str | None = None
    cupy: str | None = None
    ml_dtypes: str | None = None

    @cached_property  # (read dozens of times a contraction)
    def p(self) -> int:
        """Significant bits, the implicit one included."""
        return self.t + 1

    def unit_roundoff(self, rounding: str = "rne") -> float:
        """``u``: 2^-p for round-to-nearest, 2^-t for truncation."""
        _check_rounding(rounding)
        return 2.0 ** -(self.p if rounding == "rne" else self.t)

    @cached_property  # (read dozens of times a contraction)
    def u(self) -> float:
        """Unit roundoff of round-to-nearest."""
        return 2.0**-self.p

    @cached_property  # (read dozens of times a contraction)
    def tiny(self) -> float:
        """Smallest positive normal number, 2^emin."""
        return 2.0**self.emin

    @property
    def smallest_normal(self) -> float:
        """Smallest positive normal number (:attr:`tiny`)."""
        return self.tiny

    @property
    def smallest_subnormal(self) -> float:
        """Smallest positive number: 2^(emin - t), or :attr:`tiny` without subnormals."""
        return 2.0 ** (self.emin - self.t) if self.subnormals else self.tiny

    @cached_property  # (read dozens of times a contraction)
    def max(self) -> float:
        """Largest finite number, (2 - 2^-t) * 2^emax."""
        return (2.0 - 2.0**-self.t) * 2.0**self.emax

    @property
    def largest(self) -> float:
        """Largest finite number (:attr:`max`)."""
        return self.max

    @property
    def storable(self) -> bool:
        """Whether arrays can hold the format (it has a NumPy or ml_dtypes dtype)."""
        return self.numpy is not None or self.ml_dtypes is not None

    def numpy_dtype(self) -> np.dtype:
        """The host dtype of arrays in this format (bf16 through ml_dtypes).

        Raises
        ------
        InvalidArgument
            For a compute-only format (tf32).
        """
        if self.numpy is not None:
            return np.dtype(self.numpy)
        if self.ml_dtypes is not None:
            import ml_dtypes  # noqa: PLC0415 - an optional dependency, only for bf16 arrays

            return np.dtype(getattr(ml_dtypes, self.ml_dtypes))
        raise InvalidArgument(
            f"format {self.name!r} is a compute format only: no array holds it; store "
            "'fp32' and claim the compute format in the precision model")

    def torch_dtype(self) -> Any:
        """The ``torch.dtype`` of this format.

        Raises
        ------
        InvalidArgument
            For a format torch has no dtype for (tf32).
        """
        if self.torch is None:
            raise InvalidArgument(f"format {self.name!r} has no torch dtype; use one of "
                                  f"{[f.name for f in FORMATS.values() if f.torch]}")
        import torch  # noqa: PLC0415 - torch only where a torch dtype is asked for

        return getattr(torch, self.torch)

    def __str__(self) -> str:
        return self.name

    __hash__ = KeptHash.__hash__  # (a dataclass's own: else the generated one replaces it)


FP64 = Format("fp64", 52, -1022, 1023, numpy="float64", torch="float64", cupy="float64")
FP32 = Format("fp32", 23, -126, 127, numpy="float32", torch="float32", cupy="float32")
TF32 = Format("tf32", 10, -126, 127)
BF16 = Format("bf16", 7, -126, 127, torch="bfloat16", ml_dtypes="bfloat16")
FP16 = Format("fp16", 10, -14, 15, numpy="float16", torch="float16", cupy="float16")

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
_NATIVE: dict[Format, Any] = {f: np.dtype(f.numpy) for f in (FP32, FP16)}


def format_of(dtype: Any) -> Format:
    """The format of a dtype or a name in any library: ``"fp32"``, ``"float32"``,
    ``torch.bfloat16``, ``np.float16``, an ml_dtypes or CuPy dtype.

    Examples
    --------
    >>> format_of("bfloat16").name, format_of(np.float32).name
    ('bf16', 'fp32')
    """
    if isinstance(dtype, Format):
        return dtype
    if isinstance(dtype, str) and dtype in FORMATS:
        return FORMATS[dtype]
    key = str(dtype).removeprefix("torch.")
    if not isinstance(dtype, str):
        try:
            key = np.dtype(dtype).name
        except TypeError:
            pass
    for f in FORMATS.values():
        if key in (f.numpy, f.torch, f.cupy, f.ml_dtypes):
            return f
    raise InvalidArgument(
        f"dtype {dtype!r} is not a floating-point format numoracle knows; use one of "
        f"{sorted(FORMATS)} or their dtypes (float64, float32, float16, bfloat16)")


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
    if is_torch(xp) and fmt.emin - fmt.t >= _FP64_EMIN:
        return xp.from_tensor(_quantize_tensor(xp.tensor(x), fmt, rounding))
    return _quantize_general(x, fmt, rounding, xp)


#: the least exponent of a normal float64
_FP64_EMIN = -1022
#: the exponent field of a float64's bits
_EXPONENT_FIELD = 0x7FF << 52


def _quantize_tensor(x: Any, fmt: Format, rounding: str) -> Any:
    """:func:`_quantize_general` on a float64 tensor in a dozen tensor operations, the
    same bits: the quantum ``2^(max(exp, emin) - t)`` (``exp`` the unbiased exponent of
    a normal value; a subnormal's lies below every ``emin``, a zero's quantum is any
    power of two: ``±0`` either way) made from the value's exponent field, where the
    general path makes it by ``frexp`` and ``ldexp`` (thirty operations in torch). The
    format's least quantum ``2^(emin - t)`` must be a normal float64."""
    import torch  # noqa: PLC0415 - only with torch's tensors

    field = x.view(torch.int64) & _EXPONENT_FIELD
    quantum = (field.clamp(min=(fmt.emin - _FP64_EMIN + 1) << 52) - (fmt.t << 52)
               ).view(torch.float64)
    scaled = x / quantum  # exact: division by a power of two, no underflow
    r = torch.round(scaled) if rounding == "rne" else torch.trunc(scaled)
    y = r * quantum
    if rounding == "rne":  # (beyond the largest finite value: infinite, with its sign)
        y = torch.where(y.abs() > fmt.max, y * math.inf, y)
    else:  # (to the largest finite value)
        y = y.clamp(-fmt.max, fmt.max)
    return torch.where(x.abs() < math.inf, y, x)  # (x finite; NaN compares false)


def _quantize_general(x: Any, fmt: Format, rounding: str, xp: Any) -> Any:
    """:func:`quantize` for any format and rounding, by scaling to the format's
    quantum at each value's exponent (NumPy or CuPy float64 ``x``)."""
    with np.errstate(invalid="ignore", over="ignore"):
        _, e = xp.frexp(x)  # |x| = m * 2**e, m in [0.5, 1)
        exp = xp.maximum(e.astype(xp.int64) - 1, fmt.emin)
        quantum = xp.ldexp(filled(xp, (), 1.0, x), (exp - fmt.t).astype(xp.int32))
        scaled = x / quantum  # exact: division by a power of two, no underflow
        r = xp.rint(scaled) if rounding == "rne" else xp.trunc(scaled)
        y = r * quantum
        big = xp.abs(y) > fmt.max
        if not reads_are_free(xp) or bool(xp.any(big)):  # (a device: no read, one pass)
            y = xp.where(big, xp.copysign(np.inf if rounding == "rne" else fmt.max, x), y)
        y = xp.where(xp.isfinite(x), y, x)
    return y


def representable(x: np.ndarray, fmt: Format | str) -> np.ndarray:
    """True where ``x`` is exactly a value of ``fmt`` (NaN counts as representable)."""
    xp = array_module(x)
    x = xp.asarray(x, dtype=xp.float64)
    flat = x.reshape(-1)
    out = xp.empty_like(flat, dtype=bool)  # (where x is: torch's device too)
    step = chunk_size(xp)
    for lo in range(0, flat.size, step):  # chunks keep the temporaries small
        part = flat[lo:lo + step]
        out[lo:lo + step] = (quantize(part, fmt) == part) | xp.isnan(part)
    return out.reshape(x.shape)
