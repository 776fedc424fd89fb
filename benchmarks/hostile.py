"""Hostile kernels: matmul kernels that crash, hang, exit, run out of memory, write
to their inputs, answer differently each call or only right at first; and the
correct ones they are compared with.

The isolation benchmark's fault table and the isolation tests check the same
kernels. They are module-level functions, so an isolated worker process imports
them by name (``benchmarks.hostile``). :data:`CALLS` counts the calls of
:func:`first_calls_only` in this process; set ``CALLS[0] = 0`` to start again.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from typing import Any

import numpy as np

__all__ = ["CALLS", "aborts", "busy", "exits", "first_calls_only", "good", "good_linear",
           "hangs", "killed", "noise", "nondeterministic", "out_of_memory", "raises",
           "returns_list", "returns_none", "segfault", "writes_input", "writes_read_only"]


def good(a: Any, b: Any) -> dict[str, Any]:
    """A correct matmul."""
    return {"out": np.matmul(a, b)}


def good_linear(x: Any, weight: Any, grad_output: Any, bias: Any = None) -> dict[str, Any]:
    """A correct linear layer with its gradients."""
    out = {"y": x @ weight.T, "grad_input": grad_output @ weight,
           "grad_weight": grad_output.T @ x}
    if bias is not None:
        out["y"] = out["y"] + bias
        out["grad_bias"] = grad_output.sum(0)
    return out


def raises(a: Any, b: Any) -> dict[str, Any]:
    """Raises an exception."""
    raise RuntimeError("boom")


def returns_none(a: Any, b: Any) -> Any:
    """Returns None instead of its dict of outputs."""
    return None


def returns_list(a: Any, b: Any) -> Any:
    """Returns its output in a list instead of a dict."""
    return [np.matmul(a, b)]


def noise(a: Any, b: Any) -> dict[str, Any]:
    """A matmul off by a quarter of its magnitude: a wrong answer, no fault."""
    out = np.matmul(a, b)
    return {"out": out + np.float32(0.25) * (np.abs(out) + 1)}


def hangs(a: Any, b: Any) -> dict[str, Any]:
    """Sleeps 30 s before answering."""
    time.sleep(30)
    return good(a, b)


def busy(a: Any, b: Any) -> dict[str, Any]:
    """Spins for ever."""
    while True:
        pass


def segfault(a: Any, b: Any) -> dict[str, Any]:
    """Reads address 0: SIGSEGV."""
    ctypes.string_at(0)
    return good(a, b)


def aborts(a: Any, b: Any) -> dict[str, Any]:
    """SIGABRT."""
    os.abort()


def exits(a: Any, b: Any) -> dict[str, Any]:
    """Ends its process with status 3."""
    os._exit(3)


def killed(a: Any, b: Any) -> dict[str, Any]:
    """SIGKILL to its own process: what the out-of-memory killer does."""
    os.kill(os.getpid(), signal.SIGKILL)
    return good(a, b)


def out_of_memory(a: Any, b: Any) -> dict[str, Any]:
    """Raises MemoryError."""
    raise MemoryError("cannot allocate 1 TiB")


def writes_input(a: Any, b: Any) -> dict[str, Any]:
    """Zeroes its input ``a`` after computing, past the read-only view."""
    out = np.matmul(a, b)
    a.setflags(write=True)  # past the read-only view: the comparison after the call sees it
    a[...] = 0
    return {"out": out}


def writes_read_only(a: Any, b: Any) -> dict[str, Any]:
    """Scales its input ``a`` in place (a read-only view: it raises)."""
    a *= 2
    return good(a, b)


_RNG = np.random.default_rng(0)


def nondeterministic(a: Any, b: Any) -> dict[str, Any]:
    """Off by one on about half of its calls."""
    out = np.matmul(a, b)
    if _RNG.random() < 0.5:
        out = out + np.float32(1.0)
    return {"out": out}


#: calls of :func:`first_calls_only` in this process
CALLS = [0]


def first_calls_only(a: Any, b: Any) -> dict[str, Any]:
    """Right for its first three calls in a process, then off by one."""
    CALLS[0] += 1
    out = np.matmul(a, b)
    return {"out": out if CALLS[0] <= 3 else out + np.float32(1.0)}
