"""``kan``: a Kolmogorov–Arnold Network layer with B-spline activations, and its gradients.

The layer of efficient-kan and pykan::

    y[b,j] = sum_i  base_weight[j,i] silu(x[b,i])
                  + spline_weight[j,i] sum_c coef[j,i,c] B_c(x[b,i])

with ``B_c`` the B-splines of order ``k = spline_order`` (the polynomial
degree, as in efficient-kan) on a uniform grid of ``G = grid_size``
intervals on ``[-1, 1]`` extended by ``k`` knots each side (see
:mod:`numoracle.oracle.bspline`). Inputs ``x`` (B, I), ``grid`` (I, G + 2k + 1)
(efficient-kan's buffer: the kernel reads the knots, it does not make them),
``coef`` (O, I, G + k), ``base_weight`` and ``spline_weight`` (O, I) (efficient-kan's
``spline_scaler``) and ``grad_output`` (B, O). Outputs ``y``, ``grad_input``,
``grad_coef``, ``grad_base_weight``, ``grad_spline_weight``.

Bounds, composed in the error-tracking arithmetic:

* the bases: the Cox–de Boor recursion, every subtraction, quotient, product and
  sum tracked (:func:`~numoracle.oracle.bspline.tracked_levels`), widened by the
  Lipschitz bound where ``x`` carries a radius or lies near a knot;
* ``y``: one contraction over ``I (C + 1)`` terms (bases and ``silu``) in order
  ``any``, which covers efficient-kan's two ``F.linear`` and pykan's nested sums;
  the factor ``coef * spline_weight`` is a tracked product;
* ``grad_input``: the closed form (``sum_j sum_c g W B'_c``, nested either way,
  :func:`~numoracle.oracle.nested.nested_contraction`) *or* autograd through the
  recursion (``g @ W`` then the adjoints level by level, every contribution
  summed in any order): the bound covers both (:func:`~numoracle.oracle.tracked.either`);
  a kernel may also scale ``g`` by ``spline_weight`` before the coefficients (the
  definition's order), losing ``g sw`` where it underflows: ``tiny |sum_c coef B'_c|``
  more there (:func:`_scaled_first_underflow`); order 1 near a knot: either side of the step;
* ``grad_coef``: ``sum_b g B_c spline_weight`` (the scale applied before or after
  the sum); ``grad_base_weight``: ``g^T silu(x)``; ``grad_spline_weight``:
  ``sum_b sum_c g B_c coef`` nested either way.

Outputs that depend on a non-finite input are not judged: a dense kernel
multiplies the zero bases with an infinite coefficient (NaN), a sparse one skips
them, and both are legitimate. The exact value family runs but is not exact
(``silu`` and the quotients round); its dyadic inputs still shrink well.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from ...errors import InvalidArgument
from ..bspline import (
    Levels,
    cell_reach,
    lipschitz,
    near_knot,
    quotient,
    shifted_derivative,
    tracked_derivative,
    tracked_levels,
    uniform_grid,
)
from ..elementwise import _rmul, mul, silu, silu_grad, where
from ..formats import Format, quantize
from ..nested import nested_contraction
from ..precision import PrecisionModel
from ..tracked import (
    Tracked,
    add,
    either,
    exact,
    folded,
    matmul,
    store,
    sum_,
    tcat,
    tmap,
    unjudged,
)
from .base import Op, Product, check_positive_int, on_the_host
from .plan import Choice, Dim

__all__ = ["Kan", "kan_layer", "place_near_knots", "KAN_OUTPUTS", "MAX_ORDER", "MAX_GRID"]

KAN_OUTPUTS = ("y", "grad_input", "grad_coef", "grad_base_weight", "grad_spline_weight")
MAX_ORDER = 5
MAX_GRID = 32
MAX_DIM = 1 << 12
#: the Lipschitz widening's excess, covering the change of the rounding bound
#: between the oracle's x and the kernel's
_LIP_EXCESS = 1.0 + 2.0**-8
#: share of the inputs x that :func:`place_near_knots` moves onto or next to a knot,
#: or outside the grid
KNOT_SHARE = 0.25


def check_order(value: Any) -> int:
    """A spline order in ``[1, MAX_ORDER]``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
            or not 1 <= value <= MAX_ORDER:
        raise InvalidArgument(f"spline_order={value!r} must be an int in [1, {MAX_ORDER}] "
                              "(the polynomial degree: 3 for cubic splines)")
    return int(value)


