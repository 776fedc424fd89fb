"""The array module of an array: NumPy, or CuPy for device arrays.

The oracle is written once against the NumPy API; where its operands live on a
GPU (CuPy arrays) the same code runs there through the module this returns.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["array_module"]


def array_module(a: Any) -> Any:
    """NumPy, or CuPy when ``a`` is a CuPy array (CuPy imported only then)."""
    if type(a).__module__.startswith("cupy"):
        import cupy  # noqa: PLC0415 - optional, only for device arrays

        return cupy
    return np
