"""Rules for ops that read or write a tensor at positions another tensor holds:
embedding lookups, ``index_put`` and ``scatter_add``.

Indices are integer tensors (NumPy arrays), exact: a class label, a token id
or a gather index selects one position, with no rounding.

* ``embedding`` selects rows of its weight: no arithmetic, every element keeps
  its bound (as ``index_select``, :mod:`.views`).
* ``index_put`` with ``accumulate=True`` and ``scatter_add`` add each source
  element into the position its index names, on top of the destination's own
  value: a position that receives ``c`` terms (its destination value counts
  where it is not an exact zero) is a sum of ``c`` terms in an order the kernel
  chooses (atomics on a GPU), bounded by ``gamma_{c-1}(u)`` times their
  magnitudes with ``u`` of the storage format under the per-op claim (eager
  torch adds into the destination tensor, rounding each time) and of the
  accumulation format otherwise (:func:`.pooling.scatter_add`, which the
  backward of pooling shares); 0 in the exact regime, where exact terms on a
  common grid keep every partial sum representable. This is the backward of an embedding lookup, of
  ``x[idx]`` and of ``gather``: a row used by several lookups gets the sum of
  their gradients.
* ``index_put`` without ``accumulate`` writes values: exact where every
  position is written at most once; where an index repeats, which value lands
  is up to the kernel, so such a case is refused by name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ...tracked import Tracked, aligned, bounded, lsb_exponent, tcat
from ...xp import like, to_numpy
from ..rules import NoRule, RuleContext, rule
from ._common import as_tracked, is_tracked, on_host, reach, surely_decided, tmap_all
from .pooling import scatter_add as _scatter
from .views import move

__all__ = ["accumulate_at"]


def accumulate_at(ctx: RuleContext, base: Any, src: Any, targets: np.ndarray) -> Any:
    """``base`` with each element of ``src`` added into the flat position of
    ``base`` that ``targets`` (``src``'s shape) names.

    An integer ``base`` and ``src`` are added exactly (NumPy arrays). Otherwise
    the result is tracked: the terms of each position are its destination
    value (unless an exact zero, which a first addition keeps exact) and the
    source elements sent there, summed as :func:`.pooling.scatter_add` bounds
    a sum in an order the kernel chooses.
    """
    shape = tuple(np.shape(base.value if is_tracked(base) else base))
    targets = np.asarray(targets, dtype=np.int64)
    if not is_tracked(base) and not is_tracked(src):
        out = np.array(base, copy=True)
        np.add.at(out.reshape(-1), targets.reshape(-1),
                  np.broadcast_to(np.asarray(src), targets.shape).reshape(-1))
        return out
    b = as_tracked(base, ctx.model)
    s = as_tracked(src, ctx.model)
    flat_b = tmap_all(b, lambda a: np.ravel(np.broadcast_to(a, shape)))
    flat_s = tmap_all(s, lambda a: np.ravel(np.broadcast_to(a, targets.shape)))
    keep = to_numpy((flat_b.value != 0) | (reach(flat_b) > 0))  # which terms are real
    where = np.concatenate([np.where(keep, np.arange(keep.size), -1), targets.reshape(-1)])
    terms = tcat([flat_b, flat_s], axis=0)
    with np.errstate(invalid="ignore"):  # an infinite term: its position is unbounded
        summed = _scatter(ctx, terms, where, shape, len(shape))
    return _exact_where_it_fits(ctx, summed, terms, where)


def _exact_where_it_fits(ctx: RuleContext, out: Tracked, terms: Tracked,
                         where: np.ndarray) -> Tracked:
    """``out`` with bound 0 at the positions whose sum is exact in any order:
    exact terms on a grid ``2^e`` whose magnitudes add up to at most
    ``2^(p + e)`` (``p`` the significant bits of the format the additions round
    in), so every partial sum is representable (the exact regime, DESIGN §2)."""
    xp = terms.xp
    used = like(where >= 0, terms.value)
    if (not bool(used.any()) or bool(xp.any(terms.det[used] != 0))
            or bool(xp.any(terms.ref_err[used] != 0))):
        return out
    values = terms.value[used]
    if not bool(xp.any(xp.isfinite(values) & (values != 0))):
        fits = out.mag == 0  # nothing but zeros added
    else:
        e = ctx.running_model().accumulate.p + lsb_exponent(values)
        top = math.inf if e > 1023 else math.ldexp(1.0, e)
        fits = out.mag <= top
    if not fits.any():
        return out
    return replace(out, det=np.where(fits, 0.0, out.det), prob=np.where(fits, 0.0, out.prob),
                   ref_err=np.where(fits, 0.0, out.ref_err))


@rule("aten.embedding.default")
def embedding_rule(ctx: RuleContext, weight: Any, indices: np.ndarray, padding_idx: int = -1,
                   scale_grad_by_freq: bool = False, sparse: bool = False) -> Any:
    idx = np.asarray(indices, dtype=np.int64)
    return move(weight, lambda a: np.take(a, like(idx, a), axis=0))


def _positions(shape: tuple[int, ...], indices: Sequence[Any]) -> np.ndarray:
    """The flat positions of a tensor of ``shape`` that ``x[indices]`` reads
    (ATen's optional index tensors: None keeps an axis whole)."""
    if not all(surely_decided(i) for i in indices if i is not None):
        raise NoRule("no rule for aten.index_put with a mask a kernel may decide otherwise "
                     "(its values lie within their bound of the threshold)")
    key = tuple(slice(None) if i is None else on_host(i) for i in indices)
    return np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)[key]


@rule("aten.index_put.default")
def index_put_rule(ctx: RuleContext, x: Any, indices: Sequence[Any], values: Any,
                   accumulate: bool = False) -> Any:
    shape = tuple(np.shape(x.value if is_tracked(x) else x))
    pos = _positions(shape, indices)
    if accumulate:
        return accumulate_at(ctx, x, move(values, lambda a: np.broadcast_to(a, pos.shape)),
                             pos)
    flat = pos.reshape(-1)
    if np.unique(flat).size != flat.size:
        raise NoRule("no rule for aten.index_put without accumulate at a repeated index: "
                     "which of the values written there lands is up to the kernel; index "
                     "each position once, or accumulate")
    if not is_tracked(x) and not is_tracked(values):
        out = np.array(x, copy=True)
        out.reshape(-1)[flat] = np.broadcast_to(np.asarray(values), pos.shape).reshape(-1)
        return out
    b, v = aligned(as_tracked(x, ctx.model), as_tracked(values, ctx.model))
    xp = b.xp
    at = like(flat, b.value)

    def put(get: Any) -> Any:
        out = xp.array(xp.broadcast_to(get(b), shape), dtype=xp.float64)
        out.reshape(-1)[at] = xp.broadcast_to(get(v), pos.shape).reshape(-1)
        return out

    def ns(t: Tracked) -> Any:
        return xp.broadcast_to(like(np.asarray(t.n, dtype=np.float64), b.value), t.value.shape)
    return bounded(put(lambda t: t.value), put(lambda t: t.det), put(lambda t: t.prob),
                   ref_err=put(lambda t: t.ref_err), mag=put(lambda t: t.mag),
                   n=np.asarray(to_numpy(put(ns))).astype(np.int64))


@rule("aten.scatter_add.default")
def scatter_add_rule(ctx: RuleContext, x: Any, dim: int, index: np.ndarray, src: Any) -> Any:
    shape = tuple(np.shape(x.value if is_tracked(x) else x))
    idx = np.asarray(index, dtype=np.int64)
    if idx.ndim == 0 or not shape:
        raise NoRule("no rule for aten.scatter_add on 0-d tensors")
    axis = dim % len(shape)
    coords: list[np.ndarray] = list(np.indices(idx.shape, dtype=np.int64))
    coords[axis] = np.where(idx < 0, idx + shape[axis], idx)
    targets = np.asarray(np.ravel_multi_index(tuple(coords), shape))
    part = tuple(slice(0, s) for s in idx.shape)
    return accumulate_at(ctx, x, move(src, lambda a: a[part]), targets)
