"""Rules for the negative log-likelihood loss and its backward op.

``nll_loss_forward`` picks ``-x[n, t_n]`` (times the class weight ``w[t_n]``: one
rounding) for every sample whose target is not ``ignore_index``; the ``sum``
reduction adds them (a contraction, exact in the exact regime; under the per-op
claim in the storage format, as eager torch's CPU kernel keeps its partial sums
in the tensor's dtype), the ``mean``
reduction divides that sum by the total weight (the number of counted samples
without weights, exact; else a sum of weights). Its second output is the total
weight (0 without a reduction, as torch leaves it). ``nll_loss_backward`` puts
``-w[t_n] g`` (divided by the total weight for ``mean``) at each sample's target
class and 0 elsewhere. The 2-D forms take ``(N, C, H, W)`` scores and
``(N, H, W)`` targets.

The other losses (mean squared error, L1, smooth L1 and Huber, KL divergence,
binary cross-entropy) reach the traced oracle as the elementwise ops and
reductions they are made of, and are bounded by composition.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ... import elementwise as ew
from ...tracked import Tracked, exact, folded, negated, sum_
from ...xp import array_module, like
from ..rules import Call, NoRule, RuleContext, reads_in_part, rule
from ._common import as_tracked, is_tracked, tmap_all
from ._softmax_rows import fused_log_softmax

__all__ = ["REDUCTIONS"]

#: ATen's reduction codes
REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _picked(ctx: RuleContext, x: Tracked, target: np.ndarray, weight: Any,
            ignore_index: int) -> tuple[Tracked, Tracked, np.ndarray]:
    """``(-x[n, t_n] w[t_n], w[t_n], kept)`` per sample (0 where ignored)."""
    t = np.asarray(target, dtype=np.int64)
    kept = t != ignore_index
    safe = np.where(kept, t, 0)
    x = folded(x)
    # (the host's indices and mask where the values are: a device refuses host arrays)
    kept_x, safe_x = like(kept, x.value), like(safe, x.value)
    if x.value.ndim == 1:
        pick = tmap_all(x, lambda a: a[safe_x])
    else:
        pick = tmap_all(x, lambda a: np.take_along_axis(a, safe_x[:, None], axis=1)[:, 0])
    # an ignored sample counts 0, whatever its row holds (inf * 0 would be NaN)
    neg = negated(replace(tmap_all(pick, lambda a: np.where(kept_x, a, 0.0)), n=pick.n))
    if weight is None:
        return neg, exact(ctx.array(kept.astype(np.float64))), kept
    w = as_tracked(weight, ctx.model)
    kept_w, safe_w = like(kept, w.value), like(safe, w.value)
    wt = tmap_all(w, lambda a: a[safe_w] * kept_w)
    return ew.mul(neg, wt, ctx.model), wt, kept


def _total(ctx: RuleContext, wt: Tracked) -> Tracked:
    flat = tmap_all(wt, np.ravel)
    return sum_(flat, axis=0, model=ctx.running_model()) if flat.value.size else \
        exact(flat.xp.zeros(()))


@rule("aten.nll_loss_forward.default", "aten.nll_loss2d_forward.default")
def nll_loss_rule(ctx: RuleContext, x: Tracked, target: np.ndarray, weight: Any,
                  reduction: int, ignore_index: int) -> tuple[Tracked, Tracked]:
    if reduction not in REDUCTIONS:
        raise NoRule(f"no rule for aten.nll_loss_forward with {reduction=}")
    picked, wt, _ = _picked(ctx, x, target, weight, ignore_index)
    if REDUCTIONS[reduction] == "none":  # torch leaves the total weight 0
        return picked, exact(picked.xp.zeros(()))
    total = _total(ctx, wt)
    s = sum_(tmap_all(picked, np.ravel), axis=0, model=ctx.running_model()) \
        if picked.value.ndim else picked
    if REDUCTIONS[reduction] == "sum":
        return s, total
    return ew.div(s, total, ctx.model), total


@reads_in_part("aten._log_softmax.default", "aten.nll_loss_forward.default")
def nll_loss_of_log_softmax(ctx: RuleContext, call: Call, target: np.ndarray, weight: Any,
                            reduction: int, ignore_index: int) -> tuple[Tracked, Tracked] | None:
    """:func:`nll_loss_rule` of a log-softmax of 2-D NumPy scores along their classes
    that nothing else reads (cross-entropy's forward): the log-softmax at each sample's
    target alone (:func:`~._softmax_rows.fused_log_softmax`'s ``at``: those elements'
    bits), rounded as the interpreter rounds the whole (``call.finish``, element by
    element), then the rule on them as scores of one class, each counted sample's
    target that class. None where the whole-rule loops do not run, with class weights,
    an ``ignore_index`` of 0, a target out of range or another reduction (then both
    rules run as they are)."""
    x, dim = call.args[0], call.args[1]
    if (weight is not None or ignore_index == 0 or reduction not in REDUCTIONS
            or not is_tracked(x) or not isinstance(x.value, np.ndarray) or x.value.ndim != 2
            or dim % 2 != 1):
        return None
    t = np.asarray(target, dtype=np.int64)
    classes = x.shape[1]
    kept = t != ignore_index
    safe = np.where(kept, t, 0)
    if t.shape != x.shape[:1] or not bool(np.all((safe >= -classes) & (safe < classes))):
        return None
    picked = fused_log_softmax(ctx, x, 1, at=safe)
    if picked is None:
        return None
    return nll_loss_rule(ctx, call.finish(picked), np.where(kept, 0, ignore_index), None,
                         reduction, ignore_index)


@rule("aten.nll_loss_backward.default", "aten.nll_loss2d_backward.default")
def nll_loss_backward_rule(ctx: RuleContext, grad: Tracked, x: Tracked, target: np.ndarray,
                           weight: Any, reduction: int, ignore_index: int,
                           total_weight: Tracked) -> Tracked:
    m = ctx.model
    t = np.asarray(target, dtype=np.int64)
    kept = t != ignore_index
    safe = np.where(kept, t, 0)
    g = as_tracked(grad, m)
    if weight is None:
        w = exact(ctx.array(kept.astype(np.float64)))
    else:
        w = as_tracked(weight, m)
        kept_w, safe_w = like(kept, w.value), like(safe, w.value)
        w = tmap_all(w, lambda a: a[safe_w] * kept_w)
    share = ew.mul(tmap_all(g, lambda a: np.broadcast_to(a, t.shape)), w, m)
    if REDUCTIONS[reduction] == "mean":
        share = ew.div(share, as_tracked(total_weight, m), m)
    kept_s = like(kept, share.value)
    share = tmap_all(share, lambda a: a * kept_s)
    share = negated(share)
    shape = x.shape
    axis = 1 if len(shape) > 1 else 0

    def place(a: Any) -> Any:
        out = array_module(a).zeros(shape)
        if len(shape) == 1:
            out[like(safe, a)] = a
            return out
        if len(shape) == 2 and isinstance(out, np.ndarray):  # (put_along_axis indexes
            out[np.arange(shape[0]), safe] = a  # every element of the output on NumPy)
            return out
        idx = like(np.expand_dims(safe, axis), a)
        np.put_along_axis(out, idx, np.expand_dims(a, axis), axis=axis)
        return out
    if array_module(share.value) is not np:
        return tmap_all(share, place)
    return _placed(tmap_all(share, lambda a: a), place)  # (radii broadcast to the samples)


def _placed(share: Tracked, place: Any) -> Tracked:
    """``share`` (NumPy's, one element per sample) placed into the scores' shape, 0
    elsewhere: the value into a fresh array; a radius or the magnitude that is 0 at
    every sample 0 everywhere, the read-only broadcast zero of an exact input's (the
    same values, and no array of the scores' size made, written or read), else placed."""
    out = exact(place(share.value))
    dense = {f: place(a) for f in ("ref_err", "det", "prob", "mag")
             if bool(np.any((a := getattr(share, f)) != 0))}
    n = share.n if np.ndim(share.n) == 0 else place(share.n)
    return replace(out, n=n, **dense)
