"""Layout names: parsing, permutations, validation; targets and cases using them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import find, given

from numoracle.cases.case import Case
from numoracle.cases.layouts import (
    ALL_LAYOUTS,
    Layout,
    accepts,
    from_order,
    layouts_for,
    normalize,
    parse,
    permutation,
    shape_in,
    to_order,
)
from numoracle.targets.target import Target
from numoracle.errors import InvalidArgument
from numoracle.strategies import cases, input_layouts


@pytest.mark.parametrize(("name", "axes", "want"), [
    ("C", None, Layout(None, "C")),
    ("S", "NCHW", Layout("NCHW", "S")),
    ("NHWC", "NCHW", Layout("NHWC", "C")),
    ("HWIO:F", "OIHW", Layout("HWIO", "F")),
])
def test_parse(name: str, axes: str | None, want: Layout) -> None:
    assert parse(name, axes) == want


@pytest.mark.parametrize(("name", "axes", "match"), [
    ("NHWC", "OIHW", "not valid for an array with axes OIHW"),
    ("NHWC", None, "not valid for an array without named axes"),
    ("NHWC:C", "NCHW", "unknown"),
    ("X", None, "unknown"),
    (3, None, "unknown"),
])
def test_parse_rejects(name: Any, axes: str | None, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        parse(name, axes)


@pytest.mark.parametrize("order", ["OIHW", "OHWI", "HWIO"])
def test_orders_round_trip(order: str) -> None:
    a = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    b = to_order(a, "OIHW", order)
    assert b.shape == shape_in(a.shape, "OIHW", order)
    np.testing.assert_array_equal(from_order(b, "OIHW", order), a)


def test_permutation_and_normalize() -> None:
    assert permutation("NCHW", "NHWC") == (0, 2, 3, 1)
    assert normalize("C", "NCHW") == "NCHW" and normalize("F", "OIHW") == "OIHW:F"
    assert normalize("T", "NCHW") == "T" and normalize("F", None) == "F"
    assert accepts(("NCHW",), "C", "NCHW") and not accepts(("NHWC",), "C", "NCHW")
    with pytest.raises(InvalidArgument, match="same axes"):
        permutation("NCHW", "NCHX")


def test_layouts_for() -> None:
    assert layouts_for(None) == ("C", "F", "T", "S")
    assert set(layouts_for("OIHW")) <= set(ALL_LAYOUTS) and "HWIO:F" in layouts_for("OIHW")
    assert "NHWC" not in layouts_for("OIHW")


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"layouts": {"x": ("NHWQ",)}}, "must be a non-empty subset"),
    ({"layouts": {"x": ()}}, "must be a non-empty subset"),
    ({"layouts": "C"}, "must be a non-empty subset"),
    ({"output_layouts": {"y": "NHWC:F"}}, "must be an axis order"),
    ({"output_layouts": {"y": "F"}}, "must be an axis order"),
    ({"output_layouts": {"y": "ZZZ"}}, "unknown"),
    ({"output_layouts": ["NHWC"]}, "must map output names"),
])
def test_target_rejects_bad_layouts(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        Target(name="t", op="conv2d", backend="numpy", precision="fp32",
               fn=lambda **kw: kw, **kwargs)


def test_target_accepted_layouts() -> None:
    t = Target(name="t", op="conv2d", backend="numpy", precision="fp32", fn=lambda **kw: kw,
               layouts={"x": ["NHWC"]})
    assert t.accepted_layouts("x") == ("NHWC",) and t.accepted_layouts("bias") == ("C",)


PARAMS = {"batch": 1, "in_channels": 2, "out_channels": 2, "height": 3, "width": 3,
          "kernel_size": 2}


def test_case_checks_layouts_per_input() -> None:
    Case(op="conv2d", params=PARAMS, layouts={"x": "NHWC:F", "weight": "HWIO"})
    with pytest.raises(InvalidArgument, match="layout 'HWIO' of 'x'"):
        Case(op="conv2d", params=PARAMS, layouts={"x": "HWIO"})
    with pytest.raises(InvalidArgument, match="layout 'NHWC' of 'bias'"):
        Case(op="conv2d", params=PARAMS, layouts={"bias": "NHWC"})
    with pytest.raises(InvalidArgument, match="layout 'NHWC' of 'x'"):
        Case(op="linear", params={"batch": 1, "in_features": 2, "out_features": 2},
             layouts={"x": "NHWC"})


SHAPES = {"x": (1, 2, 3, 3), "weight": (2, 1, 2, 2), "bias": (2,)}
AXES = {"x": "NCHW", "weight": "OIHW"}


@given(input_layouts(SHAPES, axes=AXES))
def test_input_layouts_draw_only_valid_layouts(lays: dict[str, str]) -> None:
    for name, lay in lays.items():
        assert lay in layouts_for(AXES.get(name)) and lay != "C"
    assert lays.get("bias", "C") in ("C", "S")


@given(input_layouts(SHAPES, axes=AXES, layout={"weight": ["HWIO", "HWIO:F"]}))
def test_input_layouts_take_a_mapping(lays: dict[str, str]) -> None:
    assert set(lays) == {"weight"} and lays["weight"] in ("HWIO", "HWIO:F")


def test_conv_cases_draw_axis_orders_and_shrink_to_c() -> None:
    assert find(cases(op="conv2d"), lambda c: True).layouts == {}
    case = find(cases(op="conv2d"), lambda c: c.layouts.get("weight") == "HWIO:F")
    assert case.layouts["weight"] == "HWIO:F" and len(case.layouts) <= 2  # shrunk


@pytest.mark.parametrize("layouts", ["NHWQ", {"x": ["Q"]}])
def test_cases_rejects_unknown_layouts(layouts: Any) -> None:
    with pytest.raises(InvalidArgument, match="layouts"):
        cases(op="conv2d", layouts=layouts)
