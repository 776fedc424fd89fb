"""Families and special-value overlays."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import find, given, settings

from numoracle.cases.values import FAMILIES, WORKLOAD_FAMILIES, special_values
from numoracle.errors import InvalidArgument
from numoracle.strategies import (
    DEFAULT_FAMILIES,
    FAMILY_ORDER,
    KNOWN_FAMILIES,
    families,
    families_for,
    overlays,
)

SHAPES = {"x": (3, 4), "bias": (5,), "empty": (0, 3)}


def test_family_order_puts_exact_first() -> None:
    assert FAMILY_ORDER[0] == "exact"
    assert set(KNOWN_FAMILIES) == set(FAMILIES)
    assert "special" not in DEFAULT_FAMILIES
    # the workload families are drawn only for the ops that name them
    assert not set(WORKLOAD_FAMILIES) & set(FAMILY_ORDER + DEFAULT_FAMILIES)
    assert families_for("linear") == FAMILY_ORDER


@settings(max_examples=50, deadline=None)
@given(families())
def test_families_are_known(name: str) -> None:
    assert name in FAMILIES


def test_families_shrink_towards_exact() -> None:
    assert find(families(allowed=["normal", "cancel", "exact"]), lambda _: True) == "exact"


@pytest.mark.parametrize("storage", ["fp32", "bf16", "fp16", "fp64"])
def test_overlays_are_valid_triples(storage: str) -> None:
    specials = special_values(storage)

    @settings(max_examples=50, deadline=None, database=None)
    @given(overlays(SHAPES, storage, max_count=4))
    def check(triples: tuple[tuple[str, int, float], ...]) -> None:
        assert len(triples) <= 4
        assert len({(n, i) for n, i, _ in triples}) == len(triples)
        for name, index, value in triples:
            assert 0 <= index < int(np.prod(SHAPES[name]))
            assert value in specials or np.isnan(value)

    check()


def test_overlays_shrink_towards_none() -> None:
    assert find(overlays(SHAPES, "fp32"), lambda _: True) == ()


def test_overlays_shrink_towards_simple_values() -> None:
    found = find(overlays(SHAPES, "fp32"), lambda t: len(t) > 0)
    assert 1 <= len(found) <= 2 and all(name in SHAPES for name, _, _ in found)


def test_no_overlays_without_elements_or_count() -> None:
    assert find(overlays({"e": (0,)}, "fp32"), lambda _: True) == ()
    assert find(overlays(SHAPES, "fp32", max_count=0), lambda _: True) == ()


@pytest.mark.parametrize(
    ("allowed", "match"),
    [([], r"allowed=\[\]"), (["gaussian"], "gaussian"), ("exact", "allowed='exact'")],
)
def test_families_rejects_invalid_arguments(allowed: Any, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        families(allowed=allowed)


@pytest.mark.parametrize(
    ("shapes", "storage", "kwargs", "match"),
    [
        ({"x": (2,)}, "fp32", {"max_count": -1}, "max_count=-1"),
        ({"x": (2,)}, "fp32", {"max_count": 1.5}, "max_count=1.5"),
        ({"x": (2,)}, "fp8", {}, "fp8"),
        ({"x": 2}, "fp32", {}, "shape 2"),
        ("x", "fp32", {}, "shapes='x'"),
    ],
)
def test_overlays_rejects_invalid_arguments(shapes: Any, storage: Any, kwargs: dict[str, Any],
                                            match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        overlays(shapes, storage, **kwargs)
