"""What a result's values say of the format a kernel stores in.

A model that rounds every op's result to a storage format narrower than the one
claimed (``<claimed>+bf16-rounding-per-op``: each intermediate and each output a
bf16 value) predicts outputs *on that format's grid*: whatever its error, an output
it computes is a bf16 value. A kernel that only accumulates in bf16 and stores its
outputs in fp32 (a softmax whose denominator is summed in bf16, divided in fp32)
returns values off that grid. The traced diagnosis reads this before it ranks the
models that fit by their ratios:

* an output off the grid rules the narrower-storage model out (:func:`off_grid`);
* outputs all on the grid, at least two of them where the exact values are not,
  are evidence for it: it is ranked before the models that store in the claimed
  format (:func:`on_grid`). A narrower arithmetic neither rules a model out nor
  ranks it (a kernel may divide in fp32 after summing in bf16; a sum's result is
  a value of the format it is accumulated in).

Only finite outputs count; a result whose exact values are themselves on the grid
(small integers, 1/2, a softmax of one element) says nothing either way.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..oracle.formats import Format, representable
from ..oracle.precision import PrecisionModel

__all__ = ["narrower_storage", "off_grid", "on_grid", "grid_note", "rule_out"]


def narrower_storage(model: PrecisionModel, claimed: PrecisionModel) -> Format | None:
    """The format ``model`` stores every result in where it is narrower than
    ``claimed``'s storage; None where it stores as wide (its outputs may be any
    value of the claimed format)."""
    return model.storage if model.storage.t < claimed.storage.t else None


def _finite(a: Any) -> np.ndarray:
    g = np.asarray(a, dtype=np.float64).reshape(-1)
    return g[np.isfinite(g)]


def off_grid(got: Any, model: PrecisionModel, claimed: PrecisionModel) -> tuple[int, int]:
    """``(k, n)``: of the ``n`` finite outputs in ``got``, ``k`` are not values of
    the narrower format ``model`` stores in; ``(0, n)`` where it stores as wide as
    ``claimed``."""
    g = _finite(got)
    fmt = narrower_storage(model, claimed)
    if fmt is None or g.size == 0:
        return 0, int(g.size)
    return int(np.count_nonzero(~representable(g, fmt))), int(g.size)


#: the outputs on a narrower grid, their exact values off it, that make evidence (one
#: may land there by chance: a product of short significands, a shrunk case's simple values)
EVIDENCE = 2


def on_grid(got: Any, exact: Any, model: PrecisionModel, claimed: PrecisionModel) -> bool:
    """Whether every finite output is a value of the narrower format ``model``
    stores in, and at least :data:`EVIDENCE` of them are where the exact value is
    not one: evidence that the kernel stores in it."""
    fmt = narrower_storage(model, claimed)
    g = np.asarray(got, dtype=np.float64).reshape(-1)
    e = np.broadcast_to(np.asarray(exact, dtype=np.float64), np.shape(got)).reshape(-1)
    keep = np.isfinite(g) & np.isfinite(e)
    if fmt is None or not keep.any():
        return False
    g, e = g[keep], e[keep]
    on = representable(g, fmt)
    return bool(np.all(on)) and int(np.count_nonzero(on & ~representable(e, fmt))) >= EVIDENCE


def grid_note(ruled: Iterable[tuple[PrecisionModel, int, int]]) -> str:
    """The sentence naming the models :func:`off_grid` ruled out, or empty."""
    parts = [f"{m.name} ruled out: it stores every result in {m.storage}, and {k} of {n} "
             f"outputs are not {m.storage} values" for m, k, n in ruled if k]
    return "; ".join(parts)


def rule_out(got: Any, claimed: PrecisionModel, fits: Iterable[PrecisionModel]
             ) -> tuple[list[PrecisionModel], str]:
    """The models of ``fits`` that ``got``'s values leave (none of its finite
    outputs off the grid of a narrower storage a model claims), and the sentence
    naming those it ruled out (:func:`grid_note`; empty where none)."""
    ruled = [(m, *off_grid(got, m, claimed)) for m in fits]
    return [m for m, k, _ in ruled if not k], grid_note(ruled)
