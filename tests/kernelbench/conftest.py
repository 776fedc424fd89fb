"""The KernelBench-format files under data/ are inputs of the tests, not modules to collect."""

from __future__ import annotations

from pathlib import Path

import pytest

collect_ignore_glob = ["data/*"]

DATA = Path(__file__).parent / "data"


@pytest.fixture
def problems() -> Path:
    return DATA / "problems"


@pytest.fixture
def candidates() -> Path:
    return DATA / "candidates"
