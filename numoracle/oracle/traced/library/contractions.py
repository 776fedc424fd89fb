"""Rules for ATen's matrix contractions: ``mm``, ``addmm``, ``bmm``, ``baddbmm``,
``dot``, ``mv``.

Each is one :func:`~numoracle.oracle.tracked.matmul` per output element, under
the claimed model's formats and order: the bound ``(c_in + gamma_h(u)) S`` plus
the operands' propagated radii, 0 in the exact regime. ``addmm``'s bias is a term
of the contraction when ``alpha = beta = 1`` (a kernel may add it first, last or
in between); other factors scale the product and the bias first, one rounding
each, and add them with one more; a kernel that scales an operand by ``alpha``
before the contraction (BLAS) rounds each product once more, ``2 u |alpha| S``,
and one that adds ``(beta / alpha) bias`` before scaling by ``alpha`` rounds twice
more, ``2 u (|beta bias| + |result|)``. A model claiming ``bias_after_store``
(an unfused epilogue, as torch's CUDA ``F.linear`` computes some shapes in bf16
and fp16) rounds the product to the storage format before the bias is added.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ...tracked import Tracked, add, matmul, store
from ..rules import RuleContext, rule
from ._common import as_tracked, scaled, tmap_all

__all__ = ["contract"]


def _times_alpha(ctx: RuleContext, prod: Tracked, alpha: float) -> Tracked:
    """``alpha * prod``; a kernel may scale an operand by ``alpha`` before the
    contraction instead (BLAS), one more rounding per product: ``2 u |alpha| S``."""
    if alpha == 1.0:
        return prod
    out = scaled(ctx, prod, alpha)
    extra = 2.0 * ctx.model.acc_unit() * abs(alpha) * prod.mag
    return replace(out, det=out.det + extra, prob=out.prob + extra)


def contract(ctx: RuleContext, a: Any, b: Any, bias: Any = None, *, alpha: Any = 1,
             beta: Any = 1) -> Tracked:
    """``beta * bias + alpha * (a @ b)`` over the last axis of ``a``."""
    m = ctx.model
    at, bt = as_tracked(a, m), as_tracked(b, m)
    if bias is None or float(beta) == 0.0:
        return _times_alpha(ctx, matmul(at, bt, m), float(alpha))
    ct = as_tracked(bias, m)
    if float(alpha) == 1.0 and float(beta) == 1.0:
        return matmul(at, bt, m, bias=ct)
    prod = _times_alpha(ctx, matmul(at, bt, m), float(alpha))
    ct = ct if float(beta) == 1.0 else scaled(ctx, ct, float(beta))
    out = add(prod, ct, m)
    # a kernel may also scale the bias by beta / alpha, add, and scale the sum by
    # alpha: two more roundings, relative to |beta bias| and to the result
    extra = 2.0 * m.acc_unit() * (np.abs(ct.value) + np.abs(out.value))
    return replace(out, det=out.det + extra, prob=out.prob + extra)


@rule("aten.mm.default", "aten.bmm.default")
def mm_rule(ctx: RuleContext, a: Any, b: Any) -> Tracked:
    return contract(ctx, a, b)


@rule("aten.addmm.default", "aten.baddbmm.default")
def addmm_rule(ctx: RuleContext, bias: Any, a: Any, b: Any, *, beta: Any = 1,
               alpha: Any = 1) -> Tracked:
    m = ctx.model
    if not m.bias_after_store or float(beta) == 0.0:
        return contract(ctx, a, b, bias, alpha=alpha, beta=beta)
    # the claim of an unfused epilogue: the product rounded to storage, then the bias
    ct = as_tracked(bias, m)
    ct = ct if float(beta) == 1.0 else scaled(ctx, ct, float(beta))
    return add(store(contract(ctx, a, b, alpha=alpha), m), ct, m)


@rule("aten.dot.default", "aten.mv.default")
def dot_rule(ctx: RuleContext, a: Any, b: Any) -> Tracked:
    m = ctx.model
    at, bt = as_tracked(a, m), as_tracked(b, m)
    column = tmap_all(bt, lambda v: np.reshape(v, (-1, 1)))
    rows = at if at.value.ndim == 2 else tmap_all(at, lambda v: np.reshape(v, (1, -1)))
    out = matmul(rows, column, m)
    return tmap_all(out, lambda v: np.reshape(v, (-1,) if at.value.ndim == 2 else ()))
