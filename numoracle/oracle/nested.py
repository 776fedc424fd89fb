"""Nested contractions of triple products, in the error-tracking arithmetic (DESIGN §2).

``out = sum_p sum_q a * b * c`` (an :func:`numpy.einsum` of three tracked
operands) where a kernel may nest the two sums either way, run each in any
order, and multiply the three factors in any association: a KAN layer's
input gradient ``sum_j sum_c g[b,j] W[j,i,c] B'_c(x[b,i])`` (``g @ W`` first, as
autograd does, or the basis sum first), its spline-scale gradient
``sum_b sum_c g[b,j] B_c(x[b,i]) coef[j,i,c]``.

Bound (deterministic), with ``S = sum |a||b||c|``, the propagated radius
``P = sum (r_a (|b|+r_b)(|c|+r_c) + |a| r_b (|c|+r_c) + |a||b| r_c)`` and
``h = height(outer) + height(inner) + 2`` (two product roundings)::

    P + gamma_h(u_acc) (S + P) + (h + 1) 2^emin_acc

(any nesting of the two sums has a path of at most ``h`` roundings from a term
to the result; the perturbed terms sum to at most ``S + P``). The probabilistic
bound replaces ``gamma`` by ``gamma~``. The oracle's float64 error is bounded
the same way with ``u = 2^-53`` over all ``outer * inner`` terms.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .precision import PrecisionModel, gamma, gamma_tilde
from .tracked import U64, Tracked, _fold_lo

__all__ = ["nested_contraction"]


def _e(spec: str, *ops: Any) -> Any:
    return np.einsum(spec, *ops, optimize=True)


def _prop(spec: str, a: Tracked, b: Tracked, c: Tracked, field: str) -> Any:
    ra, rb, rc = (np.broadcast_to(getattr(t, field), t.value.shape) for t in (a, b, c))
    aa, ab, ac = (np.abs(t.value) for t in (a, b, c))
    out = 0.0
    if np.any(ra):
        out = out + _e(spec, ra, ab + rb, ac + rc)
    if np.any(rb):
        out = out + _e(spec, aa, rb, ac + rc)
    if np.any(rc):
        out = out + _e(spec, aa, ab, rc)
    return out


def nested_contraction(spec: str, a: Tracked, b: Tracked, c: Tracked, model: PrecisionModel,
                       *, outer: int, inner: int) -> Tracked:
    """``einsum(spec, a, b, c)`` summed over ``outer * inner`` terms, nested in any
    way (see the module docstring for the bound).

    Parameters
    ----------
    spec : str
        An :func:`numpy.einsum` specification of three operands and one output.
    a, b, c : Tracked
        The factors (exact or carrying radii).
    model : PrecisionModel
        The kernel's precision model (accumulation format and unit).
    outer, inner : int
        The lengths of the two nested sums (``inner = 1`` for a single sum of
        triple products).
    """
    a, b, c = _fold_lo(a), _fold_lo(b), _fold_lo(c)
    with np.errstate(invalid="ignore", over="ignore"):
        value = _e(spec, a.value, b.value, c.value)
        S = _e(spec, np.abs(a.value), np.abs(b.value), np.abs(c.value))
        n = outer * inner
        S = S * (1.0 + 2.0 * float(gamma(np.asarray(n + 2), U64))) + n * 2.0**-1074
        order = model.order
        h = int(order.height(outer)) + int(order.height(inner)) + 2
        u = model.acc_unit()
        slack = (h + 1) * model.accumulate.tiny
        det_p = _prop(spec, a, b, c, "det")
        prob_p = _prop(spec, a, b, c, "prob")
        ref_p = _prop(spec, a, b, c, "ref_err")
        det = det_p + float(gamma(np.asarray(h), u)) * (S + det_p) + slack
        prob = prob_p + float(gamma_tilde(np.asarray(h), u, model.alpha)) * (S + prob_p) + slack
        ref_err = ref_p + float(gamma(np.asarray(n + 2), U64)) * (S + ref_p) + n * 2.0**-1074
    shape = np.shape(value)
    det, prob, ref_err = (np.array(np.broadcast_to(v, shape), dtype=np.float64)
                          for v in (det, prob, ref_err))
    with np.errstate(invalid="ignore"):
        over = ~(S + det < model.accumulate.max)  # may overflow (or NaN inputs): unjudged
    det[over] = prob[over] = np.inf
    return Tracked(value=np.asarray(value, np.float64), ref_err=ref_err, det=det, prob=prob,
                   mag=np.asarray(S, np.float64), n=n)
