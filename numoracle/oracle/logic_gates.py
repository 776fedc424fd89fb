"""Relaxed two-input logic gates (Petersen et al. 2022, ``difflogic``) in the
error-tracking arithmetic: the building blocks of :mod:`numoracle.oracle.ops.logic_layer`
and :mod:`numoracle.oracle.ops.logic_ca`.

The 16 gates, in ``difflogic``'s order (``difflogic/functional.py``, ``bin_op``),
each a polynomial ``c1 + ca a + cb b + cab ab`` of its two inputs:

== ================= =================== ==== ==== ==== ====
id gate              difflogic's formula  c1   ca   cb   cab
== ================= =================== ==== ==== ==== ====
0  False             ``0``                0    0    0    0
1  a AND b           ``a * b``            0    0    0    1
2  a AND NOT b       ``a - a * b``        0    1    0   -1
3  a                 ``a``                0    1    0    0
4  NOT a AND b       ``b - a * b``        0    0    1   -1
5  b                 ``b``                0    0    1    0
6  XOR               ``a + b - 2 * a * b`` 0   1    1   -2
7  OR                ``a + b - a * b``    0    1    1   -1
8  NOR               ``1 - (a + b - a * b)`` 1 -1   -1    1
9  XNOR              ``1 - (a + b - 2 * a * b)`` 1 -1 -1  2
10 NOT b             ``1 - b``            1    0   -1    0
11 a OR NOT b        ``1 - b + a * b``    1    0   -1    1
12 NOT a             ``1 - a``            1   -1    0    0
13 NOT a OR b        ``1 - a + a * b``    1   -1    0    1
14 NAND              ``1 - a * b``        1    0    0   -1
15 True              ``1``                1    0    0    0
== ================= =================== ==== ==== ==== ====

A neuron mixes them with the softmax of its 16 logits ``w``:
``y = sum_g softmax(w)_g gate_g(a, b)``.

Bounds. Every output of a logic layer is a polynomial in its exact inputs; the
oracle expands it into monomials (a gate's ``c1``, ``ca a``, ``cb b`` and ``cab ab``
are separate terms, gate by gate: the monomials of different gates are never
merged) and sums the terms as one contraction in any order (height ``n - 1`` for
``n`` terms, :func:`~numoracle.oracle.tracked.matmul`), with the factor ``ab``
(and, in the backward pass, ``g b``, ``g a``, ``g ab``) a tracked product
(:func:`~numoracle.oracle.elementwise.mul`: one more rounding) and the softmax
probabilities tracked operands (``exp`` with its ulps, the sum, the division or
the product with the reciprocal: :func:`softmax`). Any evaluation of the sum of
products that uses the formulas above (difflogic's ``r = r + p_g * gate_g``, a
closed form that first sums the coefficients, autograd's reverse mode through
either) rounds each term along a path of at most as many operations as the
contraction's height charges, and the absolute-value evaluation of every such
formula is the sum of the magnitudes of its monomials, so the bound
``gamma_h(u) S`` holds for all of them. The gradient of the logits is
``p * (G - <p, G>)`` with ``G`` the gradient of the probabilities summed over
the batch (and over cells and steps): a kernel that merges ``G`` first and
applies the softmax backward once (autograd on shared probabilities, the CuPy
kernels here) is covered; one that applies the softmax backward per cell and
sums the results rounds differently and is not.

The exact regime does not apply: the probabilities carry the rounding of
``exp`` and of the division even where a kernel happens to compute them exactly.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from .elementwise import amax, div, exp, mul
from .precision import PrecisionModel, gamma
from .tracked import (
    U64,
    Tracked,
    bounded,
    either,
    exact,
    folded,
    scaled_exactly,
    sub,
    sum_,
    tcat,
    tmap,
)

__all__ = ["GATE_NAMES", "GATE_FORMULAS", "COEF", "N_GATES", "gate_values", "softmax",
           "softmax_backward", "take", "scale", "layer_forward", "layer_backward",
           "gate_prob_grad", "LayerCache", "tmap", "tcat"]

N_GATES = 16
GATE_NAMES = ("false", "and", "a_and_not_b", "a", "not_a_and_b", "b", "xor", "or", "nor",
              "xnor", "not_b", "a_or_not_b", "not_a", "not_a_or_b", "nand", "true")
GATE_FORMULAS = ("0", "a * b", "a - a * b", "a", "b - a * b", "b", "a + b - 2 * a * b",
                 "a + b - a * b", "1 - (a + b - a * b)", "1 - (a + b - 2 * a * b)", "1 - b",
                 "1 - b + a * b", "1 - a", "1 - a + a * b", "1 - a * b", "1")
#: ``COEF[g] = (c1, ca, cb, cab)``: gate ``g`` is ``c1 + ca a + cb b + cab ab``
COEF = np.array([
    (0, 0, 0, 0), (0, 0, 0, 1), (0, 1, 0, -1), (0, 1, 0, 0),
    (0, 0, 1, -1), (0, 0, 1, 0), (0, 1, 1, -2), (0, 1, 1, -1),
    (1, -1, -1, 1), (1, -1, -1, 2), (1, 0, -1, 0), (1, 0, -1, 1),
    (1, -1, 0, 0), (1, -1, 0, 1), (1, 0, 0, -1), (1, 0, 0, 0)], dtype=np.float64)

#: the (gate, monomial) pairs with a nonzero coefficient: monomial 0 = 1, 1 = a,
#: 2 = b, 3 = ab
_Y_TERMS = [(g, m, COEF[g, m]) for g in range(N_GATES) for m in range(4) if COEF[g, m]]
#: d gate / d a = ca + cab b: monomial 0 = 1, 1 = b
_DA_TERMS = [(g, m, COEF[g, (1, 3)[m]]) for g in range(N_GATES) for m in range(2)
             if COEF[g, (1, 3)[m]]]
#: d gate / d b = cb + cab a: monomial 0 = 1, 1 = a
_DB_TERMS = [(g, m, COEF[g, (2, 3)[m]]) for g in range(N_GATES) for m in range(2)
             if COEF[g, (2, 3)[m]]]


def gate_values(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The 16 gates of plain float64 arrays, by the table's polynomials:
    ``(..., 16)`` (for tests and cross-checks)."""
    a, b = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
    mono = np.stack([np.ones_like(a), a, b, a * b], axis=-1)
    return mono @ COEF.T


