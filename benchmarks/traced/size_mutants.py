"""Size-dependent bugs of kernels of traced references: each kernel is right
except at some sizes (rows past 64, a partial tile, query heads grouped over
several key/value heads). ``python -m benchmarks edges --traced`` counts the
cases ``check_kernel(fn, reference=...)`` takes to catch each; the functions are
module-level so that a repro finds them again."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["MUTANTS", "SPECS"]

#: size-dependent bugs of kernels of traced references, checked through
#: ``check_kernel(fn, reference=...)``: (kernel, what it needs); the references,
#: inputs and sizes are :data:`SPECS`
MUTANTS = (
    ("softmax_rows_past_64_unwritten", "rows > 64"),
    ("softmax_tail_tile_past_64_dropped", "n mod 128 > 64"),
    ("gqa_kv_head_interleaved", "heads_q > heads_kv > 1"),
)


def softmax(x):
    return torch.softmax(x, dim=-1)


def softmax_rows_past_64_unwritten(x):
    """A softmax whose launch covers 64 rows: the rows past them stay zero."""
    out = torch.softmax(x, dim=-1)
    out[64:] = 0
    return {"out": out}


def softmax_tail_tile_past_64_dropped(x):
    """A softmax over tiles of 128 whose last partial tile loses its entries past 64
    from the denominator (its tail masked as if the tile were half as long)."""
    n = x.shape[-1]
    e = torch.exp(x - x.amax(-1, keepdim=True))
    keep = torch.ones(n, dtype=torch.bool)
    if n % 128 > 64:
        keep[n - n % 128 + 64:] = False
    return {"out": e / (e * keep).sum(-1, keepdim=True)}


def attention(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def gqa_kv_head_interleaved(q, k, v):
    """Grouped-query attention reading key/value head ``h mod heads_kv`` for query
    head ``h`` (heads interleaved, as ``repeat`` instead of ``repeat_interleave``):
    right where the heads are equal or there is one key/value head."""
    idx = torch.arange(q.shape[-3]) % k.shape[-3]
    return {"out": torch.nn.functional.scaled_dot_product_attention(
        q, k[..., idx, :, :], v[..., idx, :, :])}


#: the reference, inputs and sizes of each traced mutant's check
SPECS: dict[str, tuple[Any, dict[str, tuple[str, ...]], dict[str, tuple[int, int]]]] = {
    "softmax_rows_past_64_unwritten": (softmax, {"x": ("rows", "n")},
                                       {"rows": (1, 128), "n": (1, 32)}),
    "softmax_tail_tile_past_64_dropped": (softmax, {"x": ("rows", "n")},
                                          {"rows": (1, 4), "n": (1, 256)}),
    "gqa_kv_head_interleaved": (attention, {"q": ("batch", "heads_q", "s", "d"),
                                            "k": ("batch", "heads_kv", "t", "d"),
                                            "v": ("batch", "heads_kv", "t", "d")},
                                {"batch": (1, 2), "heads_q": (1, 16), "heads_kv": (1, 8),
                                 "s": (1, 8), "t": (1, 8), "d": (1, 8)}),
}


