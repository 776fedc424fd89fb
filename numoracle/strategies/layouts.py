"""Memory layouts: how each input of a case is laid out in memory.

See :data:`numoracle.cases.target.LAYOUTS`: ``C`` row-major, ``F`` column-major,
``T`` a transposed view, ``S`` strided; inputs with named axes (a
convolution's) also take axis orders such as ``NHWC`` or ``HWIO:F`` (see
:mod:`numoracle.cases.layouts`). Layout bugs (a weight read in the wrong order, a
stride ignored) show up only when inputs are not all ``C``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from ..cases.layouts import ALL_LAYOUTS, layouts_for
from ..cases.target import LAYOUTS
from ..errors import InvalidArgument
from ._validate import check_choices, check_shapes, is_strategy

__all__ = ["layouts", "input_layouts"]

#: layouts that differ from ``C`` for a 1-D (or 0-D) array
_VECTOR_LAYOUTS = ("C", "S")


def layouts(*, allowed: Iterable[str] = LAYOUTS) -> SearchStrategy[str]:
    """One layout name from ``allowed`` (names of :data:`numoracle.cases.layouts.ALL_LAYOUTS`);
    shrinks towards ``C``.

    Examples
    --------
    >>> from hypothesis import find
    >>> find(layouts(allowed=["T", "F"]), lambda _: True) in ("T", "F")   # shrinks towards F
    True
    """
    return st.sampled_from(check_choices("allowed", allowed, ALL_LAYOUTS))


#: what a layout is drawn from: a strategy, or the names to sample
Choice = SearchStrategy[str] | tuple[str, ...]


def _choice(name: str, value: object) -> Choice:
    """A strategy (kept) or the checked names of ``value`` (one name or a collection)."""
    if is_strategy(value):
        return value
    if isinstance(value, str):
        if value not in ALL_LAYOUTS:
            raise InvalidArgument(f"{name}={value!r} is unknown; use one of {ALL_LAYOUTS}")
        return (value,)
    return check_choices(name, value, ALL_LAYOUTS)


def _draw_one(draw: st.DrawFn, choice: Choice, shape: tuple[int, ...],
              axes: str | None) -> str:
    valid = layouts_for(axes)
    if isinstance(choice, tuple):
        names = tuple(c for c in choice if c in valid)
        lay = draw(st.sampled_from(names)) if names else "C"
    else:
        lay = draw(choice)
    if lay not in valid or (len(shape) < 2 and lay not in _VECTOR_LAYOUTS):
        lay = "C"  # F and T of a vector are C; axis orders of unnamed axes do not apply
    return lay


@st.composite
def _input_layouts(draw: st.DrawFn, shapes: dict[str, tuple[int, ...]],
                   choices: Mapping[str, Choice], axes: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for name, shape in shapes.items():
        lay = _draw_one(draw, choices.get(name, ("C",)), shape, axes.get(name))
        if lay != "C":
            out[name] = lay
    return out


def input_layouts(shapes: Mapping[str, tuple[int, ...]], *,
                  layout: str | Iterable[str] | SearchStrategy[str]
                  | Mapping[str, str | Iterable[str] | SearchStrategy[str]] | None = None,
                  axes: Mapping[str, str] | None = None,
                  ) -> SearchStrategy[dict[str, str]]:
    """A layout per input, as the ``layouts`` field of a
    :class:`~numoracle.cases.case.Case` (inputs left out are ``C``).

    Parameters
    ----------
    shapes : mapping
        Shape of each input, by name.
    layout : str, collection of str, strategy or mapping, optional
        The layout of every input, the layouts to choose from, a strategy
        drawn once per input, or any of these per input name (inputs a mapping
        leaves out are ``C``). Default: every layout valid for the input (the
        memory layouts :data:`~numoracle.cases.target.LAYOUTS`, and the axis orders
        of inputs with named axes). Each input draws from the given layouts
        valid for it; ``F`` and ``T`` of an input with fewer than two axes are
        the same as ``C`` and come out as ``C``, as does a drawn layout that
        is not valid for the input.
    axes : mapping, optional
        Canonical axis order of the inputs with named axes
        (``{"x": "NCHW", "weight": "OIHW"}``: an op's ``input_axes``).
    """
    checked = check_shapes(shapes)
    named = dict(axes or {})
    choices: dict[str, Choice]
    if layout is None:
        choices = {n: layouts_for(named.get(n)) for n in checked}
    elif isinstance(layout, Mapping):
        choices = {n: _choice(f"layout[{n!r}]", v) for n, v in layout.items()}
    else:
        one = _choice("layout", layout)
        choices = dict.fromkeys(checked, one)
    return _input_layouts(checked, choices, named)
