"""Fixtures of the GPU tests (the device libraries, or a clean skip; the host's
references as the device's); the CPU loops warmed."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from numoracle.targets import get_backend
from numoracle.oracle import elementwise, fused_cpu, tracked

# torch loaded before any test starts a thread: importing it later, while a kernel
# thread of an earlier test lived, crashed the interpreter (SIGSEGV in torch's
# extension loading)
with contextlib.suppress(ImportError):
    import torch  # noqa: F401

# numba's loops compiled (or loaded from its cache) before any test times itself:
# a Hypothesis deadline would otherwise count the first compilation
fused_cpu.warm_up()


@pytest.fixture(scope="module")
def cupy() -> Any:
    cp = pytest.importorskip("cupy")
    reason = get_backend("cupy").available()
    if reason is not None:
        pytest.skip(reason)
    return cp


@pytest.fixture(scope="module")
def torch_cuda() -> Any:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return torch


@pytest.fixture(autouse=True)
def _host_sums_as_the_device(request: pytest.FixtureRequest,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    """GPU tests compare device references with the host's: there the host sums the
    magnitudes ``S`` in float64 as the device does (elsewhere the CPU may sum them in
    float32: ``tracked._single``)."""
    if request.node.get_closest_marker("gpu") is not None:
        monkeypatch.setattr(tracked, "SINGLE_SUMS", False)


@pytest.fixture
def strict(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The strict namespace of ``oracle/traced/strict_xp.py`` (CuPy's refusals on the
    CPU), its float64 keeping subnormals and summing magnitudes in float64, as CuPy's
    (on its device's probe), so that it finds the host's exact elements."""
    if "strict_xp" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "strict_xp", Path(__file__).parent / "oracle" / "traced" / "strict_xp.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["strict_xp"] = module
        spec.loader.exec_module(module)
    for m in (elementwise, tracked):
        monkeypatch.setattr(m, "keeps_subnormals", lambda xp: True)
    monkeypatch.setattr(tracked, "SINGLE_SUMS", False)
    return sys.modules["strict_xp"].STRICT