# -- tracked helpers ----------------------------------------------------------------------------
def take(t: Tracked, idx: np.ndarray) -> Tracked:
    """Columns ``idx`` of a ``(B, I)`` tracked array: ``(B, len(idx))``."""
    return tmap(t, lambda a: a[:, idx])


def scale(t: Tracked, c: float) -> Tracked:
    """``c t`` for ``c`` in ``{±1, ±2}``: exact (a power of two), radii scaled by ``|c|``."""
    return scaled_exactly(t, c)


def _ones(shape: tuple[int, ...]) -> Tracked:
    return exact(np.ones(shape))


# -- softmax ------------------------------------------------------------------------------------
def softmax(w: Tracked, model: PrecisionModel) -> Tracked:
    """``softmax(w)`` over the last axis of ``(J, 16)`` logits, as torch computes it:
    ``e = exp(w - max w)`` (the subtraction rounded, ``exp`` within its ulps), the
    sum of ``e`` in any order, then ``e / s`` or ``e * (1 / s)`` (either)."""
    m = amax(w, axis=-1, keepdims=True)
    e = exp(sub(w, m, model), model)
    s = tmap(sum_(e, axis=-1, model=model), lambda a: a[:, None])
    quotient = div(e, s, model)
    product = mul(e, div(_ones(s.shape), s, model), model)
    return either(quotient, product)


