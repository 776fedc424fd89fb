"""Shape plans: how an op's parameters are drawn, as plain data beside the op.

An op lists its parameters as specs in draw order (flags and batch shapes first:
they change the budget of the dimensions) in its class attribute ``plan``; the
case strategy (:func:`numoracle.strategies.cases`) interprets the specs, drawing
each within what the size limits leave given the parameters drawn so far, and
shrinking each towards its ``smallest`` value. An op without a plan has every
parameter drawn as a :class:`Dim`. An op may give a second plan,
``realistic_plan``, for the shapes of real layers (the ``realistic`` regime:
:data:`REGIMES`); it shrinks as the small plan does, towards its smallest
layer.

Nothing here draws: these are descriptions, so the oracle needs no Hypothesis.

Examples
--------
>>> from numoracle.oracle.ops import get_op
>>> [spec.name for spec in get_op("linear").plan]
['bias', 'batch', 'in_features', 'out_features']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Dim", "Flag", "Shape", "Multiple", "Pair", "Choice", "Widths", "Derived", "Spec",
           "smallest", "REGIMES"]

Params = dict[str, Any]

#: the size regimes an op's plans describe: ``small`` (the default: cheap cases,
#: about a hundred a second on a CPU) and ``realistic`` (the shapes practitioners
#: train at, where libraries switch algorithms; for GPUs)
REGIMES = ("small", "realistic")


@dataclass(frozen=True)
class Dim:
    """A positive dimension, at most ``max_value`` (None: the limits' largest
    dimension) and within the limits; ``is_batch`` marks the op's batch (drawn
    from batch sizes, and what ``cases(batch=...)`` fixes)."""

    name: str
    max_value: int | None = None
    is_batch: bool = False
    smallest: Any = 1


@dataclass(frozen=True)
class Flag:
    """A boolean parameter; shrinks towards False, True only where it fits."""

    name: str
    smallest: Any = False


@dataclass(frozen=True)
class Shape:
    """A tuple of up to ``max_len`` dimensions of at most ``max_entry`` each
    (batch dimensions); shrinks towards ``()``."""

    name: str
    max_len: int = 2
    max_entry: int = 4
    smallest: Any = ()


@dataclass(frozen=True)
class Multiple:
    """A positive multiple of the parameter ``of`` (drawn first), at most
    ``max_value``: ``of * k`` with ``k`` shrinking towards 1 (a convolution's
    channels, a multiple of its groups); with ``factors``, ``k`` is one of
    them (those that fit), shrinking towards the first (an attention's query
    heads, 1, 2, 4 or 8 times its key/value heads)."""

    name: str
    of: str
    max_value: int
    smallest: Any = 1
    factors: tuple[int, ...] = ()

    def least(self, params: Mapping[str, Any]) -> Any:
        """With ``factors``: ``of`` times the first (the value follows its base,
        as a reference that needs the multiple takes no other); else
        :attr:`smallest`."""
        return int(params[self.of]) * self.factors[0] if self.factors else self.smallest


@dataclass(frozen=True)
class Pair:
    """A pair of ints in ``[min_value, max_value]`` (a convolution's kernel size,
    stride, padding, dilation), each within ``cap(params, axis)`` where given;
    shrinks towards ``(min_value, min_value)``."""

    name: str
    min_value: int
    max_value: int
    cap: Callable[[Params, int], int] | None = None

    @property
    def smallest(self) -> tuple[int, int]:
        return (self.min_value, self.min_value)


@dataclass(frozen=True)
class Choice:
    """One of ``options`` (hyperparameters, modes), shrinking towards the first;
    drawn only where ``when(params)`` holds for the parameters drawn so far,
    else the first option."""

    name: str
    options: tuple[Any, ...]
    when: Callable[[Params], bool] | None = None

    @property
    def smallest(self) -> Any:
        return self.options[0]


@dataclass(frozen=True)
class Widths:
    """``params[count] + 1`` positive dimensions (the feature counts of a chain of
    layers: input, then each layer's output), each at most ``max_entry``;
    shrinks towards all ones."""

    name: str
    count: str
    max_entry: int = 8

    def least(self, params: Mapping[str, Any]) -> tuple[int, ...]:
        """All ones, one per layer and one more."""
        return (1,) * (int(params[self.count]) + 1)


@dataclass(frozen=True)
class Derived:
    """A parameter that follows those drawn before it, not drawn itself
    (``padding = kernel // 2`` as networks use it; a square map's width)."""

    name: str
    rule: Callable[[Mapping[str, Any]], Any]

    def least(self, params: Mapping[str, Any]) -> Any:
        """The value ``rule`` gives for the parameters so far."""
        return self.rule(params)


Spec = Dim | Flag | Shape | Multiple | Pair | Choice | Widths | Derived


def smallest(plan: tuple[Spec, ...], fixed: Mapping[str, Any] | None = None) -> Params:
    """The smallest parameters of ``plan``, with those in ``fixed`` as given (a
    spec whose smallest value depends on earlier parameters, :class:`Widths`,
    follows them)."""
    fixed = fixed or {}
    params: Params = {}
    for spec in plan:
        if spec.name in fixed:
            params[spec.name] = fixed[spec.name]
        else:
            params[spec.name] = spec.least(params) if isinstance(spec, (Widths, Derived)) or (
                isinstance(spec, Multiple) and spec.factors) else spec.smallest
    return {**params, **fixed}
