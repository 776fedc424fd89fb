"""What the row-wise Triton examples share: a row-major 2-D view and its block size."""

from __future__ import annotations

from typing import Any

import triton


def rows_of(x: Any) -> tuple[Any, int, int, int]:
    """``x`` as a contiguous (rows, n) tensor, its row count, length and block size."""
    n = x.shape[-1]
    x2 = x.contiguous().view(-1, n)
    return x2, x2.shape[0], n, triton.next_power_of_2(max(n, 1))
