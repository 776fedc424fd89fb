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
    wgsl_model,
)
from numoracle.oracle.accuracy import Ulps
from numoracle.oracle.precision import PrecisionModel, get_model


def test_the_model_allows_either_neighbour_and_flushed_subnormals() -> None:
    assert WGSL_MODEL is get_model("wgsl") and WGSL_MODEL.accuracy == "wgsl"
    assert WGSL_MODEL.acc_unit() == 2.0**-23  # one ulp of f32, not half of one
    assert WGSL_MODEL.flush_subnormal_inputs
    assert wgsl_model(order="sequential").order.kind == "sequential"
    assert PrecisionModel.from_dict(WGSL_MODEL.to_dict()) == WGSL_MODEL  # a repro's claim


@pytest.mark.parametrize(("name", "x_abs", "ulps"), [
    ("div", 0.0, 2.5), ("rsqrt", 9.0, 2.0), ("exp", 0.0, 3.0), ("exp", 4.0, 11.0),
    ("exp2", 1.5, 6.0), ("sqrt", 0.0, 4.5), ("log", 3.0, 3.0),
])
def test_the_profile_carries_the_table(name: str, x_abs: float, ulps: float) -> None:
    err = WGSL_MODEL.error_of(name)
    assert isinstance(err, Ulps) and err.at(x_abs) == ulps


def test_log_keeps_its_absolute_error_near_one() -> None:
    err = WGSL_MODEL.error_of("log")
    assert isinstance(err, Ulps) and err.of_one * 2.0**-23 == WGSL_F32_ACCURACY["log"].absolute


def test_every_table_entry_in_ulps_is_claimed_or_says_why() -> None:
    names = {"inverseSqrt": "rsqrt"}
    for key, row in WGSL_F32_ACCURACY.items():
        if row.kind in ("ulp", "ulp_linear") and key not in NOT_CLAIMED:
            err = WGSL_MODEL.error_of(names.get(key, key))
            assert isinstance(err, Ulps) and (err.ulps, err.per_x) == (row.ulps, row.slope)
        elif row.kind == "absolute" and key not in NOT_CLAIMED:
            assert WGSL_MODEL.error_of(key) is not None
    assert WGSL_F32_ACCURACY["div"].domain == (2.0**-126, 2.0**126)


def test_bad_claims_are_refused() -> None:
    with pytest.raises(InvalidArgument):
        wgsl_model(order="sideways")


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
