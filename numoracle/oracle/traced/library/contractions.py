"""Rules for ATen's matrix contractions: ``mm``, ``addmm``, ``bmm``, ``baddbmm``,
``dot``, ``mv``.

Each is one :func:`~numoracle.oracle.tracked.matmul` per output element, under
the claimed model's formats and order: the bound ``(c_in + gamma_h(u)) S`` plus
the operands' propagated radii, 0 in the exact regime. ``addmm``'s bias is a term
of the contraction when ``alpha = beta = 1`` (a kernel may add it first, last or
in between); other factors scale the product and the bias first, one rounding
each, and add them with one more.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...tracked import Tracked, add, matmul
from ..rules import RuleContext, rule
from ._common import as_tracked, scaled, tmap_all

__all__ = ["contract"]


def contract(ctx: RuleContext, a: Any, b: Any, bias: Any = None, *, alpha: Any = 1,
             beta: Any = 1) -> Tracked:
    """``beta * bias + alpha * (a @ b)`` over the last axis of ``a``."""
    m = ctx.model
    at, bt = as_tracked(a, m), as_tracked(b, m)
    if bias is None or float(beta) == 0.0:
        out = matmul(at, bt, m)
        return out if float(alpha) == 1.0 else scaled(ctx, out, float(alpha))
    ct = as_tracked(bias, m)
    if float(alpha) == 1.0 and float(beta) == 1.0:
        return matmul(at, bt, m, bias=ct)
    prod = matmul(at, bt, m)
    prod = prod if float(alpha) == 1.0 else scaled(ctx, prod, float(alpha))
    ct = ct if float(beta) == 1.0 else scaled(ctx, ct, float(beta))
    return add(prod, ct, m)


@rule("aten.mm.default", "aten.bmm.default")
def mm_rule(ctx: RuleContext, a: Any, b: Any) -> Tracked:
    return contract(ctx, a, b)


@rule("aten.addmm.default", "aten.baddbmm.default")
def addmm_rule(ctx: RuleContext, bias: Any, a: Any, b: Any, *, beta: Any = 1,
               alpha: Any = 1) -> Tracked:
    return contract(ctx, a, b, bias, alpha=alpha, beta=beta)


@rule("aten.dot.default", "aten.mv.default")
def dot_rule(ctx: RuleContext, a: Any, b: Any) -> Tracked:
    m = ctx.model
    at, bt = as_tracked(a, m), as_tracked(b, m)
    column = tmap_all(bt, lambda v: np.reshape(v, (-1, 1)))
    rows = at if at.value.ndim == 2 else tmap_all(at, lambda v: np.reshape(v, (1, -1)))
    out = matmul(rows, column, m)
    return tmap_all(out, lambda v: np.reshape(v, (-1,) if at.value.ndim == 2 else ()))
