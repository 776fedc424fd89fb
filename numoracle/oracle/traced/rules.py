"""The rule table of the traced oracle: one bound rule per ATen primitive.

A rule is a function ``fn(ctx, *args, **kwargs)`` registered under the names of
the ATen overloads it serves (``"aten.mm.default"``, the ``str()`` of the
``torch._ops.OpOverload`` an fx node calls). The interpreter hands it the node's
arguments with every floating-point tensor as a
:class:`~numoracle.oracle.tracked.Tracked` array (exact value and radii), every
integer or boolean tensor as a NumPy array (exact by nature: indices, masks),
and every other argument (ints, floats, lists, dtypes, ``None``) unchanged. It
returns what the ATen op returns, in the same kinds: a ``Tracked``, a NumPy
array, or a tuple of them.

``ctx`` carries the precision model the kernel claims (formats, order,
algorithms) and the :class:`Claims` no format names: the ulp accuracy of each
transcendental, one-pass or two-pass variance, and whether low-precision
intermediates are rounded after every op (eager) or kept in the accumulation
format (fused).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from ...errors import InvalidArgument
from ..precision import PrecisionModel
from ..tracked import Tracked, store
from ..xp import as_namespace

__all__ = ["RULES", "Claims", "NoRule", "RuleContext", "Rule", "rule", "lookup"]

#: VARIANCE: how a normalisation computes its variance
VARIANCES = ("two-pass", "one-pass")
#: ROUNDING: where low-precision intermediates are rounded to the storage format
ROUNDINGS = ("per-op", "fused")
#: MASKED_ROWS: what a softmax gives on a row whose every entry is -inf
MASKED_ROWS = ("nan", "zero")


@dataclass(frozen=True)
class Claims:
    """What a kernel claims beyond its formats.

    Parameters
    ----------
    ulps
        Maximum error of each transcendental, in ulps of the accumulation
        format, by name (``{"exp": 2.0, "tanh": 2.0}``); a name not given takes
        the default of :data:`numoracle.oracle.elementwise.ULPS` (CUDA's
        precise maths library).
    variance
        ``"two-pass"`` (mean first, then squared deviations) or ``"one-pass"``
        (``E[x²] − E[x]²``, which cancels).
    rounding
        ``"per-op"``: every intermediate rounded to the storage format, as
        eager torch does in bf16/fp16; ``"fused"``: intermediates kept in the
        accumulation format, rounded once at each output.
    masked_rows
        What the kernel's softmax gives on a row whose every entry is ``-inf``
        (a fully masked attention row): ``"nan"`` (``0 / 0``, as
        ``torch.softmax`` gives), ``"zero"`` (as ``F.scaled_dot_product_attention``
        and FlashAttention give), or None (default): what the reference's own op
        gives there.
    """

    ulps: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    variance: str = "two-pass"
    rounding: str = "per-op"
    masked_rows: str | None = None

    def __post_init__(self) -> None:
        if self.masked_rows is not None and self.masked_rows not in MASKED_ROWS:
            raise InvalidArgument(f"masked_rows={self.masked_rows!r} is unknown; use one of "
                                  f"{MASKED_ROWS} or None (the reference's own convention)")
        if self.variance not in VARIANCES:
            raise InvalidArgument(f"variance={self.variance!r} is unknown; use one of {VARIANCES}")
        if self.rounding not in ROUNDINGS:
            raise InvalidArgument(f"rounding={self.rounding!r} is unknown; use one of {ROUNDINGS}")
        for name, u in self.ulps.items():
            if not isinstance(u, (int, float)) or u < 0:
                raise InvalidArgument(f"ulps[{name!r}]={u!r} must be a non-negative number")
        object.__setattr__(self, "ulps", MappingProxyType(dict(self.ulps)))


@dataclass(frozen=True)
class RuleContext:
    """What every rule is evaluated under: the claimed model and claims, and the
    array namespace (NumPy, CuPy or torch's; :mod:`~numoracle.oracle.xp`) with its
    device, where a rule makes arrays from nothing (a factory, a constant)."""

    model: PrecisionModel
    claims: Claims = field(default_factory=Claims)
    xp: Any = field(default=np, compare=False)
    device: Any = field(default=None, compare=False)

    def array(self, a: Any) -> Any:
        """``a`` (a host array, a number) as an array of the context's namespace."""
        return as_namespace(a, self.xp, self.device)

    def ulps(self, name: str) -> float | None:
        """The claimed ulps of transcendental ``name`` (None: the library default)."""
        return self.claims.ulps.get(name)

    def stores_per_op(self) -> bool:
        """Whether every op's results are rounded to the storage format: the
        per-op policy, where storage is narrower than accumulation. A rule
        whose eager implementation computes from such rounded results of its
        own (the saved statistics of a normalisation, say) rounds them too."""
        return (self.claims.rounding == "per-op"
                and self.model.storage.t < self.model.accumulate.t)

    def running_model(self) -> PrecisionModel:
        """The model a running value is rounded in: a prefix scan's (``cumsum``,
        ``cumprod``), a gradient accumulated window by window into its tensor
        (pooling's backward). Under the per-op claim the storage format, as
        eager torch keeps such values in the tensor's dtype (its CUDA scans,
        its CPU window backwards); the accumulation format otherwise."""
        if not self.stores_per_op():
            return self.model
        return self.model.with_(accumulate=self.model.storage)

    def kept(self, t: Tracked, times: int = 1) -> Tracked:
        """``t`` rounded ``times`` times to the storage format where every op's
        results are (:meth:`stores_per_op`): an intermediate that the eager
        implementation of an op keeps as a tensor of the storage dtype."""
        for _ in range(times if self.stores_per_op() else 0):
            t = store(t, self.model)
        return t


Rule = Callable[..., Any]

#: the rules by ATen overload name
RULES: dict[str, Rule] = {}


class NoRule(InvalidArgument):
    """The reference calls an ATen op that has no bound rule: the case is
    refused by name, never approximated."""


def rule(*names: str) -> Callable[[Rule], Rule]:
    """Register the decorated function as the rule of each ATen overload in ``names``.

    Raises
    ------
    InvalidArgument
        If a name is registered twice.
    """
    def register(fn: Rule) -> Rule:
        for name in names:
            if name in RULES and RULES[name] is not fn:
                raise InvalidArgument(f"a rule for {name} is defined twice "
                                      f"({RULES[name].__module__} and {fn.__module__})")
            RULES[name] = fn
        return fn
    return register


def lookup(target: Any) -> Rule:
    """The rule for ``target`` (an ``OpOverload`` or its name), or :class:`NoRule`."""
    name = str(target)
    try:
        return RULES[name]
    except KeyError:
        raise NoRule(f"no rule for {name}: the traced oracle bounds only ATen ops it has "
                     f"rules for; rewrite the reference without it, or add a rule "
                     f"(numoracle.oracle.traced.rules.rule)") from None
