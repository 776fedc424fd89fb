"""``logic_layer``: a layer of relaxed two-input logic gates (Petersen et al. 2022,
``difflogic``'s ``LogicLayer`` in training mode), forward and backward.

Neuron ``j`` reads ``a = x[:, idx_a[j]]`` and ``b = x[:, idx_b[j]]`` by a fixed
connection map and outputs ``y[:, j] = sum_g softmax(weights[j])_g gate_g(a, b)``
over the 16 gates of :mod:`numoracle.oracle.logic_gates` (difflogic's order and
formulas). Inputs: ``x`` (B, I), ``idx_a`` and ``idx_b`` (O,) (the connection map:
integers held exactly in the storage format, drawn from the case's seed;
``in_features <= 256`` keeps them exact in every format), ``weights`` (O, 16)
(the gate logits) and ``grad_output`` (B, O). Outputs ``y`` (B, O),
``grad_input`` (B, I) and ``grad_weights`` (O, 16) (through the softmax: ``p (G -
<p, G>)``, ``G`` the gradient of the probabilities summed over the batch).

Bounds by composition (:mod:`numoracle.oracle.logic_gates`): every output is a
sum of monomial terms in any order, the probabilities tracked through ``exp``, the
sum and the division. Outputs that depend on a non-finite input are not judged.
The exact value family runs but is not exact (the softmax rounds).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...errors import InvalidArgument
from ..formats import Format
from ..logic_gates import (
    N_GATES,
    gate_prob_grad,
    layer_backward,
    layer_forward,
    softmax,
    softmax_backward,
)
from ..precision import PrecisionModel
from ..tracked import Tracked, exact, store, unjudged
from .base import Op, Product, check_positive_int, on_the_host
from .plan import Dim

__all__ = ["LogicLayer", "LOGIC_LAYER_OUTPUTS", "MAX_IN", "connection_map"]

LOGIC_LAYER_OUTPUTS = ("y", "grad_input", "grad_weights")
#: the connection map is handed over as numbers of the storage format: bf16 holds
#: every integer up to 256 exactly
MAX_IN = 256
MAX_DIM = 1 << 12


def connection_map(n_in: int, n_out: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """``(idx_a, idx_b)``: difflogic's ``'random'`` connections where there are
    enough neurons to read every input (``2 O >= I``), uniform draws otherwise."""
    if 2 * n_out >= n_in:
        c = rng.permutation(2 * n_out) % n_in
        c = rng.permutation(n_in)[c].reshape(2, n_out)
        return c[0].astype(np.float64), c[1].astype(np.float64)
    return (rng.integers(0, n_in, n_out).astype(np.float64),
            rng.integers(0, n_in, n_out).astype(np.float64))


def as_index(a: np.ndarray, n_in: int, name: str) -> np.ndarray:
    """A connection map read back as integers, checked."""
    a = np.asarray(a, dtype=np.float64)
    if not (np.all(np.isfinite(a)) and np.all(a == np.round(a)) and np.all(a >= 0)
            and np.all(a < n_in)):
        raise InvalidArgument(f"{name} must hold integers in [0, {n_in}) (a connection map); "
                              f"got {a.reshape(-1)[:8]}...")
    return a.astype(np.int64)


class LogicLayer(Op):
    name = "logic_layer"
    group = "logic"
    plan = (Dim("batch", 128, is_batch=True), Dim("in_features", 64), Dim("out_features", 64))
    param_names = ("batch", "in_features", "out_features")
    parameters = ("weights",)
    precision_ladder = False

    def validate(self, params: Mapping[str, Any]) -> dict[str, Any]:
        self._reject_unknown(params)
        out = {k: check_positive_int(k, params.get(k), upper=MAX_DIM)
               for k in ("batch", "out_features")}
        out["in_features"] = check_positive_int("in_features", params.get("in_features"),
                                                upper=MAX_IN)
        return out

    def input_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        b, i, o = params["batch"], params["in_features"], params["out_features"]
        return {"x": (b, i), "idx_a": (o,), "idx_b": (o,), "weights": (o, N_GATES),
                "grad_output": (b, o)}

    def outputs(self, params: Mapping[str, Any]) -> tuple[str, ...]:
        return LOGIC_LAYER_OUTPUTS

    def output_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        s = self.input_shapes(params)
        return {"y": s["grad_output"], "grad_input": s["x"], "grad_weights": s["weights"]}

    def reductions(self, params: Mapping[str, Any]) -> dict[str, int]:
        b, o = params["batch"], params["out_features"]
        return {"y": 34, "grad_input": 36 * o, "grad_weights": 4 * b * N_GATES}

    def products(self, params: Mapping[str, Any]) -> tuple[Product, ...]:
        return (Product("x", "grad_output", params["batch"]),)

    def prepare_inputs(self, arrays: dict[str, np.ndarray], params: Mapping[str, Any],
                       storage: Format, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """The connection map, drawn from the case's generator."""
        arrays["idx_a"], arrays["idx_b"] = connection_map(params["in_features"],
                                                          params["out_features"], rng)
        return arrays

    def reference(self, inputs: Mapping[str, np.ndarray], params: Mapping[str, Any],
                  model: PrecisionModel, outputs: tuple[str, ...] = ()) -> dict[str, Tracked]:
        self._check_inputs(inputs, params)
        want = outputs or LOGIC_LAYER_OUTPUTS
        host, back = on_the_host(inputs)  # (its arithmetic is NumPy's)
        n_in = params["in_features"]
        ia = as_index(host["idx_a"], n_in, "idx_a")
        ib = as_index(host["idx_b"], n_in, "idx_b")
        res = logic_layer(host["x"], ia, ib, host["weights"], host["grad_output"], model, want)
        return {k: back(store(v, model)) for k, v in res.items()}


