"""Value families and special-value overlays.

The bulk values of a case come from :func:`numoracle.cases.values.generate_inputs`
and the case's seed; Hypothesis draws only the family and a few *overlays*,
``(input, flat index, special value)`` triples written over the bulk values.
Overlays keep special values (signed zeros, subnormals, infinities, NaN)
small in number and shrinkable: Hypothesis removes them one by one and moves
the survivors towards the first input, index 0 and the simplest value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache

import numpy as np
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from ..cases.values import FAMILIES, WORKLOAD_FAMILIES, special_values
from ..oracle.formats import Format, get_format
from ..oracle.ops import get_op
from ._validate import check_choices, check_int, check_shapes

__all__ = ["FAMILY_ORDER", "DEFAULT_FAMILIES", "KNOWN_FAMILIES", "families", "families_for",
           "overlays"]

#: the families every op is drawn from, in the order Hypothesis shrinks
#: towards: the exact family first, where any deviation at all is a bug
FAMILY_ORDER: tuple[str, ...] = ("exact",) + tuple(
    f for f in FAMILIES if f != "exact" and f not in WORKLOAD_FAMILIES)
#: every family a strategy accepts: the general ones, then those of real
#: workloads, drawn for the ops that name them (:func:`families_for`)
KNOWN_FAMILIES: tuple[str, ...] = FAMILY_ORDER + WORKLOAD_FAMILIES
#: families a case strategy draws unless told otherwise: specials come as
#: overlays (opt-in) rather than as the ``special`` family
DEFAULT_FAMILIES: tuple[str, ...] = tuple(f for f in FAMILY_ORDER if f != "special")


def families_for(op: str) -> tuple[str, ...]:
    """The families a run draws for ``op``: :data:`FAMILY_ORDER`, then the
    workload families the op names (``value_families``: a traced reference
    that normalises its rows names ``rows`` and ``large``).

    >>> families_for("linear") == FAMILY_ORDER
    True
    """
    named = getattr(get_op(op), "value_families", ())
    return FAMILY_ORDER + tuple(f for f in WORKLOAD_FAMILIES if f in named)

Overlay = tuple[str, int, float]


def families(*, allowed: Iterable[str] = FAMILY_ORDER) -> SearchStrategy[str]:
    """Value family names from ``allowed``; shrinks towards ``exact``, then in the
    order of :data:`numoracle.cases.values.FAMILIES`.

    Examples
    --------
    >>> from hypothesis import find
    >>> find(families(allowed=["cancel", "exact"]), lambda _: True) in ("cancel", "exact")
    True
    """
    return st.sampled_from(check_choices("allowed", allowed, KNOWN_FAMILIES))


@st.composite
def _overlay(draw: st.DrawFn, names: SearchStrategy[str],
             indices: Mapping[str, SearchStrategy[int]],
             values: SearchStrategy[float]) -> Overlay:
    name = draw(names)
    index = draw(indices[name])
    return name, index, draw(values)


def _same_overlay(t: Overlay) -> tuple[str, int]:
    return t[0], t[1]


@lru_cache(maxsize=4096)
def _overlays(sizes: tuple[tuple[str, int], ...], storage: Format,
              count: int) -> SearchStrategy[tuple[Overlay, ...]]:
    """The strategy of :func:`overlays` for inputs of these names and (non-zero)
    element counts, built once (the case strategy asks for one per drawn case)."""
    if not sizes or count == 0:
        return st.just(())
    element = _overlay(st.sampled_from(tuple(n for n, _ in sizes)),
                       {n: st.integers(0, k - 1) for n, k in sizes},
                       st.sampled_from(special_values(storage)))
    return st.lists(element, max_size=count, unique_by=_same_overlay).map(tuple)


def overlays(shapes: Mapping[str, tuple[int, ...]], storage: Format | str, *,
             max_count: int = 3) -> SearchStrategy[tuple[Overlay, ...]]:
    """Up to ``max_count`` special values overlaid on the inputs.

    Parameters
    ----------
    shapes : mapping
        Shape of each input, by name (inputs without elements get none).
    storage : Format or str
        Storage format: the values are :func:`numoracle.cases.values.special_values`
        of it.
    max_count : int
        Most overlays drawn; each ``(input, flat index)`` at most once.

    Returns
    -------
    strategy of tuple
        ``(input, flat_index, value)`` triples, as the ``overlays`` field of a
        :class:`~numoracle.cases.case.Case`; shrinks towards none.
    """
    sizes = {n: int(np.prod(s)) for n, s in check_shapes(shapes).items()}
    count = check_int("max_count", max_count, min_value=0)
    return _overlays(tuple((n, k) for n, k in sizes.items() if k > 0), get_format(storage), count)
