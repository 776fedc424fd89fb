"""The KernelBench-format files under data/ are inputs of the tests, not modules to collect."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

collect_ignore_glob = ["data/*"]

DATA = Path(__file__).parent / "data"


@pytest.fixture
def sampled_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """An official instance above the float64 floor judged on a sample of its rows,
    never whole in pieces."""
    monkeypatch.setattr(sys.modules["numoracle.kernelbench.judge"], "MAX_PIECES", 1)


@pytest.fixture
def problems() -> Path:
    return DATA / "problems"


@pytest.fixture
def candidates() -> Path:
    return DATA / "candidates"
