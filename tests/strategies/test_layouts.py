"""Layouts: one per input, from the allowed set, C left implicit."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from numoracle.targets.target import LAYOUTS
from numoracle.errors import InvalidArgument
from numoracle.strategies import input_layouts, layouts

SHAPES = {"x": (3, 4), "weight": (5, 4), "bias": (5,)}


@settings(max_examples=50, deadline=None)
@given(layouts())
def test_layouts_are_known(name: str) -> None:
    assert name in LAYOUTS


@settings(max_examples=50, deadline=None)
@given(input_layouts(SHAPES))
def test_input_layouts_name_inputs_and_leave_c_implicit(lays: dict[str, str]) -> None:
    assert set(lays) <= set(SHAPES)
    assert "C" not in lays.values()
    assert lays.get("bias", "S") == "S"  # F and T of a vector are C


@settings(max_examples=30, deadline=None)
@given(input_layouts(SHAPES, layout=["F", "T"]))
def test_input_layouts_respect_the_allowed_layouts(lays: dict[str, str]) -> None:
    assert set(lays) == {"x", "weight"}
    assert set(lays.values()) <= {"F", "T"}


@settings(max_examples=10, deadline=None)
@given(input_layouts(SHAPES, layout="S"))
def test_input_layouts_take_one_layout_for_all(lays: dict[str, str]) -> None:
    assert lays == {"x": "S", "weight": "S", "bias": "S"}


@settings(max_examples=10, deadline=None)
@given(input_layouts(SHAPES, layout=st.just("T")))
def test_input_layouts_take_a_strategy(lays: dict[str, str]) -> None:
    assert lays == {"x": "T", "weight": "T"}


def test_input_layouts_shrink_towards_c() -> None:
    assert find(input_layouts(SHAPES), lambda _: True) == {}


@pytest.mark.parametrize(
    ("allowed", "match"),
    [([], r"allowed=\[\]"), (["X"], "'X'"), ("C", "allowed='C'"), (3, "allowed=3")],
)
def test_layouts_rejects_invalid_arguments(allowed: Any, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        layouts(allowed=allowed)


@pytest.mark.parametrize(
    ("shapes", "kwargs", "match"),
    [
        ([("x", (2,))], {}, "shapes="),
        ({1: (2,)}, {}, "shapes="),
        ({"x": [2, 3]}, {}, r"\[2, 3\]"),
        ({"x": (2, -1)}, {}, r"\(2, -1\)"),
        ({"x": (2.0,)}, {}, r"\(2.0,\)"),
        ({"x": (2,)}, {"layout": "Z"}, "layout='Z'"),
        ({"x": (2,)}, {"layout": []}, r"layout=\[\]"),
    ],
)
def test_input_layouts_rejects_invalid_arguments(shapes: Any, kwargs: dict[str, Any],
                                                 match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        input_layouts(shapes, **kwargs)