def softmax_backward(p: Tracked, grad_p: Tracked, model: PrecisionModel) -> Tracked:
    """``p * (G - sum(G * p))`` over the last axis (torch's softmax backward)."""
    dot = tmap(sum_(mul(grad_p, p, model), axis=-1, model=model), lambda a: a[:, None])
    return mul(p, sub(grad_p, dot, model), model)


# -- a layer ------------------------------------------------------------------------------------
class LayerCache:
    """What a layer's forward pass keeps for its backward pass: the gathered inputs
    ``a``, ``b`` and their product ``ab`` (each ``(B, J)``, tracked)."""

    def __init__(self, a: Tracked, b: Tracked, ab: Tracked, idx_a: np.ndarray,
                 idx_b: np.ndarray, n_in: int) -> None:
        self.a, self.b, self.ab = a, b, ab
        self.idx_a, self.idx_b, self.n_in = idx_a, idx_b, n_in


def _block_diag(p: Tracked, cols: list[int], n: int) -> Tracked:
    """``(J * K, J)`` with ``p[j, cols[k]]`` at ``(j K + k, j)`` and exact zeros elsewhere."""
    j = p.shape[0]
    k = len(cols)
    rows = np.arange(j)[:, None] * k + np.arange(k)[None, :]

    def place(a: Any) -> Any:
        out = np.zeros((j * k, n))
        out[rows, np.arange(j)[:, None]] = a[:, cols]
        return out
    return tmap(p, place)


