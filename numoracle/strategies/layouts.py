"""Memory layouts: how each input of a case is laid out in memory.

See :data:`numoracle.targets.target.LAYOUTS`: ``C`` row-major, ``F`` column-major,
``T`` a transposed view, ``S`` strided; inputs with named axes (a
convolution's) also take axis orders such as ``NHWC`` or ``HWIO:F`` (see
:mod:`numoracle.cases.layouts`). Layout bugs (a weight read in the wrong order, a
stride ignored) show up only when inputs are not all ``C``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from ..cases.layouts import ALL_LAYOUTS, layouts_for
from ..errors import InvalidArgument
from ..targets.target import LAYOUTS
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


#: a layout argument in a hashable form: None (every valid layout), ``("all",
#: choice)`` (one choice for every input) or ``("per-input", ((name, choice), ...))``
LayoutArg = tuple[str, Any] | None


def normal_layout(layout: object, name: str = "layout") -> LayoutArg:
    """``layout`` (as :func:`input_layouts` takes it) checked, in a hashable form
    that :func:`_layouts_strategy` caches on; ``name`` is the argument echoed in
    error messages."""
    if layout is None:
        return None
    if isinstance(layout, Mapping):
        return ("per-input", tuple((n, _choice(f"{name}[{n!r}]", v)) for n, v in layout.items()))
    return ("all", _choice(name, layout))


#: per input: its name, the strategy its layout is drawn from (None: always
#: ``C``), the layouts valid for it and its number of axes
_Plan = tuple[tuple[str, SearchStrategy[str] | None, tuple[str, ...], int], ...]


@st.composite
def _input_layouts(draw: st.DrawFn, plan: _Plan) -> dict[str, str]:
    out = {}
    for name, strategy, valid, rank in plan:
        lay = "C" if strategy is None else draw(strategy)
        if lay not in valid or (rank < 2 and lay not in _VECTOR_LAYOUTS):
            lay = "C"  # F and T of a vector are C; axis orders of unnamed axes do not apply
        if lay != "C":
            out[name] = lay
    return out


@lru_cache(maxsize=4096)
def _layouts_strategy(ranks: tuple[tuple[str, int], ...], layout: LayoutArg,
                      axes: tuple[tuple[str, str], ...]) -> SearchStrategy[dict[str, str]]:
    """The strategy of :func:`input_layouts` for inputs of these names and numbers
    of axes, built once (the case strategy asks for one per drawn case, and
    only the numbers of axes, not the sizes, change what it draws)."""
    named = dict(axes)
    choices: Mapping[str, Choice]
    if layout is None:
        choices = {n: layouts_for(named.get(n)) for n, _ in ranks}
    elif layout[0] == "per-input":
        choices = dict(layout[1])
    else:
        choices = {n: layout[1] for n, _ in ranks}
    plan = []
    for name, rank in ranks:
        choice = choices.get(name, ("C",))
        valid = layouts_for(named.get(name))
        strategy: SearchStrategy[str] | None
        if isinstance(choice, tuple):
            names = tuple(c for c in choice if c in valid)
            strategy = st.sampled_from(names) if names else None
        else:
            strategy = choice
        plan.append((name, strategy, valid, rank))
    return _input_layouts(tuple(plan))


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
        memory layouts :data:`~numoracle.targets.target.LAYOUTS`, and the axis orders
        of inputs with named axes). Each input draws from the given layouts
        valid for it; ``F`` and ``T`` of an input with fewer than two axes are
        the same as ``C`` and come out as ``C``, as does a drawn layout that
        is not valid for the input.
    axes : mapping, optional
        Canonical axis order of the inputs with named axes
        (``{"x": "NCHW", "weight": "OIHW"}``: an op's ``input_axes``).
    """
    checked = check_shapes(shapes)
    ranks = tuple((n, len(shape)) for n, shape in checked.items())
    return _layouts_strategy(ranks, normal_layout(layout), tuple(dict(axes or {}).items()))
