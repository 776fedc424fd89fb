"""Memory layouts: how each input of a case is laid out in memory.

See :data:`numoracle.target.LAYOUTS`: ``C`` row-major, ``F`` column-major,
``T`` a transposed view, ``S`` strided. Layout bugs (a weight read in the
wrong order, a stride ignored) show up only when inputs are not all ``C``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from ..target import LAYOUTS
from ._validate import check_choices, check_shapes, choice_strategy

__all__ = ["layouts", "input_layouts"]

#: layouts that differ from ``C`` for a 1-D (or 0-D) array
_VECTOR_LAYOUTS = ("C", "S")


def layouts(*, allowed: Iterable[str] = LAYOUTS) -> SearchStrategy[str]:
    """One layout name from ``allowed``; shrinks towards ``C``.

    Examples
    --------
    >>> from hypothesis import find
    >>> find(layouts(allowed=["T", "F"]), lambda _: True)   # shrinks towards C, then F
    'F'
    """
    return st.sampled_from(check_choices("allowed", allowed, LAYOUTS))


@st.composite
def _input_layouts(draw: st.DrawFn, shapes: dict[str, tuple[int, ...]],
                   layout: SearchStrategy[str]) -> dict[str, str]:
    out = {}
    for name, shape in shapes.items():
        lay = draw(layout)
        if len(shape) < 2 and lay not in _VECTOR_LAYOUTS:
            lay = "C"  # F and T of a vector are C
        if lay != "C":
            out[name] = lay
    return out


def input_layouts(shapes: Mapping[str, tuple[int, ...]], *,
                  layout: str | Iterable[str] | SearchStrategy[str] | None = None
                  ) -> SearchStrategy[dict[str, str]]:
    """A layout per input, as the ``layouts`` field of a
    :class:`~numoracle.case.Case` (inputs left out are ``C``).

    Parameters
    ----------
    shapes : mapping
        Shape of each input, by name.
    layout : str, collection of str or strategy, optional
        The layout of every input, the layouts to choose from, or a strategy
        drawn once per input (default: any of :data:`~numoracle.target.LAYOUTS`).
        ``F`` and ``T`` of an input with fewer than two axes are the same as
        ``C`` and come out as ``C``.
    """
    strategy = layouts() if layout is None else choice_strategy("layout", layout, LAYOUTS)
    return _input_layouts(check_shapes(shapes), strategy)