def _radii(t: Tracked) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three radii by which a kernel's (det, prob) and the oracle's (ref) value
    of ``t`` may lie from the exact one: ``det + ref``, ``prob + ref``, ``ref``."""
    full = lambda a: np.broadcast_to(a, t.value.shape)  # noqa: E731
    return full(t.det + t.ref_err), full(t.prob + t.ref_err), full(t.ref_err)


def _widened(t: Tracked, det: Any, prob: Any, ref: Any) -> Tracked:
    """``t`` with the radii grown (an upper bound: the float64 sums of the extra
    radii are rounded up)."""
    up = 1.0 + 2.0**-40
    with np.errstate(invalid="ignore", over="ignore"):
        return replace(t, det=t.det + det * up, prob=t.prob + prob * up,
                       ref_err=t.ref_err + ref * up)


def term_sum(value: np.ndarray, S: np.ndarray, n: Any, factors: np.ndarray,
             model: PrecisionModel, products: int = 2) -> Tracked:
    """A sum of ``n`` products of up to ``products + 1`` exact factors, in any
    order, from its float64 ``value``, the sum ``S`` of the magnitudes of its
    terms and ``factors``, the sum over its terms of ``1 + sum |factor|``.

    Bound (deterministic), ``h = height(n) + products``::

        gamma_h(u_acc) S + (h + 1) 2^emin_acc + 2 2^emin_acc factors

    (the last term: a product that underflows before its last factor, scaled by
    it, as in :mod:`numoracle.oracle.nested`); the probabilistic bound with
    ``gamma~_h``; the oracle's own error ``gamma_{n + products}(2^-53) S``. Where ``S``
    may overflow the accumulation format the element is not judged."""
    n_arr = np.asarray(n, dtype=np.int64)
    h = model.order.height(np.maximum(n_arr, 1)) + products
    u, acc = model.acc_unit(), model.accumulate
    with np.errstate(invalid="ignore", over="ignore"):
        S = S * (1.0 + 2.0**-40)
        tiny = (h + 1) * acc.tiny + 2.0 * acc.tiny * factors
        det = gamma(h, u) * S + tiny
        prob = model.gamma_prob(h, np.maximum(n_arr, 1)) * S + tiny
        ref = gamma(n_arr + products, U64) * S + 2.0**-1022 * (factors + n_arr + 1)
        det, prob, ref = (np.array(np.broadcast_to(a, value.shape), dtype=np.float64)
                          for a in (det, prob, ref))
        over = ~(S * (1.0 + gamma(h, u)) < acc.max)
    if over.any():
        det[over] = prob[over] = np.inf
    return bounded(value, det, prob, ref_err=ref, mag=S,
                   n=np.broadcast_to(n_arr, value.shape) if n_arr.ndim else int(n_arr))


def layer_forward(x: Tracked, idx_a: np.ndarray, idx_b: np.ndarray, p: Tracked,
                  model: PrecisionModel) -> tuple[Tracked, LayerCache]:
    """``y[b, j] = sum_g p[j, g] gate_g(x[b, idx_a[j]], x[b, idx_b[j]])``: ``(B, J)``,
    with the cache for :func:`layer_backward`.

    The kernel's rounding is bounded at the oracle's operands (:func:`term_sum` of
    the 34 monomial terms ``c p_g m``, ``m`` in ``1, a, b, ab``); the radii of ``x``
    and ``p`` propagate through the exact derivatives at that point (``y`` is
    bilinear in ``a, b`` and linear in ``p``): ``|Da| r_a + |Db| r_b + sum_g
    |gate_g| r_p`` plus the second-order terms of the monomial expansion, and the
    kernel's rounding at its own operands adds ``gamma_h`` times the growth of
    ``S`` over the radii."""
    x = folded(x)
    a, b = take(x, idx_a), take(x, idx_b)
    av, bv, pv = a.value, b.value, folded(p).value  # (B, J), (B, J), (J, 16)
    k = len(_Y_TERMS)
    with np.errstate(invalid="ignore", over="ignore"):
        mono = np.stack([np.ones_like(av), av, bv, av * bv], axis=-1)  # (B, J, 4)
        value = np.sum(mono * (pv @ COEF)[None], axis=-1)
        S = np.sum(np.abs(mono) * (np.abs(pv) @ np.abs(COEF))[None], axis=-1)
        y = term_sum(value, S, k, k * (2.0 + np.abs(av) + np.abs(bv)), model)
    c1, ca, cb, cab = (COEF[:, i] for i in range(4))
    gam = gamma(model.order.height(k) + 2, model.acc_unit())
    da = pv @ ca + (pv @ cab) * bv  # (B, J)
    db = pv @ cb + (pv @ cab) * av
    abs_gates = np.abs(gate_values(av, bv))  # (B, J, 16)
    aa, ba = np.abs(av), np.abs(bv)
    pa = np.abs(pv)  # (J, 16)
    # the sums over the 16 gates as per-neuron vectors (J,): every term is >= 0
    c1_, ca_, cb_, cab_ = np.abs(c1), np.abs(ca), np.abs(cb), np.abs(cab)
    # the three radii (det, prob, ref) along a leading axis: the same arithmetic, once
    with np.errstate(invalid="ignore", over="ignore"):
        ra, rb = np.stack(_radii(a)), np.stack(_radii(b))  # (3, B, J)
        rp = np.stack(_radii(p))  # (3, J, 16)
        pr = pa + rp
        r_ca, r_cb, r_cab, r_c1 = (rp @ v for v in (ca_, cb_, cab_, c1_))  # (3, J) each
        p_ca, p_cb, p_cab = (pr @ v for v in (ca_, cb_, cab_))
        first = (np.abs(da) * ra + np.abs(db) * rb
                 + np.einsum("bjg,rjg->rbj", abs_gates, rp))
        r_ca, r_cb, r_cab, r_c1, p_ca, p_cb, p_cab = (
            v[:, None, :] for v in (r_ca, r_cb, r_cab, r_c1, p_ca, p_cb, p_cab))
        second = (ra * r_ca + rb * r_cb + (ra * ba + aa * rb) * r_cab + ra * rb * p_cab)
        grow = (ra * p_ca + rb * p_cb + (aa * rb + ra * ba + ra * rb) * p_cab
                + r_c1 + aa * r_ca + ba * r_cb + aa * ba * r_cab)
        extra = first + second + gam * grow
    det, prob, ref = extra
    y = _widened(y, det, prob, ref)
    return y, LayerCache(a, b, mul(a, b, model), idx_a, idx_b, x.shape[1])


def _pairs(lin: np.ndarray, cab: np.ndarray) -> list[tuple[tuple[float, float], np.ndarray]]:
    """The gates grouped by their pair ``(lin_g, cab_g)``: each distinct pair and
    the gates that have it."""
    keys = sorted({(float(x), float(y)) for x, y in zip(lin, cab, strict=True)})
    return [(k, np.flatnonzero((lin == k[0]) & (cab == k[1]))) for k in keys]


def _pair_table(lin: np.ndarray, cab: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_pairs` as arrays: the pairs' ``lin`` and ``cab`` values ``(P,)`` and
    the ``(16, P)`` indicator of the gates that have each pair."""
    pairs = _pairs(lin, cab)
    ind = np.zeros((N_GATES, len(pairs)))
    for q, (_, idx) in enumerate(pairs):
        ind[idx, q] = 1.0
    return (np.array([k[0] for k, _ in pairs]), np.array([k[1] for k, _ in pairs]), ind)