class Kan(Op):
    name = "kan"
    group = "kan"
    #: spline orders 2-5 by default (order 1 by ``params``), shrinking towards
    #: quadratic splines on one interval
    plan = (Choice("spline_order", (2, 3, 4, 5)), Dim("grid_size", 16),
            Dim("batch", 128, is_batch=True), Dim("in_features", 64),
            Dim("out_features", 256))
    #: widths up to 256, batches up to 1,024
    realistic_plan = (Choice("spline_order", (2, 3, 4, 5)), Dim("grid_size", 16),
                      Dim("batch", 1024, is_batch=True), Dim("in_features", 256),
                      Dim("out_features", 256))
    param_names = ("batch", "in_features", "out_features", "grid_size", "spline_order")

    def validate(self, params: Mapping[str, Any]) -> dict[str, Any]:
        self._reject_unknown(params)
        out = {k: check_positive_int(k, params.get(k), upper=MAX_DIM)
               for k in ("batch", "in_features", "out_features")}
        out["grid_size"] = check_positive_int("grid_size", params.get("grid_size", 5),
                                              upper=MAX_GRID)
        out["spline_order"] = check_order(params.get("spline_order", 3))
        return out

    def input_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        b, i, o = params["batch"], params["in_features"], params["out_features"]
        g, k = params["grid_size"], params["spline_order"]
        return {"x": (b, i), "grid": (i, g + 2 * k + 1), "coef": (o, i, g + k),
                "base_weight": (o, i), "spline_weight": (o, i), "grad_output": (b, o)}

    def outputs(self, params: Mapping[str, Any]) -> tuple[str, ...]:
        return KAN_OUTPUTS

    def params_from_shapes(self, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, Any]:
        """``x`` (B, I), ``coef`` (O, I, G + k) and ``grid`` (I, G + 2k + 1) tell them all."""
        (b, i), (o, _, c), m = shapes["x"], shapes["coef"], shapes["grid"][1]
        k = m - c - 1
        return self.validate({"batch": b, "in_features": i, "out_features": o,
                              "grid_size": c - k, "spline_order": k})

    def output_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        s = self.input_shapes(params)
        return {"y": s["grad_output"], "grad_input": s["x"], "grad_coef": s["coef"],
                "grad_base_weight": s["base_weight"], "grad_spline_weight": s["spline_weight"]}

    def reductions(self, params: Mapping[str, Any]) -> dict[str, int]:
        b, i, o = params["batch"], params["in_features"], params["out_features"]
        c = params["grid_size"] + params["spline_order"]
        return {"y": i * (c + 1), "grad_input": o * (c + 1), "grad_coef": b,
                "grad_base_weight": b, "grad_spline_weight": b * c}

    def products(self, params: Mapping[str, Any]) -> tuple[Product, ...]:
        r = self.reductions(params)
        return (Product("coef", "spline_weight", r["y"]),
                Product("base_weight", "grad_output", r["grad_input"]),
                Product("x", "grad_output", r["grad_base_weight"]))

    def prepare_inputs(self, arrays: dict[str, np.ndarray], params: Mapping[str, Any],
                       storage: Format, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """The uniform grid in ``grid`` (rounded to ``storage``), and a share of
        ``x`` on knots, one rounding from knots, and outside the grid."""
        grid = quantize(uniform_grid(params["in_features"], params["grid_size"],
                                     params["spline_order"]), storage)
        arrays["grid"] = grid
        arrays["x"] = place_near_knots(arrays["x"], grid, storage, rng)
        return arrays

    def reference(self, inputs: Mapping[str, np.ndarray], params: Mapping[str, Any],
                  model: PrecisionModel, outputs: tuple[str, ...] = ()) -> dict[str, Tracked]:
        self._check_inputs(inputs, params)
        want = outputs or KAN_OUTPUTS
        host, back = on_the_host(inputs)  # (its arithmetic is NumPy's)
        ins = {k: as_input(v, model) for k, v in host.items() if k != "grid"}
        res = kan_layer(ins["x"], host["grid"], ins["coef"], ins["base_weight"],
                        ins["spline_weight"], params["spline_order"], model,
                        g=ins["grad_output"], outputs=want)
        return {k: back(store(v, model)) for k, v in res.items()}


def as_input(a: np.ndarray, model: PrecisionModel) -> Tracked:
    """An exact input; where the model may flush subnormal inputs, they carry
    their magnitude as radius."""
    t = exact(a)
    if model.flush_subnormal_inputs:
        with np.errstate(invalid="ignore"):
            r = np.where((a != 0) & (np.abs(a) < model.compute.tiny), np.abs(a), 0.0)
        if np.any(r):
            t = replace(t, det=r, prob=r.copy())
    return t


def place_near_knots(x: np.ndarray, grid: np.ndarray, storage: Format,
                     rng: np.random.Generator, share: float = KNOT_SHARE) -> np.ndarray:
    """``x`` with a ``share`` of its elements moved: exactly onto a knot, one
    rounding (of ``storage``) below or above a knot, or outside the extended grid."""
    x = np.array(x, dtype=np.float64)
    if x.size == 0:
        return x
    pick = rng.random(x.shape) < share
    kind = rng.integers(0, 4, x.shape)
    feature = np.broadcast_to(np.arange(x.shape[-1]), x.shape)
    knot = grid[feature, rng.integers(0, grid.shape[1], x.shape)]
    _, e = np.frexp(knot)  # |knot| in [2^(e-1), 2^e): its ulp is 2^(e-1-t)
    ulp = np.maximum(2.0 ** (e - 1 - storage.t), 2.0 ** (storage.emin - storage.t))
    span = grid[feature, -1] - grid[feature, 0]
    side = np.where(rng.random(x.shape) < 0.5, -1.0, 1.0)
    edge = np.where(side < 0, grid[feature, 0], grid[feature, -1])
    outside = edge + side * span * rng.uniform(0.0, 0.5, x.shape)
    moved = np.select([kind == 0, kind == 1, kind == 2], [knot, knot - ulp, knot + ulp], outside)
    return quantize(np.where(pick, moved, x), storage)


# -- tracked helpers --------------------------------------------------------------------------
def _neg(t: Tracked) -> Tracked:
    t = folded(t)
    return replace(t, value=-t.value)


def _pad_last(t: Tracked, before: int, after: int) -> Tracked:
    return tmap(t, lambda a: np.pad(a, [(0, 0)] * (a.ndim - 1) + [(before, after)]))


def _widen3(t: Tracked, det: Any, prob: Any, ref: Any) -> Tracked:
    """``t`` with the three radii widened (a Lipschitz term)."""
    t = folded(t)
    return replace(t, det=t.det + det, prob=t.prob + prob, ref_err=t.ref_err + ref)


# -- the layer ----------------------------------------------------------------------------------
def _autograd_spline(gb: Tracked, lv: Levels, xrad: np.ndarray, model: PrecisionModel,
                     ) -> Tracked:
    """``sum_c gb_c B'_c(x)`` as autograd computes it through the recursion: the
    adjoint of every level, and every contribution ``adj * B_{p-1} / den`` to the
    input's gradient summed in any order. ``xrad`` (``(B, I)``) is how far the
    kernel's own ``x`` may lie from the oracle's (a previous layer's radius)."""
    k = len(lv.bases) - 1
    adj, parts = gb, []
    over = np.any(np.isinf(gb.det), axis=-1)
    for p in range(k, 0, -1):
        prev = lv.bases[p - 1]
        den1, den2, q1, q2 = lv.den1[p], lv.den2[p], lv.q1[p], lv.q2[p]
        assert den1 is not None and den2 is not None and q1 is not None and q2 is not None
        lo = tmap(prev, lambda a: a[..., :-1])
        hi = tmap(prev, lambda a: a[..., 1:])
        parts.append(quotient(mul(adj, lo, model), den1, model))
        parts.append(_neg(quotient(mul(adj, hi, model), den2, model)))
        if p > 1:
            adj = add(_pad_last(mul(adj, q1, model), 0, 1),
                      _pad_last(mul(adj, q2, model), 1, 0), model)
            over |= np.any(np.isinf(adj.det), axis=-1)
    # autograd also forms adjoints and quotients away from the support (where the
    # weights exceed 1): where their largest possible magnitude nears the format's
    # range, an intermediate may overflow and meet a zero basis (inf * 0 = NaN); the
    # weights at the kernel's x exceed those at the oracle's by up to xrad / den
    amp = np.sum(np.abs(gb.value) + gb.det, axis=-1)
    for p in range(1, k + 1):
        q1, q2, den1, den2 = lv.q1[p], lv.q2[p], lv.den1[p], lv.den2[p]
        assert q1 is not None and q2 is not None and den1 is not None and den2 is not None
        inv1 = 1.0 / np.min(np.abs(den1.value), axis=-1)
        inv2 = 1.0 / np.min(np.abs(den2.value), axis=-1)
        with np.errstate(over="ignore", invalid="ignore"):  # flagged below
            amp = amp * (np.max(np.abs(q1.value), axis=-1) + np.max(np.abs(q2.value), axis=-1)
                         + xrad * (inv1 + inv2) + inv1)
    over |= ~(amp < 2.0**-8 * model.accumulate.max)
    out = sum_(tcat(parts, axis=-1), axis=-1, model=model)
    # an adjoint that may overflow makes inf * 0 = NaN in the kernel: not judged
    return unjudged(out, over)


def kan_layer(x: Tracked, grid: np.ndarray, coef: Tracked, base_weight: Tracked,
              spline_weight: Tracked, order: int, model: PrecisionModel, *,
              g: Tracked | None = None, outputs: tuple[str, ...] = ("y",)) -> dict[str, Tracked]:
    """One KAN layer on tracked operands (module docstring), outputs not yet stored.

    Parameters
    ----------
    x : Tracked
        ``(B, I)``: exact, or a previous layer's output with its radius.
    grid : ndarray
        ``(I, M)`` knots, exactly as the kernel reads them.
    coef, base_weight, spline_weight : Tracked
        ``(O, I, C)``, ``(O, I)``, ``(O, I)``.
    order : int
        Spline order ``k >= 1``; ``M = C + k + 1``.
    g : Tracked, optional
        ``(B, O)`` upstream gradient; needed for every output but ``y``.
    outputs : tuple of str
        Which of :data:`KAN_OUTPUTS` to compute.
    """
    x, coef = folded(x), folded(coef)
    grid = np.asarray(grid, np.float64)
    bsz, n_in = x.shape
    n_out, _, n_c = coef.shape
    if grid.shape != (n_in, n_c + order + 1):
        raise InvalidArgument(f"kan: grid.shape={grid.shape} must be (in_features, C + k + 1) "
                              f"= {(n_in, n_c + order + 1)} for coef.shape={coef.shape}, {order=}")
    need_g = [k for k in outputs if k != "y"]
    if need_g and g is None:
        raise InvalidArgument(f"kan_layer: outputs {need_g} need the upstream gradient g of "
                              f"shape {(bsz, n_out)}")
    xv = x.value
    lv = tracked_levels(np.nan_to_num(xv, nan=0.0, posinf=0.0, neginf=0.0), grid, order, model)
    l1, l2 = lipschitz(grid, order)
    reach = cell_reach(xv, grid, model)
    near = near_knot(xv, grid, x.det + x.ref_err + reach)
    cell = np.where(near, 2.0 * reach, 0.0)

    bases = _widen_lip(lv.bases[-1], l1, x, cell)  # (B, I, C)
    w_eff = mul(coef, tmap(spline_weight, lambda a: a[..., None]), model)
    fin = _finite_masks(x, grid, coef, base_weight, spline_weight, g)
    res: dict[str, Tracked] = {}
    s = silu(x, model) if {"y", "grad_base_weight"} & set(outputs) else None
    if "y" in outputs:
        assert s is not None
        feats = tcat([tmap(bases, lambda a: a.reshape(bsz, n_in * n_c)), s], axis=1)
        weights = tcat([tmap(w_eff, lambda a: a.reshape(n_out, n_in * n_c)), base_weight], axis=1)
        res["y"] = unjudged(matmul(feats, weights.T, model), ~fin["y"])
    if "grad_input" in outputs:
        assert g is not None
        res["grad_input"] = unjudged(
            _grad_input(x, g, lv, grid, order, coef, spline_weight, w_eff, base_weight, l2,
                        cell, model),
            ~fin["grad_input"])
    if "grad_coef" in outputs:
        assert g is not None
        t = nested_contraction("bj,bic,ji->jic", g, bases, spline_weight, model,
                               outer=bsz, inner=1)
        res["grad_coef"] = unjudged(t, ~fin["grad_coef"])
    if "grad_base_weight" in outputs:
        assert g is not None and s is not None
        res["grad_base_weight"] = unjudged(matmul(g.T, s, model), ~fin["grad_base_weight"])
    if "grad_spline_weight" in outputs:
        assert g is not None
        t = nested_contraction("bj,bic,jic->ji", g, bases, coef, model, outer=bsz, inner=n_c)
        res["grad_spline_weight"] = unjudged(t, ~fin["grad_spline_weight"])
    return res


def _grad_input(x: Tracked, g: Tracked, lv: Levels, grid: np.ndarray, order: int,
                coef: Tracked, spline_weight: Tracked, w_eff: Tracked, base_weight: Tracked,
                l2: np.ndarray, cell: np.ndarray, model: PrecisionModel) -> Tracked:
    bsz, n_in = x.shape
    n_out, _, n_c = w_eff.shape
    sg = silu_grad(x, model)  # (B, I), with x's radius
    d = tracked_derivative(lv, model)  # (B, I, C) at the oracle's x
    if order >= 2:
        d = _widen_lip(d, l2, x, cell)
    w_full = tcat([w_eff, tmap(base_weight, lambda a: a[..., None])], axis=-1)
    d_full = tcat([d, tmap(sg, lambda a: a[..., None])], axis=-1)
    closed = nested_contraction("bj,jic,bic->bi", g, w_full, d_full, model,
                                outer=n_out, inner=n_c + 1)
    gb = tmap(matmul(g, tmap(w_eff, lambda a: a.reshape(n_out, n_in * n_c)), model),
              lambda a: a.reshape(bsz, n_in, n_c))
    spline = _autograd_spline(gb, lv, x.det + x.ref_err + cell, model)
    if order >= 2:
        with np.errstate(over="ignore"):  # an infinite radius: not judged
            gmag = np.sum(np.abs(gb.value) + gb.det + gb.ref_err, axis=-1)
            rad = l2[None, :] * gmag
        # 0 * inf = 0: an exact x needs no widening beside an overflowing adjoint
        spline = _widen3(spline, _rmul(rad, x.det * _LIP_EXCESS + cell),
                         _rmul(rad, x.prob * _LIP_EXCESS + cell),
                         _rmul(rad, x.ref_err * _LIP_EXCESS))
    base = mul(sg, matmul(g, base_weight, model), model)
    auto = add(spline, base, model)
    out = either(closed, auto)
    lost = _scaled_first_underflow(g, spline_weight, coef, d, model)
    if lost is not None:
        out = _widen3(out, lost, lost, 0.0)
    out = unjudged(out, np.isnan(auto.det))
    if order == 1:
        xv = np.nan_to_num(x.value, nan=0.0, posinf=0.0, neginf=0.0)
        reach_any = (cell > 0) | (x.det + x.ref_err > 0)
        if np.any(reach_any):
            for side in (-1, 1):
                moved = shifted_derivative(xv, grid, 1, side, model)
                keep = reach_any[..., None]
                d_side = where(np.broadcast_to(keep, d.shape), moved, d)
                d_side_full = tcat([d_side, tmap(sg, lambda a: a[..., None])], axis=-1)
                out = either(out, nested_contraction("bj,jic,bic->bi", g, w_full, d_side_full,
                                                     model, outer=n_out, inner=n_c + 1))
    return out


def _scaled_first_underflow(g: Tracked, spline_weight: Tracked, coef: Tracked, d: Tracked,
                            model: PrecisionModel) -> np.ndarray | None:
    """What ``grad_input`` may lose when a kernel follows the layer's definition,
    ``(g[b,j] spline_weight[j,i]) sum_c coef[j,i,c] B'_c``, rather than forming
    ``coef spline_weight`` first (efficient-kan): where ``0 < |g sw|`` may fall
    below the smallest normal (the operands within their radii), that product is
    off by up to ``tiny`` (a flush to zero included), and the rest of the term
    scales the loss by ``|sum_c coef B'_c|``. ``(B, I)`` absolute allowance, or
    None where no such product can underflow (the usual case: then nothing is
    computed). Works a block of samples at a time (``(B, O, I)`` would not fit
    at realistic sizes)."""
    tiny = model.compute.tiny

    def span(t: Tracked) -> tuple[np.ndarray, np.ndarray]:  # smallest, largest |value|
        r = t.bound()
        mag = np.abs(t.value)
        return (np.nan_to_num(np.maximum(mag - r, 0.0), nan=0.0),
                np.nan_to_num(mag + r, nan=np.inf))

    with np.errstate(over="ignore", invalid="ignore"):
        g_lo, g_hi = span(g)  # (B, O)
        s_lo, s_hi = span(spline_weight)  # (O, I)
        if not (np.any(g_hi > 0) and np.any(s_hi > 0)) or \
                np.min(g_lo[g_hi > 0]) * np.min(s_lo[s_hi > 0]) >= tiny:
            return None
        cm = np.abs(coef.value) + coef.det + coef.ref_err  # (O, I, C)
        dm = np.abs(d.value) + d.det + d.ref_err  # (B, I, C)
        bsz, (n_out, n_in) = g_lo.shape[0], s_lo.shape
        lost = np.zeros((bsz, n_in))
        step = max(1, (1 << 22) // max(1, n_out * n_in))
        for b0 in range(0, bsz, step):
            sl = slice(b0, b0 + step)
            under = ((g_lo[sl, :, None] * s_lo[None] < tiny)
                     & (g_hi[sl, :, None] * s_hi[None] > 0))  # (b, O, I)
            if not under.any():
                continue
            # 0 * inf (an infinite coefficient or radius) is NaN here: an infinite loss
            scale = np.nan_to_num(np.einsum("jic,bic->bji", cm, dm[sl]), nan=np.inf)
            lost[sl] = tiny * np.sum(np.where(under, scale, 0.0), axis=1)
        return lost


def _widen_lip(d: Tracked, l2: np.ndarray, x: Tracked, cell: np.ndarray) -> Tracked:
    lc = l2[None, :, None]
    xd, xp, xr, c = (a[..., None] for a in (np.broadcast_to(x.det, x.shape),
                                           np.broadcast_to(x.prob, x.shape),
                                           np.broadcast_to(x.ref_err, x.shape), cell))
    return _widen3(d, lc * (xd * _LIP_EXCESS + c), lc * (xp * _LIP_EXCESS + c),
                   lc * xr * _LIP_EXCESS)


def _finite_masks(x: Tracked, grid: np.ndarray, coef: Tracked, base_weight: Tracked,
                  spline_weight: Tracked, g: Tracked | None) -> dict[str, np.ndarray]:
    """Per output, where every input it depends on is finite (and judged)."""
    fx = np.isfinite(x.value) & np.isfinite(x.det) & np.all(np.isfinite(grid), axis=1)[None]
    fw = (np.all(np.isfinite(coef.value), axis=-1) & np.isfinite(base_weight.value)
          & np.isfinite(spline_weight.value))  # (O, I)
    fg = np.ones((x.shape[0], coef.shape[0]), bool) if g is None else \
        np.isfinite(g.value) & np.isfinite(g.det)
    rows_x, cols_x = np.all(fx, axis=1), np.all(fx, axis=0)  # (B,), (I,)
    g_rows, g_cols = np.all(fg, axis=1), np.all(fg, axis=0)  # (B,), (O,)
    both = g_cols[:, None] & cols_x[None, :]  # (O, I)
    return {
        "y": rows_x[:, None] & np.all(fw, axis=1)[None, :],
        "grad_input": g_rows[:, None] & fx & np.all(fw, axis=0)[None, :],
        "grad_coef": (both & np.isfinite(spline_weight.value))[..., None],
        "grad_base_weight": both,
        "grad_spline_weight": both & np.all(np.isfinite(coef.value), axis=-1),
    }
