"""Elementwise accuracy profiles: how accurately a kernel's maths library and
its division evaluate each elementwise function.

A precision model names one profile (:attr:`~numoracle.oracle.precision.PrecisionModel.accuracy`);
every elementwise primitive of the error-tracking arithmetic asks it for the
error of the function it evaluates (:func:`numoracle.oracle.elementwise.elementary`,
:func:`~numoracle.oracle.elementwise.div`). An error is an :class:`Ulps`:
``ulps + per_x |x|`` units in the last place of the result (in the accumulation
format) plus ``of_one`` units in the last place of 1 (an absolute error, as
fast logarithms have near 1).

The profiles:

``ieee``
    Correctly rounded ``+ - * / sqrt`` (``sqrt`` charged 1 ulp for
    ``rsqrt``-based paths), transcendentals within the CUDA maths library's
    documented maximum errors (``expf`` 2 ulps, ``logf`` 1, ``tanhf`` 2, ...):
    the defaults of :data:`numoracle.oracle.elementwise.ULPS` and the traced
    rules' table.
``cuda-fast``
    What ``--use_fast_math`` compiles to, with the CUDA C Programming Guide's
    figures for the intrinsics: ``x / y`` as ``__fdividef`` (2 ulps),
    ``expf`` as ``__expf`` (``2 + floor(1.173 |x|)`` ulps), ``logf`` as
    ``__logf`` (2^-21.41 absolute in [0.5, 2], else 3 ulps), ``log2f`` as
    ``__log2f`` (2^-22 absolute, else 2 ulps), ``sqrtf`` approximate (1 ulp),
    ``rsqrtf`` 2 ulps; subnormals flushed (``-ftz=true``).
``triton``
    What Triton 3.x emits by default for fp32: ``/`` as ``div.full.f32``
    (2 ulps), ``exp`` as ``ex2.approx`` of ``x log2(e)`` (the ``__expf``
    sequence), ``log`` as ``lg2.approx`` times ``ln 2`` (the ``__logf``
    sequence), ``exp2``/``log2`` approximate, ``rsqrt`` as ``rsqrt.approx``,
    ``sqrt`` approximate.
``torch-cpu``
    What torch's CPU kernels compute in fp32 (ATen's vectorised paths): the
    ``ieee`` figures, except ``erf`` inside GELU and its backward, evaluated by
    the polynomial of Abramowitz & Stegun 7.1.26 (``1 - r(t) t exp(-x^2)``,
    ``t = 1 / (1 + p |x|)``, ``r`` of degree 4 by Horner's rule with fused
    multiply-adds): an *absolute* error, the approximation's ``1.5e-7``
    (1.26 ulp(1) in fp32) plus the rounding of its fp32 evaluation (at most
    6.53 ulp(1), largest near ``x = 0`` where the terms of ``r`` are 4.5 times
    its value): ``erf`` 2 ulps + 8 ulp(1), and the GELU built on it (``x/2
    (1 + erf(x/sqrt 2))``, relative to ``|x|``) 4 ulps more than ``ieee``'s.
    ``torch.erf`` itself is more accurate; the claim covers both.
``wgsl``
    The WGSL specification's f32 accuracy (§15.7.4.1): ``x / y`` 2.5 ulps,
    ``exp``/``exp2`` ``3 + 2 |x|`` ulps, ``log``/``log2`` 3 ulps (2^-21
    absolute in [0.5, 2]), ``inverseSqrt`` 2 ulps, ``sqrt`` inherited from
    ``1.0 / inverseSqrt(x)`` (4.5 ulps); subnormals may be flushed. The
    ``wgsl`` model adds WGSL's unspecified rounding mode (either neighbour).

A function a profile does not name (a composite such as ``sigmoid`` or
``gelu_tanh``, evaluated through the functions it does name) takes its
``ieee`` default plus the profile's :attr:`Profile.extra`: the larger error of
the fast ``exp`` and division it is built from. The fast logarithm's absolute
error (``of_one``) is added only to the composites evaluated through a
logarithm (:data:`THROUGH_LOG`: ``pow``, ``log1p``, ...); ``sigmoid``, ``silu``,
``tanh``, ``erf``, GELU are made of exponentials, divisions and products, whose
errors are relative.

Adding a profile is one entry: ``register(Profile("name", "what it is",
{"div": Ulps(2.0), ...}))``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..errors import InvalidArgument

__all__ = ["Ulps", "Profile", "PROFILES", "register", "get_profile", "ulps_at", "IEEE",
           "CUDA_FAST", "TRITON", "WGSL", "TORCH_CPU", "THROUGH_LOG"]

#: the composites a maths library evaluates through a logarithm: they take the fast
#: logarithm's absolute error (:attr:`Ulps.of_one`) with a profile's extra
THROUGH_LOG = frozenset({"pow", "log1p", "log10", "softplus", "log_sigmoid", "logit",
                         "asinh", "acosh", "atanh", "xlogy", "lgamma", "digamma"})


@dataclass(frozen=True)
class Ulps:
    """A maximum elementwise error: ``ulps + per_x |x|`` ulps of the result plus
    ``of_one`` ulps of 1 (absolute).

    Examples
    --------
    >>> Ulps(2.0, per_x=1.173).at(10.0)
    13.73
    """

    ulps: float
    per_x: float = 0.0
    of_one: float = 0.0

    def __post_init__(self) -> None:
        for name in ("ulps", "per_x", "of_one"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
                    math.isfinite(v) and v >= 0):
                raise InvalidArgument(f"Ulps: {name}={v!r} must be a finite number >= 0")

    def at(self, x_abs: Any) -> Any:
        """The relative part ``ulps + per_x |x|`` at argument magnitude ``x_abs``."""
        return self.ulps + self.per_x * x_abs if self.per_x else self.ulps

    def plus(self, other: Ulps) -> Ulps:
        """The error of a composition: both errors added."""
        return Ulps(self.ulps + other.ulps, self.per_x + other.per_x,
                    self.of_one + other.of_one)

    def __str__(self) -> str:
        s = f"{self.ulps:g}"
        if self.per_x:
            s += f" + {self.per_x:g}|x|"
        s += " ulp"
        if self.of_one:
            s += f" + {self.of_one:g} ulp(1)"
        return s


def ulps_at(err: float | Ulps, x_abs: Any) -> Any:
    """The relative part of an error, in ulps, at argument magnitude ``x_abs``: a
    plain number as it is, an :class:`Ulps` by :meth:`Ulps.at`."""
    return err.at(x_abs) if isinstance(err, Ulps) else err


@dataclass(frozen=True)
class Profile:
    """A named set of elementwise errors.

    Parameters
    ----------
    name : str
        What a claim calls it (``"triton"``).
    description : str
        One line: what compiles to what.
    ulps : mapping of str to Ulps
        The error of each function it changes (``"div"``, ``"exp"``, ...).
    extra : Ulps
        Added to the ``ieee`` default of every function not in ``ulps`` (its
        ``of_one`` part only to those in :data:`THROUGH_LOG`).
    flushes_subnormals : bool
        Whether subnormal operands and results are flushed to zero.
    """

    name: str
    description: str
    ulps: Mapping[str, Ulps] = field(default_factory=lambda: MappingProxyType({}))
    extra: Ulps = Ulps(0.0)
    flushes_subnormals: bool = False

    def __post_init__(self) -> None:
        for k, v in self.ulps.items():
            if not isinstance(v, Ulps):
                raise InvalidArgument(f"profile {self.name!r}: ulps[{k!r}]={v!r} must be an "
                                      "Ulps, e.g. Ulps(2.0)")
        object.__setattr__(self, "ulps", MappingProxyType(dict(self.ulps)))

    def error(self, name: str, default: float | Ulps | None) -> float | Ulps | None:
        """The error of function ``name``: the profile's own figure, else ``default``
        (the ``ieee`` one) plus :attr:`extra` (its absolute part only for a
        function in :data:`THROUGH_LOG`); None where neither is known."""
        if name in self.ulps:
            return self.ulps[name]
        if default is None or self.extra == Ulps(0.0):
            return default
        base = default if isinstance(default, Ulps) else Ulps(float(default))
        extra = self.extra if name in THROUGH_LOG else Ulps(self.extra.ulps, self.extra.per_x)
        return base.plus(extra)

    def __str__(self) -> str:
        return self.name


#: __expf and ex2.approx of x log2(e): 2 + floor(1.173 |x|) ulps
_FAST_EXP = Ulps(2.0, per_x=1.173)
#: __logf and lg2.approx times ln 2: 2^-21.41 absolute on [0.5, 2] (3.01 ulp(1)), else 3 ulps
_FAST_LOG = Ulps(3.0, of_one=3.02)
#: __log2f and lg2.approx: 2^-22 absolute on [0.5, 2] (2 ulp(1)), else 2 ulps
_FAST_LOG2 = Ulps(2.0, of_one=2.0)
#: __fdividef and div.full.f32: 2 ulps
_FAST_DIV = Ulps(2.0)
#: a composite through the fast exp and one fast division: their excess over the
#: precise ones (exp: 1.173 |x| more, division 1.5 more), plus the fast log's absolute error
#: (for the composites through a logarithm, THROUGH_LOG)
_FAST_EXTRA = Ulps(1.5, per_x=1.173, of_one=3.02)

IEEE = Profile("ieee", "correctly rounded + - * / sqrt; libm within its documented ulps")
CUDA_FAST = Profile(
    "cuda-fast", "--use_fast_math: __fdividef, __expf, __logf, __log2f, approximate sqrt, "
    "flushed subnormals",
    {"div": _FAST_DIV, "exp": _FAST_EXP, "exp2": Ulps(2.0), "log": _FAST_LOG,
     "log2": _FAST_LOG2, "sqrt": Ulps(1.0), "rsqrt": Ulps(2.0)},
    extra=_FAST_EXTRA, flushes_subnormals=True)
TRITON = Profile(
    "triton", "Triton's fp32 defaults: div.full.f32, ex2.approx for exp, lg2.approx for "
    "log, rsqrt.approx, approximate sqrt",
    {"div": _FAST_DIV, "exp": _FAST_EXP, "exp2": Ulps(2.0), "log": _FAST_LOG,
     "log2": _FAST_LOG2, "sqrt": Ulps(1.0), "rsqrt": Ulps(2.0)},
    extra=_FAST_EXTRA)

#: WGSL §15.7.4.1, f32: 2^-21 absolute is 4 ulps of 1; a composite through exp and a
#: division exceeds the ieee one by (3 + 2|x|) - 2 and 2.5 - 0.5 ulps
WGSL = Profile(
    "wgsl", "WGSL f32 (specification §15.7.4.1): x / y 2.5 ulp, exp 3 + 2|x| ulp, log 3 ulp "
    "or 2^-21 absolute, inverseSqrt 2 ulp, sqrt as 1 / inverseSqrt; subnormals flushed",
    {"div": Ulps(2.5), "exp": Ulps(3.0, per_x=2.0), "exp2": Ulps(3.0, per_x=2.0),
     "log": Ulps(3.0, of_one=4.0), "log2": Ulps(3.0, of_one=4.0), "rsqrt": Ulps(2.0),
     "sqrt": Ulps(4.5)},
    extra=Ulps(3.0, per_x=2.0, of_one=4.0), flushes_subnormals=True)

#: Abramowitz & Stegun 7.1.26 in fp32 (ATen's vectorised erf): 1.5e-7 absolute for the
#: approximation (1.26 ulp(1)) and at most 6.53 ulp(1) for its evaluation's roundings
#: (the running error of its Horner steps, the reciprocal, exp and the final fused
#: multiply-add, largest at x = 0), rounded up
_TORCH_CPU_ERF = Ulps(2.0, of_one=8.0)
TORCH_CPU = Profile(
    "torch-cpu", "torch's CPU kernels: erf inside GELU and its backward by a polynomial "
    "(Abramowitz & Stegun 7.1.26) with an absolute error of 8 ulp(1); else ieee",
    # gelu = x/2 (1 + erf(x/sqrt 2)): erf's 8 ulp(1) times |x|/2 is 4 ulps of |x|
    {"erf": _TORCH_CPU_ERF, "gelu": Ulps(8.0)})

#: the profiles by name
PROFILES: dict[str, Profile] = {}


def register(profile: Profile) -> Profile:
    """Add ``profile`` to :data:`PROFILES` (a name registered twice is refused)."""
    if not isinstance(profile, Profile):
        raise InvalidArgument(f"register: {profile!r} must be a Profile")
    if profile.name in PROFILES and PROFILES[profile.name] != profile:
        raise InvalidArgument(f"an accuracy profile {profile.name!r} is registered already")
    PROFILES[profile.name] = profile
    return profile


for _p in (IEEE, CUDA_FAST, TRITON, WGSL, TORCH_CPU):
    register(_p)


def get_profile(name: str | Profile) -> Profile:
    """The profile called ``name``.

    Raises
    ------
    InvalidArgument
        For an unknown name.
    """
    if isinstance(name, Profile):
        return name
    try:
        return PROFILES[name]
    except (KeyError, TypeError):
        raise InvalidArgument(f"accuracy={name!r} is not an elementwise accuracy profile; use "
                              f"one of {sorted(PROFILES)}") from None
