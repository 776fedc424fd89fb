"""Fixtures of the GPU tests: the device libraries, or a clean skip."""

from __future__ import annotations

from typing import Any

import pytest

from numoracle.kernels import get_backend

try:  # torch loaded before any test starts a thread: importing it later, while a
    # kernel thread of an earlier test lives, crashed the interpreter (SIGSEGV in
    # torch's extension loading)
    import torch  # noqa: F401
except ImportError:
    pass


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
