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

``ctx`` carries the precision model the kernel claims: formats, order,
algorithms, and the claims no format names (:func:`Claims`): the elementwise
accuracy profile and the ulps of each transcendental, one-pass or two-pass
variance, and whether low-precision intermediates are rounded after every op
(eager) or kept in the accumulation format (fused).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from ...errors import InvalidArgument
from ..accuracy import Ulps
from ..precision import PrecisionModel, claims, get_model
from ..tracked import Tracked, store
from ..xp import as_namespace

__all__ = ["MOVES", "RULES", "IN_PART", "Call", "Claims", "NoRule", "RuleContext", "Rule",
           "rule", "lookup", "moves", "reads_in_part"]

#: the traced oracle's name for :func:`numoracle.oracle.precision.claims`: claims
#: beyond the formats (ulps, variance, per-op or fused rounding, accuracy profile)
#: as changes to the precision model, e.g. ``Claims(rounding="fused")``
Claims = claims


@dataclass(frozen=True)
class RuleContext:
    """What every rule is evaluated under: the claimed precision model, with
    ``claims`` (changes from :func:`Claims`) applied to it at construction, and the
    array namespace (NumPy, CuPy or torch's; :mod:`~numoracle.oracle.xp`) with its
    device, where a rule makes arrays from nothing (a factory, a constant)."""

    model: PrecisionModel
    claims: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    xp: Any = field(default=np, compare=False)
    device: Any = field(default=None, compare=False)

    def array(self, a: Any) -> Any:
        """``a`` (a host array, a number) as an array of the context's namespace."""
        return as_namespace(a, self.xp, self.device)

    def __post_init__(self) -> None:
        if self.claims is None:
            object.__setattr__(self, "claims", MappingProxyType({}))
        if not isinstance(self.claims, Mapping):
            raise InvalidArgument(f"claims={self.claims!r} must be a mapping from "
                                  "numoracle.oracle.traced.Claims(...)")
        if self.claims:
            object.__setattr__(self, "model", get_model(self.model, **self.claims))

    def ulps(self, name: str, default: float | Ulps | None = None) -> float | Ulps | None:
        """The claimed error of elementwise function ``name`` (per-function claim,
        else the accuracy profile's, else ``default`` with the profile's excess)."""
        return self.model.error_of(name, default)

    def stores_per_op(self) -> bool:
        """Whether every op's results are rounded to the storage format: the
        per-op policy, where storage is narrower than accumulation. A rule
        whose eager implementation computes from such rounded results of its
        own (the saved statistics of a normalisation, say) rounds them too."""
        return (self.model.rounding == "per-op"
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
#: the ATen overloads whose every result element is an element of a tensor operand, as
#: it is (views, copies, permutations, slices, joins, gathers): they round nothing
MOVES: set[str] = set()


#: (producer, reader) ATen overload names -> a rule for the reader that takes, in place
#: of its first operand, the call of the producer whose one reader it is
#: (:func:`reads_in_part`)
IN_PART: dict[tuple[str, str], Rule] = {}


class NoRule(InvalidArgument):
    """The reference calls an ATen op that has no bound rule: the case is
    refused by name, never approximated."""


def rule(*names: str, moves: bool = False) -> Callable[[Rule], Rule]:
    """Register the decorated function as the rule of each ATen overload in ``names``;
    ``moves``: each of them only moves its operand's elements (:data:`MOVES`), so the
    per-op rounding to storage, which its operand has had, is not applied again.

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
            if moves:
                MOVES.add(name)
        return fn
    return register


def reads_in_part(producer: str, reader: str) -> Callable[[Rule], Rule]:
    """Register the decorated function as the rule of ``reader`` where its first operand
    is the result of ``producer`` and nothing else reads that result (not an output):
    a reader of a few of its elements, computed alone. It is called as ``fn(ctx, call,
    *reader_args, **reader_kwargs)``, ``call`` the producer's :class:`Call`, and gives
    the reader's results with the bits of the producer's rule followed by the reader's,
    or None (then both run as they are)."""
    def register(fn: Rule) -> Rule:
        IN_PART[(producer, reader)] = fn
        return fn
    return register


class Call:
    """A producer's call that :func:`reads_in_part`'s rule evaluates in part: its
    arguments, and ``finish``, the interpreter's rounding of the producer's results
    under the claimed policy (applied to each element the same whatever the others)."""

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                 finish: Callable[[Any], Any]) -> None:
        self.args, self.kwargs, self.finish = args, kwargs, finish


def moves(target: Any) -> bool:
    """Whether the ATen op ``target`` (an ``OpOverload`` or its name) only moves its
    operand's elements (:data:`MOVES`): its results hold values an earlier op computed,
    already rounded as that op's results, or the graph's inputs and constants."""
    return str(target) in MOVES


def lookup(target: Any) -> Rule:
    """The rule for ``target`` (an ``OpOverload`` or its name), or :class:`NoRule`."""
    name = str(target)
    try:
        return RULES[name]
    except KeyError:
        raise NoRule(f"no rule for {name}: the traced oracle bounds only ATen ops it has "
                     f"rules for; rewrite the reference without it, or add a rule "
                     f"(numoracle.oracle.traced.rules.rule)") from None
