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

The ``wgsl`` model (``get_model("wgsl")``) claims this: its elementwise
accuracy profile ``wgsl`` (:mod:`numoracle.oracle.accuracy`) carries the table's
ulps (division, ``exp``, ``log`` with its absolute part near 1, ``inverseSqrt``,
``sqrt``), which every primitive of the error-tracking arithmetic, the
hand-written ops' and the traced rules', asks for. The profile's ulps count two
units of the model's rounding each: under WGSL's either-neighbour rounding that
is two ulps, a claim looser than the table. Entries the profile leaves out
(absolute errors on a range: ``sin``, ``cos``; a division's undefined accuracy
outside its range) are listed in :data:`NOT_CLAIMED`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ...oracle.precision import PrecisionModel, get_model

__all__ = ["Accuracy", "WGSL_F32_ACCURACY", "WGSL_MODEL", "NOT_CLAIMED", "wgsl_model"]


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

#: entries of the table the ``wgsl`` profile does not carry, and why
NOT_CLAIMED: Mapping[str, str] = MappingProxyType({
    "div": "2.5 ulp is claimed; outside |y| in [2^-126, 2^126] the table defines no "
           "accuracy, and the claim stays 2.5 ulp there",
    "sin": "an absolute error on [-pi, pi], none defined outside",
    "cos": "an absolute error on [-pi, pi], none defined outside",
    "atan": "4096 ulp: no primitive of the arithmetic evaluates atan",
})

#: fp32 arrays and arithmetic; every rounding to either neighbour (one ulp); the
#: table's elementwise accuracy; subnormals flushed
WGSL_MODEL: PrecisionModel = get_model("wgsl")


def wgsl_model(**overrides: object) -> PrecisionModel:
    """The ``wgsl`` model, optionally with fields changed (``order="sequential"``)."""
    return get_model(WGSL_MODEL, **overrides)
