"""The ``wgsl`` claim (the WGSL specification's f32 accuracy table) and dispatch
rules: pure Python, no adapter needed."""

from __future__ import annotations

import pytest

from numoracle.errors import InvalidArgument
from numoracle.foreign.wgsl import (
    NOT_CLAIMED,
    WGSL_F32_ACCURACY,
    WGSL_MODEL,
    DispatchRule,
    wgsl_claims,
    wgsl_model,
)
from numoracle.foreign.wgsl.profile import true_ulps
from numoracle.oracle.precision import get_model


def test_the_model_allows_either_neighbour_and_flushed_subnormals() -> None:
    assert WGSL_MODEL.acc_unit() == 2.0**-23  # one ulp of f32, not half of one
    assert WGSL_MODEL.flush_subnormal_inputs
    assert wgsl_model(order="sequential").order.kind == "sequential"


@pytest.mark.parametrize(("name", "x_max", "ulps"), [
    ("div", 0.0, 2.5), ("inverseSqrt", 9.0, 2.0), ("exp", 0.0, 3.0), ("exp", 4.0, 11.0),
    ("exp2", 1.5, 6.0), ("atan", 0.0, 4096.0),
])
def test_ulps_from_the_table(name: str, x_max: float, ulps: float) -> None:
    assert true_ulps(name, x_max) == ulps


def test_sqrt_is_inherited_from_a_reciprocal_root_and_a_division() -> None:
    assert 4.5 < true_ulps("sqrt", 0.0) < 4.5001


@pytest.mark.parametrize("name", ["log", "sin", "add", "tanh", "nope"])
def test_no_ulps_where_the_table_gives_none(name: str) -> None:
    with pytest.raises(InvalidArgument, match="no error in ulps"):
        true_ulps(name, 1.0)


def test_claims_count_in_the_units_of_the_models_rounding() -> None:
    # the primitives count 2u of the model per ulp: u is one ulp under wgsl, half under fp32
    wgsl, fp32 = wgsl_claims(x_max=2.0).ulps, wgsl_claims(get_model("fp32"), x_max=2.0).ulps
    assert wgsl["exp"] == 7.0 / 2 and fp32["exp"] == 7.0
    assert wgsl["silu"] == (7.0 + 1.0 + 2.5) / 2
    with pytest.raises(InvalidArgument, match="x_max"):
        wgsl_claims(x_max=-1.0)


def test_every_absolute_or_unclaimed_entry_says_why() -> None:
    absolute = {k for k, r in WGSL_F32_ACCURACY.items() if r.kind == "absolute"}
    assert absolute <= set(NOT_CLAIMED)
    assert WGSL_F32_ACCURACY["div"].domain == (2.0**-126, 2.0**126)


@pytest.mark.parametrize(("rule", "params", "counts"), [
    ("ceil(n / 16)", {"n": 17}, (2, 1, 1)),
    (("n // 16", "max(m, 1)", 2), {"n": 17, "m": 0}, (1, 1, 2)),
    ("prod(batch_shape)", {"batch_shape": ()}, (1, 1, 1)),
    ("ceil(kernel_size[0] * 3 / 2)", {"kernel_size": (3, 1)}, (5, 1, 1)),
])
def test_dispatch_rules(rule: object, params: dict, counts: tuple) -> None:
    assert DispatchRule.parse(rule).counts(params) == counts


@pytest.mark.parametrize(("rule", "params", "says"), [
    ("n / 16", {"n": 17}, "not a whole number"),
    ("n - 20", {"n": 17}, "must be a whole number >= 0"),
    ("__import__('os')", {}, "is not allowed"),
    ("n.real", {"n": 1}, "is not allowed"),
    ("q", {"n": 1}, "'q' is not a parameter"),
    ("n / 0", {"n": 1}, "divides by zero"),
    (("1", "2", "3", "4"), {}, "one to three"),
    ("(", {}, "is not an expression"),
])
def test_bad_dispatch_rules_are_refused(rule: object, params: dict, says: str) -> None:
    with pytest.raises(InvalidArgument, match=says):
        DispatchRule.parse(rule).counts(params)
