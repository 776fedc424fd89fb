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
      + 2 (1 + gamma_h(u_acc)) min(2^emin_acc M, S + P)

(any nesting of the two sums has a path of at most ``h`` roundings from a term
to the result; the perturbed terms sum to at most ``S + P``). The last line is
underflow *before* the last multiplication: the first product of a term (or an
inner sum of products, where the sums nest) may land below the normal range,
where its rounding error is absolute, and the remaining factor then scales
that error: a gradient of ``2^-149`` times a basis of 0.4 rounds to 0 in
float32 before a scale of ``1e36`` multiplies it. Such a rounding errs by at
most ``2^emin`` (flush to zero included) and by at most the magnitude of its
exact result (zero is a neighbour), so scaled by the remaining factor it adds
at most ``2^emin`` times that factor and at most the term's own magnitude. Per
term at most two such roundings (a product, and the inner sum it enters) meet
the remaining factor; with ``M = sum (|a| + r_a + |b| + r_b + |c| + r_c)`` (each
term's remaining factor bounded by the sum of the three) they add at most
``2 min(2^emin M, S + P)``, grown by the later roundings. The probabilistic
bound replaces ``gamma`` by ``gamma~``. The oracle's float64 error is bounded
the same way with ``u = 2^-53`` over all ``outer * inner`` terms, and its
underflow before the last factor (at most ``2^-1075`` scaled, twice per term)
by ``2^-1074 M``, in ``S`` as in the value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .precision import PrecisionModel, gamma, gamma_prob
from .tracked import U64, Tracked, any_nonzero, bounded, folded

__all__ = ["nested_contraction"]


def _e(spec: str, *ops: Any) -> Any:
    return np.einsum(spec, *ops, optimize=True)


def _prop(spec: str, a: Tracked, b: Tracked, c: Tracked, field: str) -> Any:
    ra, rb, rc = (np.broadcast_to(getattr(t, field), t.value.shape) for t in (a, b, c))
    aa, ab, ac = (np.abs(t.value) for t in (a, b, c))
    out = 0.0
    if any_nonzero(ra):
        out = out + _e(spec, ra, ab + rb, ac + rc)
    if any_nonzero(rb):
        out = out + _e(spec, aa, rb, ac + rc)
    if any_nonzero(rc):
        out = out + _e(spec, aa, ab, rc)
    return out


def _largest_factors(spec: str, a: Tracked, b: Tracked, c: Tracked) -> Any:
    """``sum over the terms of (|a| + r_a + |b| + r_b + |c| + r_c)``: a bound on the
    sum of each term's largest factor (the one that may scale an underflow)."""
    ones = [np.ones(t.value.shape) for t in (a, b, c)]
    out = 0.0
    for k, t in enumerate((a, b, c)):
        mag = np.abs(t.value) + np.broadcast_to(t.det, t.value.shape) \
            + np.broadcast_to(t.ref_err, t.value.shape)
        ops = list(ones)
        ops[k] = mag
        out = out + _e(spec, *ops)
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
    a, b, c = folded(a), folded(b), folded(c)
    with np.errstate(invalid="ignore", over="ignore"):
        value = _e(spec, a.value, b.value, c.value)
        S = _e(spec, np.abs(a.value), np.abs(b.value), np.abs(c.value))
        n = outer * inner
        big = _largest_factors(spec, a, b, c)
        # S is summed in float64, where a term's first product may underflow too
        S = S * (1.0 + 2.0 * float(gamma(np.asarray(n + 2), U64))) + n * 2.0**-1074 \
            + 2.0**-1074 * big
        order = model.order
        h = int(order.height(outer)) + int(order.height(inner)) + 2
        u = model.acc_unit()
        slack = (h + 1) * model.accumulate.tiny
        det_p = _prop(spec, a, b, c, "det")
        prob_p = _prop(spec, a, b, c, "prob")
        ref_p = _prop(spec, a, b, c, "ref_err")
        # underflow scaled by a later factor (module docstring)
        slack = slack + 2.0 * (1.0 + float(gamma(np.asarray(h), u))) * np.minimum(
            model.accumulate.tiny * big, S + np.maximum(det_p, prob_p) + ref_p)
        det = det_p + float(gamma(np.asarray(h), u)) * (S + det_p) + slack
        chain = max(int(order.chain(outer)), int(order.chain(inner)))
        prob = prob_p + float(gamma_prob(np.asarray(h), u, model.alpha, chain)) * (
            S + prob_p) + slack
        ref_err = ref_p + float(gamma(np.asarray(n + 2), U64)) * (S + ref_p) + n * 2.0**-1074
        # float64's own underflow before the last factor (at most half a subnormal step)
        ref_err = ref_err + np.minimum(2.0**-1074 * big, 2.0 * (S + ref_p))
    shape = np.shape(value)
    det, prob, ref_err = (np.array(np.broadcast_to(v, shape), dtype=np.float64)
                          for v in (det, prob, ref_err))
    with np.errstate(invalid="ignore"):
        over = ~(S + det < model.accumulate.max)  # may overflow (or NaN inputs): unjudged
    det[over] = prob[over] = np.inf
    return bounded(np.asarray(value, np.float64), det, prob, ref_err=ref_err, mag=S, n=n)
