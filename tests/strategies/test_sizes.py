"""Sizes: in range, favouring the sizes where bugs hide, checked eagerly."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numoracle.errors import InvalidArgument
from numoracle.strategies import MAX_SIZE, batch_sizes, dims, interesting_sizes


@settings(max_examples=50, deadline=None)
@given(data=st.data(), lo=st.integers(1, 100), span=st.integers(0, 70000))
def test_dims_stay_in_range(data: st.DataObject, lo: int, span: int) -> None:
    v = data.draw(dims(min_value=lo, max_value=lo + span))
    assert lo <= v <= lo + span


@settings(max_examples=50, deadline=None)
@given(batch_sizes())
def test_batch_sizes_are_one_to_128(v: int) -> None:
    assert 1 <= v <= 128


def test_interesting_sizes_hold_ones_primes_and_powers_of_two() -> None:
    sizes = interesting_sizes(1, 65536)
    assert {1, 2, 3, 7, 31, 127, 255, 256, 257, 65521, 65535, 65536} <= set(sizes)
    assert list(sizes) == sorted(set(sizes))


def test_interesting_sizes_keep_include_in_range_only() -> None:
    assert interesting_sizes(10, 12, include=(1, 11, 99)) == (10, 11, 12)


def test_dims_draw_favoured_sizes_often() -> None:
    seen: list[int] = []

    @settings(max_examples=200, deadline=None, database=None)
    @given(dims(min_value=1, max_value=65536))
    def collect(v: int) -> None:
        seen.append(v)

    collect()
    favoured = set(interesting_sizes(1, 65536))
    assert sum(v in favoured for v in seen) >= len(seen) // 4


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"min_value": 0}, "min_value=0"),
        ({"min_value": True}, "min_value=True"),
        ({"min_value": 2.0}, "min_value=2.0"),
        ({"max_value": 0}, "max_value=0"),
        ({"max_value": MAX_SIZE + 1}, f"max_value={MAX_SIZE + 1}"),
        ({"min_value": 5, "max_value": 4}, "max_value=4"),
        ({"include": 3}, "include=3"),
        ({"include": "12"}, "include='12'"),
        ({"include": (0,)}, "include entry=0"),
    ],
)
def test_dims_rejects_invalid_arguments(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        dims(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"min_value": 0}, "min_value=0"),
        ({"max_value": -1}, "max_value=-1"),
        ({"min_value": 8, "max_value": 2}, "max_value=2"),
        ({"max_value": None}, "max_value=None"),
    ],
)
def test_batch_sizes_rejects_invalid_arguments(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        batch_sizes(**kwargs)
