"""Hypothesis strategies for numoracle: sizes, formats, layouts, values, cases.

Every strategy takes keyword-only arguments, accepts a value or a strategy
where it makes sense, and checks its arguments when it is called (raising
:class:`~numoracle.errors.InvalidArgument`), not at the first draw.

Examples
--------
>>> from hypothesis import given
>>> from numoracle.strategies import cases
>>> @given(cases(op="linear", max_elements=256))
... def test_shapes(case):
...     assert case.size() <= 256
>>> test_shapes()
"""

from __future__ import annotations

from .cases import (
    DEFAULT_MAX_ELEMENTS,
    DIM_MAX,
    REALISTIC_MAX_ELEMENTS,
    REDUCTION_MAX,
    SEED_MAX,
    cases,
    edges,
)
from .formats import STORAGE_FORMATS, storage_formats
from .layouts import input_layouts, layouts
from .sizes import MAX_SIZE, batch_sizes, dims, interesting_sizes
from .values import (
    DEFAULT_FAMILIES,
    FAMILY_ORDER,
    KNOWN_FAMILIES,
    families,
    families_for,
    overlays,
)

__all__ = [
    "cases",
    "edges",
    "dims",
    "batch_sizes",
    "interesting_sizes",
    "storage_formats",
    "layouts",
    "input_layouts",
    "families",
    "families_for",
    "overlays",
    "DEFAULT_MAX_ELEMENTS",
    "REALISTIC_MAX_ELEMENTS",
    "DEFAULT_FAMILIES",
    "DIM_MAX",
    "FAMILY_ORDER",
    "KNOWN_FAMILIES",
    "MAX_SIZE",
    "REDUCTION_MAX",
    "SEED_MAX",
    "STORAGE_FORMATS",
]
