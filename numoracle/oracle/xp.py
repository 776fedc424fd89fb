"""The array module of an array: NumPy, or CuPy for device arrays.

The oracle is written once against the NumPy API; where its operands live on a
GPU (CuPy arrays) the same code runs there through the module this returns.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

__all__ = ["array_module", "release_cached_memory", "CACHED_MEMORY_KEPT"]

#: bytes of freed device memory the oracle's CuPy pool may keep between cases
CACHED_MEMORY_KEPT = 2**28


def array_module(a: Any) -> Any:
    """NumPy, or CuPy when ``a`` is a CuPy array (CuPy imported only then)."""
    if type(a).__module__.startswith("cupy"):
        import cupy  # noqa: PLC0415 - optional, only for device arrays

        return cupy
    return np


def release_cached_memory(keep: int = CACHED_MEMORY_KEPT) -> int:
    """Hand the device memory CuPy's default pool holds but no array uses back to
    the driver, when there is more than ``keep`` bytes of it; returns the bytes
    released (0 without CuPy loaded).

    The oracle's references on a GPU leave freed blocks in that pool, which a
    kernel allocating through another allocator (torch's, cuDNN's workspace)
    cannot use: with a realistic-size reference before it, cuDNN may find no
    engine that fits and raise. Called before every kernel call.
    """
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return 0
    pool = cupy.get_default_memory_pool()
    free = int(pool.free_bytes())
    if free <= keep:
        return 0
    pool.free_all_blocks()  # a free block split from a chunk still in use stays
    return free - int(pool.free_bytes())
