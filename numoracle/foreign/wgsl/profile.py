"""WGSL's floating-point semantics as a claim: the ``wgsl`` precision model and
the accuracy table of the WGSL specification for ``f32``.

What the specification allows (WebGPU Shading Language, §15.7 "Floating Point
Evaluation"; §15.7.4.1 "Accuracy of Concrete Floating Point Expressions"):

* **no rounding mode**: "an implementation may round an intermediate result up
  or down", so a correctly rounded ``+``, ``-``, ``*`` may return either
  neighbour of the exact result: one ulp, not half an ulp. The ``wgsl`` model
  therefore bounds every rounding of the accumulation format by ``2^-t`` (the
  bound of a truncating adder, ``accumulate_rounding="rz"``);
* **subnormals may be flushed**: "any inputs or outputs of operations ... may
  be flushed to zero": subnormal inputs carry their magnitude as radius
  (``flush_subnormal_inputs``), and every rounding of the oracle's arithmetic
  already allows the smallest normal number absolutely;
* **an accuracy per operation and built-in** (:data:`WGSL_F32_ACCURACY`):
  division 2.5 ulp where ``|y|`` lies in ``[2^-126, 2^126]``, ``exp``/``exp2``
  ``3 + 2|x|`` ulp, ``log``/``log2`` 3 ulp outside ``[0.5, 2]`` and absolute
  ``2^-21`` inside, ``inverseSqrt`` 2 ulp, ``sqrt`` inherited from
  ``1.0 / inverseSqrt(x)``, ``sin``/``cos`` absolute ``2^-11`` on ``[-pi, pi]``,
  the rest inherited from the expressions the table names.

:func:`wgsl_claims` turns the table into the per-function ulps of the traced
oracle's :class:`~numoracle.oracle.traced.rules.Claims` (in that mechanism's
units, which depend on the model's rounding). Entries whose allowance is not a
relative one (``log`` near 1, ``sin``, ``cos``) or that the oracle's
primitives have no slot for yet (division beyond the model's roundings) are
listed in :data:`NOT_CLAIMED` rather than approximated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ...errors import InvalidArgument
from ...oracle.precision import PrecisionModel, get_model
from ...oracle.traced.rules import Claims

__all__ = ["Accuracy", "WGSL_F32_ACCURACY", "WGSL_MODEL", "NOT_CLAIMED", "wgsl_model",
           "wgsl_claims", "true_ulps"]


@dataclass(frozen=True)
class Accuracy:
    """One row of the WGSL accuracy table for ``f32``.

    ``kind``: ``"correct"`` (correctly rounded, either neighbour), ``"ulp"``
    (``ulps`` units in the last place), ``"ulp_linear"`` (``ulps + slope |x|``
    ulp), ``"absolute"`` (``absolute`` error on ``domain``, ``ulps`` ulp
    outside it where ``ulps`` is not None), ``"inherited"`` (the accuracy of
    evaluating ``text``'s expression). ``domain`` is where the accuracy is
    defined (outside it the specification defines none).
    """

    kind: str
    text: str
    ulps: float | None = None
    slope: float = 0.0
    absolute: float | None = None
    domain: tuple[float, float] | None = None


_PI = math.pi
#: the f32 column of WGSL §15.7.4.1, by operation or built-in
WGSL_F32_ACCURACY: Mapping[str, Accuracy] = MappingProxyType({
    "add": Accuracy("correct", "Correctly rounded"),
    "sub": Accuracy("correct", "Correctly rounded"),
    "mul": Accuracy("correct", "Correctly rounded"),
    "div": Accuracy("ulp", "2.5 ULP for |y| in the range [2^-126, 2^126]", 2.5,
                    domain=(2.0**-126, 2.0**126)),
    "abs": Accuracy("correct", "Correctly rounded"),
    "min": Accuracy("correct", "Correctly rounded (either input if both are subnormal)"),
    "max": Accuracy("correct", "Correctly rounded (either input if both are subnormal)"),
    "fma": Accuracy("inherited", "Inherited from x * y + z"),
    "inverseSqrt": Accuracy("ulp", "2 ULP", 2.0),
    "sqrt": Accuracy("inherited", "Inherited from 1.0 / inverseSqrt(x)"),
    "exp": Accuracy("ulp_linear", "3 + 2 * |x| ULP", 3.0, slope=2.0),
    "exp2": Accuracy("ulp_linear", "3 + 2 * |x| ULP", 3.0, slope=2.0),
    "log": Accuracy("absolute", "Absolute error at most 2^-21 when x is in [0.5, 2.0]; "
                    "3 ULP outside", 3.0, absolute=2.0**-21, domain=(0.5, 2.0)),
    "log2": Accuracy("absolute", "Absolute error at most 2^-21 when x is in [0.5, 2.0]; "
                     "3 ULP outside", 3.0, absolute=2.0**-21, domain=(0.5, 2.0)),
    "pow": Accuracy("inherited", "Inherited from exp2(y * log2(x))"),
    "sin": Accuracy("absolute", "Absolute error at most 2^-11 when x is in [-pi, pi]",
                    absolute=2.0**-11, domain=(-_PI, _PI)),
    "cos": Accuracy("absolute", "Absolute error at most 2^-11 when x is in [-pi, pi]",
                    absolute=2.0**-11, domain=(-_PI, _PI)),
    "tanh": Accuracy("inherited", "Inherited from sinh(x) / cosh(x)"),
    "atan": Accuracy("ulp", "4096 ULP", 4096.0),
    "mix": Accuracy("inherited", "Inherited from x * (1.0 - z) + y * z"),
})

#: entries of the table the traced claims do not carry, and why
NOT_CLAIMED: Mapping[str, str] = MappingProxyType({
    "div": "the oracle's division is one rounding of the model (one ulp under wgsl), "
           "the table allows 2.5 ulp: a shader whose division uses the whole allowance "
           "may fail until division accuracy is a claim",
    "log": "an absolute 2^-21 near x = 1 (where log is 0) is no relative error",
    "log2": "an absolute 2^-21 near x = 1 (where log2 is 0) is no relative error",
    "sin": "an absolute error on [-pi, pi], none defined outside",
    "cos": "an absolute error on [-pi, pi], none defined outside",
})

#: fp32 arrays and arithmetic; every rounding either neighbour (one ulp); subnormals flushed
WGSL_MODEL: PrecisionModel = get_model("fp32").with_(
    name="wgsl", accumulate_rounding="rz", flush_subnormal_inputs=True)


def wgsl_model(**overrides: object) -> PrecisionModel:
    """The ``wgsl`` model, optionally with fields changed (``order="sequential"``)."""
    return get_model(WGSL_MODEL, **overrides)


def true_ulps(name: str, x_max: float) -> float:
    """The largest error, in ulps of the result, the table allows ``name`` for
    arguments with ``|x| <= x_max`` (compositions for inherited entries)."""
    row = WGSL_F32_ACCURACY.get(name)
    if name == "sqrt":  # 1.0 / inverseSqrt(x): 2 ulp, then a 2.5-ulp division
        return 2.0 + 2.5 + 2.0 * 2.5 * 2.0**-23
    if row is None or row.ulps is None or row.kind not in ("ulp", "ulp_linear"):
        raise InvalidArgument(f"{name=}: the WGSL table gives it no error in ulps "
                              f"({row.text if row else 'not in the table'}); ulps exist for "
                              f"{sorted(k for k, r in WGSL_F32_ACCURACY.items() if r.ulps)}")
    return row.ulps + row.slope * float(x_max)


def wgsl_claims(model: PrecisionModel = WGSL_MODEL, *, x_max: float = 16.0) -> Claims:
    """The traced oracle's claims for a WGSL shader under ``model``: ``exp``
    ``3 + 2 x_max`` ulp (arguments up to ``x_max`` in magnitude), ``rsqrt`` 2,
    ``sqrt`` 4.5, and the compositions a shader writes from them (``sigmoid``
    and ``silu`` as ``1 / (1 + exp(-x))`` and ``x / (1 + exp(-x))``: the
    ``exp`` error, an addition and a 2.5-ulp division), converted to the units
    of the oracle's elementwise primitives (which count ``2 u`` of ``model``'s
    accumulation format per ulp)."""
    if not (isinstance(x_max, (int, float)) and math.isfinite(x_max) and x_max >= 0):
        raise InvalidArgument(f"{x_max=} must be a finite number >= 0: the largest |x| the "
                              "shader's exp is evaluated at")
    unit = 2.0 ** -model.accumulate.t  # one ulp, relative to the result

    def units(ulps: float) -> float:
        return ulps * unit / (2.0 * model.acc_unit())

    e = true_ulps("exp", x_max)
    return Claims(ulps={
        "exp": units(e),
        "rsqrt": units(true_ulps("inverseSqrt", x_max)),
        "sqrt": units(true_ulps("sqrt", x_max)),
        "sigmoid": units(e + 1.0 + 2.5),
        "silu": units(e + 1.0 + 2.5),
        "silu_grad": units(e + 1.0 + 2.5 + 3.0),
    })
