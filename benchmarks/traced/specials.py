"""Special values judged as values: masked softmax and attention, max pooling's
edges, and the formulations a careful kernel may choose.

* causal attention against ``F.scaled_dot_product_attention(..., is_causal=True)``:
  three kernels with a mask bug each (no mask, the mask off by one, the mask
  applied after the softmax), cases until caught;
* correct kernels of a padded-mask softmax and a padded-mask attention (rows
  fully masked included) and torch's own ``F.max_pool2d`` with its gradient on
  inputs with special values overlaid (infinities, NaN, zeros, subnormals):
  every alarm a false alarm;
* two formulations of each composite rule
  (:data:`benchmarks.traced.formulations.FORMULATIONS`): every alarm a false alarm.

:func:`specials` writes ``specials.json`` and ``specials.md``.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from benchmarks.record import meta, write_json, write_text
from benchmarks.traced.formulations import FORMULATIONS

__all__ = ["causal_attention", "padded_softmax", "padded_attention", "max_pool",
           "MUTANTS", "CORRECT", "specials"]

_INF = float("inf")


# -- references ------------------------------------------------------------------------

def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal scaled dot-product attention."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def padded_softmax(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A softmax over the keys a padding mask keeps (a row with none: NaN, torch's)."""
    return torch.softmax(x.masked_fill(~mask[:, None, :], -_INF), -1)


def padded_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     mask: torch.Tensor) -> torch.Tensor:
    """Attention over the keys a padding mask keeps (a row with none: 0, torch's)."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, :])


def max_pool(x: torch.Tensor) -> torch.Tensor:
    """3x3 max pooling, stride 2, padding 1."""
    return F.max_pool2d(x, 3, stride=2, padding=1)


# -- kernels ---------------------------------------------------------------------------

def _scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])


def _causal(n: int, diagonal: int = 0) -> torch.Tensor:
    return torch.ones(n, n, dtype=torch.bool).tril(diagonal)


def unmasked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> dict[str, torch.Tensor]:
    """Attention without its causal mask."""
    return {"out": F.scaled_dot_product_attention(q, k, v, is_causal=False)}


def mask_off_by_one(q: torch.Tensor, k: torch.Tensor,
                    v: torch.Tensor) -> dict[str, torch.Tensor]:
    """The causal mask one key too wide (each query sees the next key)."""
    s = _scores(q, k).masked_fill(~_causal(q.shape[-2], 1), -_INF)
    return {"out": torch.softmax(s, -1) @ v}


def mask_after_softmax(q: torch.Tensor, k: torch.Tensor,
                       v: torch.Tensor) -> dict[str, torch.Tensor]:
    """The causal mask applied to the probabilities, after the softmax."""
    p = torch.softmax(_scores(q, k), -1).masked_fill(~_causal(q.shape[-2]), 0.0)
    return {"out": p @ v}


def causal_by_hand(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> dict[str, torch.Tensor]:
    """Correct: masked scores, then an online softmax over blocks of 4 keys."""
    s = _scores(q, k).masked_fill(~_causal(q.shape[-2]), -_INF)
    m = torch.full(s.shape[:-1] + (1,), -_INF)
    total = torch.zeros(s.shape[:-1] + (1,))
    acc = torch.zeros(s.shape[:-1] + (v.shape[-1],))
    for j in range(0, s.shape[-1], 4):
        blk = s[..., j:j + 4]
        new = torch.maximum(m, blk.amax(-1, keepdim=True))
        scale = torch.exp(m - new)
        p = torch.exp(blk - new)
        total = total * scale + p.sum(-1, keepdim=True)
        acc = acc * scale + p @ v[..., j:j + 4, :]
        m = new
    return {"out": acc / total}


def padded_softmax_by_hand(x: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """Correct: the shift, the exponentials, the reciprocal of their sum."""
    s = x.masked_fill(~mask[:, None, :], -_INF)
    e = torch.exp(s - s.amax(-1, keepdim=True))
    return {"out": e * (1.0 / e.sum(-1, keepdim=True))}


def padded_softmax_torch(x: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """Correct: torch's own."""
    return {"out": padded_softmax(x, mask)}


