"""Eager argument checks shared by the strategies.

Hypothesis strategies are lazy: a bad argument would only surface at the first
draw, deep inside a test. Every public strategy here checks its arguments when
it is called, with messages that echo the argument, state the rule and
suggest the fix, and accepts a strategy wherever it accepts a value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeGuard, TypeVar

import numpy as np
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from ..errors import InvalidArgument

__all__ = [
    "check_int", "check_choices", "check_shapes", "as_strategy", "choice_strategy", "is_strategy",
]

T = TypeVar("T")


def is_strategy(value: object) -> TypeGuard[SearchStrategy[Any]]:
    """True for a Hypothesis strategy."""
    return isinstance(value, SearchStrategy)


def check_int(name: str, value: Any, *, min_value: int = 0, max_value: int | None = None) -> int:
    """``value`` as an int in ``[min_value, max_value]`` (bools rejected)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidArgument(f"{name}={value!r} must be an int, e.g. {name}={min_value}")
    value = int(value)
    if value < min_value or (max_value is not None and value > max_value):
        upper = "" if max_value is None else f" and at most {max_value}"
        raise InvalidArgument(f"{name}={value!r} must be at least {min_value}{upper}")
    return value


def check_choices(name: str, value: Any, known: tuple[str, ...]) -> tuple[str, ...]:
    """A non-empty selection of ``known`` names, in the order of ``known`` (the
    order Hypothesis shrinks towards), duplicates dropped."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidArgument(
            f"{name}={value!r} must be a non-empty collection of names from {known}, "
            f"e.g. {name}={known[:2]!r}"
        )
    chosen = list(value)
    unknown = [v for v in chosen if v not in known]
    if unknown or not chosen:
        raise InvalidArgument(
            f"{name}={value!r} must be a non-empty collection of names from {known}"
            + (f"; {unknown} are unknown" if unknown else "")
        )
    return tuple(k for k in known if k in chosen)


def check_shapes(shapes: object) -> dict[str, tuple[int, ...]]:
    """``shapes`` as a dict of input name to a tuple of non-negative ints."""
    if not isinstance(shapes, Mapping) or not all(isinstance(k, str) for k in shapes):
        raise InvalidArgument(f"{shapes=} must map input names to shapes, e.g. {{'x': (2, 3)}}")
    out = {}
    for name, shape in shapes.items():
        if not isinstance(shape, tuple) or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0
            for d in shape
        ):
            raise InvalidArgument(
                f"shape {shape!r} of {name!r} must be a tuple of non-negative ints"
            )
        out[name] = tuple(int(d) for d in shape)
    return out


def as_strategy(value: T | SearchStrategy[T], check: Callable[[T], T]) -> SearchStrategy[T]:
    """``value`` itself when it is a strategy, else ``st.just(check(value))``."""
    if isinstance(value, SearchStrategy):
        return value
    return st.just(check(value))


def choice_strategy(name: str, value: Any, known: tuple[str, ...]) -> SearchStrategy[str]:
    """A strategy of names from ``known`` out of ``value``: a strategy (kept),
    one name (always that one) or a collection of names (any of them, shrinking
    towards the first in the order of ``known``)."""
    if is_strategy(value):
        return value
    if isinstance(value, str):
        if value not in known:
            raise InvalidArgument(f"{name}={value!r} is unknown; use one of {known}")
        return st.just(value)
    return st.sampled_from(check_choices(name, value, known))
