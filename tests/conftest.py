"""Fixtures of the GPU tests (the device libraries, or a clean skip); the CPU loops warmed."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from numoracle.kernels import get_backend
from numoracle.oracle import fused_cpu

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