def padded_attention_by_hand(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                             mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """Correct: masked scores, softmax, rows with no key set to 0."""
    s = _scores(q, k).masked_fill(~mask[:, None, :], -_INF)
    p = torch.softmax(s, -1)
    p = torch.where(mask.any(-1)[:, None, None], p, 0.0)
    return {"out": p @ v}


def padded_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                           mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """Correct: torch's own."""
    return {"out": padded_attention(q, k, v, mask)}


def max_pool_torch(x: torch.Tensor, grad_out: torch.Tensor) -> dict[str, torch.Tensor]:
    """Correct: torch's own max pooling and its backward."""
    x = x.detach().clone().requires_grad_(True)
    y = max_pool(x)
    y.backward(grad_out)
    assert x.grad is not None
    return {"out": y.detach(), "grad_x": x.grad}


_QKV = {"q": ("batch", "n", "d"), "k": ("batch", "n", "d"), "v": ("batch", "n", "d")}
_CAUSAL = {"reference": causal_attention, "inputs": _QKV,
           "dims": {"n": (1, 16), "d": (1, 8), "batch": (1, 4)}}
_PADDED_SOFTMAX = {"reference": padded_softmax,
                   "inputs": {"x": ("batch", "m", "n"), "mask": ("batch", "n")},
                   "booleans": ("mask",), "dims": {"n": (1, 16), "m": (1, 8), "batch": (1, 4)}}
_PADDED_ATTENTION = {"reference": padded_attention, "inputs": {**_QKV, "mask": ("batch", "n")},
                     "booleans": ("mask",), "dims": {"n": (1, 16), "d": (1, 8), "batch": (1, 4)}}
_MAX_POOL = {"reference": max_pool, "inputs": {"x": ("batch", "c", "h", "w")}, "grads": ("x",),
             "dims": {"h": (1, 12), "w": (1, 12), "c": (1, 3), "batch": (1, 3)},
             "max_overlays": 12}

#: name -> (kernel, check_kernel keyword arguments): each has one bug
MUTANTS: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {
    "causal attention without its mask": (unmasked, _CAUSAL),
    "causal mask off by one": (mask_off_by_one, _CAUSAL),
    "causal mask after the softmax": (mask_after_softmax, _CAUSAL),
}

#: name -> (kernel, check_kernel keyword arguments): each correct
CORRECT: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {
    "causal attention, online softmax by hand": (causal_by_hand, _CAUSAL),
    "padded softmax, by hand": (padded_softmax_by_hand, _PADDED_SOFTMAX),
    "padded softmax, torch": (padded_softmax_torch, _PADDED_SOFTMAX),
    "padded attention, by hand": (padded_attention_by_hand, _PADDED_ATTENTION),
    "padded attention, torch": (padded_attention_torch, _PADDED_ATTENTION),
    "max_pool2d with gradient and special values, torch": (max_pool_torch, _MAX_POOL),
}



def _check(kernel: Callable[..., Any], spec: dict[str, Any], examples: int,
           seed: int) -> dict[str, Any]:
    """Check ``kernel`` on ``examples`` cases: its verdict, and for a failure the
    cases drawn until the first failing one, the shrunk case and the diagnosis."""
    from numoracle.api import add_listener, check_kernel, remove_listener  # noqa: PLC0415

    seen: list[Any] = []
    add_listener(seen.append)
    t0 = time.perf_counter()
    try:
        r = check_kernel(kernel, backend="torch-cpu", examples=examples, seed=seed, store=None,
                         name=kernel.__name__, **spec)
        return {"verdict": r.verdict, "cases": r.cases, "failures": r.failures,
                "worst_ratio": r.worst_ratio, "seconds": round(time.perf_counter() - t0, 1)}
    except AssertionError as e:
        lines = [ln.strip() for ln in str(e).splitlines()]
        res = seen[-1] if seen else None
        return {"verdict": "fail",
                "caught_after": getattr(res, "cases_to_catch", None),
                "case": next((ln[len("case: "):] for ln in lines if ln.startswith("case:")), ""),
                "diagnosis": next((ln for ln in lines if ln.startswith("diagnosis:")), ""),
                "seconds": round(time.perf_counter() - t0, 1)}
    finally:
        remove_listener(seen.append)


def specials(examples: int, seed: int, out: Path, argv: list[str],
             only: list[str] | None = None) -> int:
    """Run every mutant (up to ``examples`` cases) and correct kernel (``examples``
    cases), or those whose name holds a word of ``only``; write ``specials.json``
    and ``specials.md`` under ``out``. Returns 1 when a mutant passes or a correct
    kernel fails, else 0."""
    warnings.simplefilter("ignore")
    rows: dict[str, dict[str, Any]] = {}
    for group, table in (("mutant", MUTANTS), ("correct", CORRECT),
                         ("formulation", FORMULATIONS)):
        for name, (kernel, spec) in table.items():
            if only and not any(w in name for w in only):
                continue
            res = _check(kernel, spec, examples, seed)
            res["group"] = group
            rows[name] = res
            print(f"{group:12s} {name:55s} {res}", flush=True)
    bad = [n for n, r in rows.items() if (r["group"] == "mutant") == (r["verdict"] == "pass")]
    write_json(out / "specials.json", {"meta": meta(argv), "rows": rows})
    lines = ["# Special values and formulations", "", f"Command: `{' '.join(argv)}`", "",
             "| group | kernel | verdict | cases | worst ratio / caught after | seconds |",
             "|---|---|---|---|---|---|"]
    for name, r in rows.items():
        detail = (f"{r['worst_ratio']:.3g}" if r["verdict"] == "pass"
                  else f"{r.get('caught_after')} ({r.get('case', '')})")
        lines.append(f"| {r['group']} | {name} | {r['verdict']} | {r.get('cases', '')} | "
                     f"{detail} | {r['seconds']} |")
    write_text(out / "specials.md", "\n".join(lines) + "\n")
    return 1 if bad else 0