#: per side of a layer's backward pass (d / d a, d / d b): the gates' linear
#: coefficient, its magnitude and the pair table of (linear, cab)
_SIDES = tuple((COEF[:, i], np.abs(COEF[:, i]), _pair_table(COEF[:, i], COEF[:, 3]))
               for i in (1, 2))
_ABS_CAB = np.abs(COEF[:, 3])


def layer_backward(gy: Tracked, p: Tracked, cache: LayerCache,
                   model: PrecisionModel) -> Tracked:
    """The input gradient ``(B, I)`` of a layer for the upstream gradient ``gy``
    ``(B, J)``: every neuron's ``gy p_g d gate_g / d a`` (and ``/ d b``) expanded into
    terms ``c gy p_g`` and ``c gy p_g b`` (``a``), 18 per neuron and side, summed per
    input in any order over every neuron that reads it (:func:`term_sum`); the radii
    of ``gy``, ``p`` and the layer's inputs propagate through the exact derivatives,
    as in :func:`layer_forward`."""
    gy = folded(gy)
    n_out = gy.shape[1]
    n_in = cache.n_in
    gv, pv = gy.value, folded(p).value
    av, bv = cache.a.value, cache.b.value
    cab = COEF[:, 3]
    scatter = np.zeros((2 * n_out, n_in))
    scatter[np.arange(n_out), cache.idx_a] = 1.0
    scatter[n_out + np.arange(n_out), cache.idx_b] = 1.0
    per_side = np.array([len(_DA_TERMS), len(_DB_TERMS)])
    count = (np.repeat(per_side, n_out) @ scatter).astype(np.int64)  # terms per input
    n_terms = np.maximum(count, 1)[None, :]
    gam = gamma(model.order.height(n_terms) + 2, model.acc_unit())
    pa = np.abs(pv)  # (J, 16)
    values, mags, facs = [], [], []
    with np.errstate(invalid="ignore", over="ignore"):
        for lin, other, k in ((COEF[:, 1], bv, len(_DA_TERMS)), (COEF[:, 2], av, len(_DB_TERMS))):
            values.append(gv * (pv @ lin + (pv @ cab) * other))
            mags.append(np.abs(gv) * (np.abs(pv) @ np.abs(lin)
                                      + (np.abs(pv) @ np.abs(cab)) * np.abs(other)))
            facs.append(k * (2.0 + np.abs(gv) + np.abs(other)))
        out = term_sum(np.concatenate(values, axis=1) @ scatter,
                       np.concatenate(mags, axis=1) @ scatter, n_terms,
                       np.concatenate(facs, axis=1) @ scatter, model)
    # the sums over the 16 gates as per-neuron vectors (J,), every term >= 0; the one
    # sum that is not linear in the operand, sum_g |lin_g + cab_g o| r_g, per
    # distinct pair (lin_g, cab_g). The three radii (det, prob, ref) ride along a
    # leading axis: the same elementwise arithmetic, once.
    with np.errstate(invalid="ignore", over="ignore"):
        rg, ra, rb = (np.stack(_radii(t)) for t in (gy, cache.a, cache.b))  # (3, B, J)
        rp = np.stack(_radii(p))  # (3, J, 16)
        og = np.abs(gv)
        pc = pv @ cab
        g_pc = np.abs(gv * pc)
        c_pa = pa @ _ABS_CAB
        c_rp = (rp @ _ABS_CAB)[:, None, :]  # (3, 1, J)
        sides, grows = [], []
        for (lin, l_abs, (lvs, cvs, ind)), other, r_o in zip(_SIDES, (bv, av), (rb, ra),
                                                              strict=True):
            l_rp, l_pa = (rp @ l_abs)[:, None, :], pa @ l_abs
            oa = np.abs(other)
            d = pv @ lin + pc * other  # (B, J)
            vals = np.abs(lvs[:, None, None] + cvs[:, None, None] * other)  # (P, B, J)
            w = np.moveaxis(rp @ ind, -1, 1)[:, :, None, :]  # (3, P, 1, J)
            by_pair = (vals[None] * w).sum(axis=1)  # in pair order, as a running sum
            first = np.abs(d) * rg + g_pc * r_o + og * by_pair
            second = (rg * l_rp + rg * oa * c_rp + rg * r_o * c_pa + og * r_o * c_rp
                      + rg * r_o * c_rp)
            grow = (og * l_rp + rg * l_pa + rg * l_rp + og * oa * c_rp
                    + og * r_o * (c_pa + c_rp) + rg * (oa + r_o) * (c_pa + c_rp))
            sides.append(first + second)
            grows.append(grow)
        per = np.concatenate(sides, axis=-1) @ scatter
        grow_in = np.concatenate(grows, axis=-1) @ scatter
        extra = per + gam * grow_in
    return _widened(out, extra[0], extra[1], extra[2])


