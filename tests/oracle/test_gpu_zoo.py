"""The oracle on the GPU judges the bug zoo as the host's does: with every
reference computed on the device (CuPy), each linear and conv2d mutant is caught
and the correct kernels pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from numoracle.checking import check
from numoracle.kernels import get_target
from numoracle.running.runner import run_target
from numoracle.zoo import mutants as zoo_mutants

pytestmark = pytest.mark.gpu



@pytest.fixture
def on_the_device(cupy: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every case's reference on the GPU (not only large ones); counts them."""
    monkeypatch.setattr(check, "GPU_REFERENCE_WORK", 0)
    seen: list[int] = []
    inner = check._reference_inputs

    def counted(case: Any, inputs: Any) -> Any:
        out = inner(case, inputs)
        seen.append(sum(type(v).__module__.startswith("cupy") for v in out.values()))
        return out
    monkeypatch.setattr(check, "_reference_inputs", counted)
    return seen


@pytest.mark.parametrize("op", ["linear", "conv2d"])
def test_gpu_reference_catches_every_mutant_and_passes_the_kernel(
        on_the_device: list[int], tmp_path: Path, op: str) -> None:
    mutants = zoo_mutants([op])
    assert mutants
    for t in mutants:
        r = run_target(t, examples=100, seed=0, store=tmp_path, shrink=False)
        assert r.verdict == "FAIL", f"{t.name}: {r.verdict} after {r.cases} cases"
    good = run_target(get_target("numpy-fp32", op), examples=100, seed=0, store=tmp_path)
    assert good.verdict == "pass" and good.cases >= 50, (good.verdict, good.cases)
    assert on_the_device and all(on_the_device), "a reference was computed on the host"