def logic_layer(x: np.ndarray, ia: np.ndarray, ib: np.ndarray, w: np.ndarray,
                g: np.ndarray, model: PrecisionModel,
                outputs: tuple[str, ...] = LOGIC_LAYER_OUTPUTS) -> dict[str, Tracked]:
    """The layer's outputs on exact inputs (module docstring), not yet stored."""
    fx, fw, fg = np.isfinite(x), np.all(np.isfinite(w), axis=1), np.isfinite(g)
    clean = lambda a: np.where(np.isfinite(a), a, 0.0)  # noqa: E731 - unjudged below
    with np.errstate(over="ignore", invalid="ignore"):
        p = softmax(exact(clean(w)), model)
        y, cache = layer_forward(exact(clean(x)), ia, ib, p, model)
        res: dict[str, Tracked] = {}
        # an intermediate (ab, 2ab, g b, g ab, ...) may overflow even where its
        # probability is 0 and the result is small: inf * 0 = NaN in the kernel
        big = model.accumulate.max * 2.0**-4
        mag_ab = 2.0 * (1.0 + np.abs(cache.a.value)) * (1.0 + np.abs(cache.b.value))
        over_y = ~(mag_ab < big)
        over_g = ~(mag_ab * (1.0 + np.abs(clean(g))) < big)  # (B, O)
        read_ok = fx[:, ia] & fx[:, ib]  # (B, O)
        if "y" in outputs:
            res["y"] = unjudged(y, ~(read_ok & fw[None, :]) | over_y)
        gy = exact(clean(g))
        if "grad_input" in outputs:
            gi = layer_backward(gy, p, cache, model)
            bad_row = ~(np.all(fx, axis=1) & np.all(fg, axis=1)) | ~np.all(fw)
            reads = np.zeros((len(ia), x.shape[1]))
            reads[np.arange(len(ia)), ia] = reads[np.arange(len(ia)), ib] = 1.0
            res["grad_input"] = unjudged(gi, bad_row[:, None] | (over_g * 1.0 @ reads > 0))
        if "grad_weights" in outputs:
            gw = softmax_backward(p, gate_prob_grad([gy], [cache], model), model)
            ok = np.all(read_ok & fg & ~over_g, axis=0) & fw
            res["grad_weights"] = unjudged(gw, ~ok[:, None])
    return res
