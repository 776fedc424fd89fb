"""``mlp_train``: ``steps`` training steps of a ReLU MLP with softmax cross-entropy.

The network is :class:`~numoracle.oracle.mlp.MLP` (``in_features -> hidden1 ->
hidden2 -> classes``); each step takes a batch, averages the gradient of the
mean cross-entropy over it, and applies the optimizer once (SGD, Adam or
AdamW with the hyperparameters of :mod:`~numoracle.oracle.ops.optim`).

Inputs: ``x`` (steps, batch, in_features), one batch per step; ``labels``
(steps, batch, classes), whose argmax along the last axis is each sample's
class (the first maximum where several tie); the starting parameters ``w1``
(hidden1, in_features), ``b1`` (hidden1,), ``w2`` (hidden2, hidden1), ``b2``,
``w3`` (classes, hidden2), ``b3``. Outputs, one row per step: ``loss``
(steps,), the loss of the step's batch before its update, and ``w1`` ... ``b3``
(steps, ...), the parameters after each step.

Bound: the steps of :meth:`MLP.step` composed from the exact inputs (the
parameter radii of step ``k`` enter step ``k + 1``), so a kernel is judged on
the whole trajectory; :func:`numoracle.trajectory.check_mlp_trajectory`
judges one step at a time with teacher forcing instead. Cases with non-finite
inputs are not judged (the loss of a non-finite sample is not defined).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...errors import UnsupportedCase
from ..mlp import MLP, PARAMS
from ..optim_math import OptimConfig
from ..precision import PrecisionModel
from ..tracked import Tracked, exact
from ..xp import array_module
from .base import Op, Product, check_positive_int
from .optim import OPTIMIZER_PARAMS, OPTIMIZER_PLAN, optimizer_params, stack_rows
from .plan import Dim

__all__ = ["MlpTrain"]

MAX_DIM = 4096
SIZE_NAMES = ("in_features", "hidden1", "hidden2", "classes")


class MlpTrain(Op):
    name = "mlp_train"
    group = "optim"
    plan = OPTIMIZER_PLAN + (
        Dim("steps", 4), Dim("batch", 64, is_batch=True), Dim("in_features", 12),
        Dim("hidden1", 10), Dim("hidden2", 10), Dim("classes", 6))
    param_names = tuple(OPTIMIZER_PARAMS) + ("steps", "batch") + SIZE_NAMES
    passes_params = True
    precision_ladder = False

    def validate(self, params: Mapping[str, Any]) -> dict[str, Any]:
        self._reject_unknown(params)
        out = optimizer_params(params)
        out["steps"] = check_positive_int("steps", params.get("steps"), upper=1000)
        out["batch"] = check_positive_int("batch", params.get("batch"), upper=1 << 16)
        for k in SIZE_NAMES:
            out[k] = check_positive_int(k, params.get(k), upper=MAX_DIM)
        return out

    @staticmethod
    def network(params: Mapping[str, Any], model: PrecisionModel) -> MLP:
        """The tracked network and optimizer of a case's parameters."""
        sizes = tuple(int(params[k]) for k in SIZE_NAMES)
        return MLP(sizes, OptimConfig.from_params(params), model)  # type: ignore[arg-type]

    def input_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        k, b = params["steps"], params["batch"]
        i, c = params["in_features"], params["classes"]
        shapes: dict[str, tuple[int, ...]] = {"x": (k, b, i), "labels": (k, b, c)}
        sizes = tuple(int(params[n]) for n in SIZE_NAMES)
        h1, h2 = sizes[1], sizes[2]
        shapes.update({"w1": (h1, i), "b1": (h1,), "w2": (h2, h1), "b2": (h2,),
                       "w3": (c, h2), "b3": (c,)})
        return shapes

    def outputs(self, params: Mapping[str, Any]) -> tuple[str, ...]:
        return ("loss",) + PARAMS

    def output_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        shapes = self.input_shapes(params)
        k = params["steps"]
        return {"loss": (k,), **{p: (k, *shapes[p]) for p in PARAMS}}

    def reductions(self, params: Mapping[str, Any]) -> dict[str, int]:
        b = params["batch"]
        return {"loss": max(b, params["classes"]), **dict.fromkeys(PARAMS, b)}

    def products(self, params: Mapping[str, Any]) -> tuple[Product, ...]:
        return (Product("x", "w1", params["in_features"] + 1),
                Product("w2", "w3", params["hidden2"] + 1))

    def reference(
        self,
        inputs: Mapping[str, np.ndarray],
        params: Mapping[str, Any],
        model: PrecisionModel,
        outputs: tuple[str, ...] = (),
    ) -> dict[str, Tracked]:
        self._check_inputs(inputs, params)
        xp = array_module(inputs["x"])  # computed in the inputs' namespace
        finite = [xp.all(xp.isfinite(v)) for v in inputs.values()]
        if not bool(xp.all(xp.stack(finite))):  # one synchronisation for all inputs
            raise UnsupportedCase("mlp_train: inputs with NaN or Inf are not judged (the "
                                  "loss of a non-finite sample is not defined)")
        want = outputs or self.outputs(params)
        net = self.network(params, model)
        x = xp.asarray(inputs["x"], dtype=xp.float64)
        labels = xp.argmax(inputs["labels"], axis=-1)
        cur: dict[str, Tracked] = {p: exact(inputs[p]) for p in PARAMS}
        rows: dict[str, list[Tracked]] = {k: [] for k in self.outputs(params)}
        with np.errstate(invalid="ignore", over="ignore", divide="ignore", under="ignore"):
            for k in range(params["steps"]):
                out = net.step(exact(x[k]), labels[k], cur, cur, k + 1)
                for name in rows:
                    rows[name].append(out[name])
                cur = {n: out[n] for n in PARAMS + net.state_names()}
        return {k: stack_rows(rows[k]) for k in want}
