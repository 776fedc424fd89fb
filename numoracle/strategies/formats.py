"""Storage formats: what the arrays of a case hold."""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from ._validate import check_choices

__all__ = ["STORAGE_FORMATS", "storage_formats"]

#: formats arrays can be stored in, in the order Hypothesis shrinks towards
#: (tf32 is a compute format only: no array holds tf32)
STORAGE_FORMATS: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp64")


def storage_formats(*, allowed: Iterable[str] = STORAGE_FORMATS) -> SearchStrategy[str]:
    """Names of storage formats from ``allowed``; shrinks towards fp32.

    Examples
    --------
    >>> from hypothesis import find
    >>> find(storage_formats(allowed=["fp16", "bf16"]), lambda _: True) in ("fp16", "bf16")
    True
    """
    return st.sampled_from(check_choices("allowed", allowed, STORAGE_FORMATS))