def gate_prob_grad(gys: list[Tracked], caches: list[LayerCache],
                   model: PrecisionModel) -> Tracked:
    """``G[j, g] = sum gy[b, j] gate_g(a, b)`` over every batch row of every use of
    the layer (cells, steps, channels): ``(J, 16)``, each gate's terms
    ``c gy m`` (``m`` in ``1, a, b, ab``) summed in any order.

    The products of every use are formed at once (elementwise: as use by use)."""
    gy = tcat(gys, axis=0)  # (all rows, J)
    prods = (gy, mul(gy, tcat([c.a for c in caches], axis=0), model),
             mul(gy, tcat([c.b for c in caches], axis=0), model),
             mul(gy, tcat([c.ab for c in caches], axis=0), model))
    mono = [tmap(t, lambda v: v.T) for t in prods]  # (J, all rows) each
    j = gy.shape[1]
    fields = ("value", "ref_err", "det", "prob", "mag")
    res = {f: np.zeros((j, N_GATES)) for f in fields}
    for g, terms in _GATE_TERMS:
        # the gate's terms' scaled monomials side by side, as scale() and tcat() make them
        parts = {f: np.concatenate([getattr(mono[m], f) * (c if f == "value" else abs(c))
                                    for m, c in terms], axis=1) for f in fields[:4]}
        summed = folded(sum_(bounded(parts["value"], parts["det"], parts["prob"],
                                     ref_err=parts["ref_err"]), axis=-1, model=model))
        for f in fields:
            res[f][:, g] = getattr(summed, f)
    # gate 0 (no terms): exactly zero
    return bounded(res["value"], res["det"], res["prob"], ref_err=res["ref_err"],
                   mag=res["mag"])


def _gate_terms() -> tuple[tuple[int, list[tuple[int, float]]], ...]:
    """Every gate with terms and its ``(monomial, coefficient)`` terms, in
    :data:`_Y_TERMS`' order."""
    terms: dict[int, list[tuple[int, float]]] = {}
    for g, m, c in _Y_TERMS:
        terms.setdefault(g, []).append((m, float(c)))
    return tuple(sorted(terms.items()))


_GATE_TERMS = _gate_terms()
