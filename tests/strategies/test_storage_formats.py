"""Storage formats: names from the allowed set, shrinking towards fp32."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import find, given, settings

from numoracle.errors import InvalidArgument
from numoracle.oracle.formats import get_format
from numoracle.strategies import STORAGE_FORMATS, storage_formats


@settings(max_examples=50, deadline=None)
@given(storage_formats())
def test_storage_formats_are_known_formats(name: str) -> None:
    assert name in STORAGE_FORMATS
    assert get_format(name).name == name


@settings(max_examples=20, deadline=None)
@given(storage_formats(allowed=["fp16", "bf16"]))
def test_storage_formats_respect_allowed(name: str) -> None:
    assert name in ("fp16", "bf16")


def test_storage_formats_shrink_towards_fp32() -> None:
    assert find(storage_formats(allowed=["fp16", "fp32"]), lambda _: True) == "fp32"


@pytest.mark.parametrize(
    ("allowed", "match"),
    [
        ([], r"allowed=\[\]"),
        (["tf32"], "tf32"),
        (["fp32", "fp8"], "fp8"),
        ("fp32", "allowed='fp32'"),
        (None, "allowed=None"),
    ],
)
def test_storage_formats_rejects_invalid_arguments(allowed: Any, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        storage_formats(allowed=allowed)
