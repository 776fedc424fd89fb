"""The KernelBench-format files under data/ are inputs of the tests, not modules to collect."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

collect_ignore_glob = ["data/*"]

DATA = Path(__file__).parent / "data"


@pytest.fixture
def sampled_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """An official instance above the float64 floor judged on a sample of its rows,
    never whole in pieces."""
    monkeypatch.setattr(sys.modules["numoracle.kernelbench.judge"], "MAX_PIECES", 1)


@pytest.fixture
def oracle_runs_out_once(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The oracle's first evaluation raises torch's out-of-memory error (as on a
    device), the others run; the calls so far (clear it to start again)."""
    judge_module = sys.modules["numoracle.kernelbench.judge"]
    reference = judge_module._Context.reference
    calls: list[int] = []

    def first_runs_out(self: Any, *args: Any, **kw: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return reference(self, *args, **kw)

    monkeypatch.setattr(judge_module._Context, "reference", first_runs_out)
    return calls


@pytest.fixture
def problems() -> Path:
    return DATA / "problems"


@pytest.fixture
def candidates() -> Path:
    return DATA / "candidates"
