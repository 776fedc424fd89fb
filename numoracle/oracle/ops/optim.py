"""``optim``: ``steps`` updates of SGD, Adam or AdamW on one parameter tensor.

Inputs ``param0`` (numel,), the starting parameter, and ``grads``
(steps, numel), the gradient handed to the optimizer at each step. Outputs, one
row per step: ``param`` (steps, numel), the parameter after each step, and the
optimizer state torch keeps (``momentum_buffer`` for SGD with momentum;
``exp_avg``, ``exp_avg_sq`` and, with amsgrad, ``max_exp_avg_sq`` for Adam and
AdamW), also after each step.

Parameters: ``optimizer`` (``sgd``, ``adam``, ``adamw``), ``lr``, ``momentum``,
``dampening``, ``nesterov``, ``weight_decay`` (SGD, Adam: L2 term; AdamW:
decoupled), ``eps``, ``amsgrad`` (betas are torch's defaults 0.9, 0.999),
``steps`` and ``numel``; :class:`~numoracle.oracle.optim_math.OptimConfig`
validates them.

Bound: the updates of :mod:`~numoracle.oracle.optim_math` composed over the
steps from the exact inputs, so the bound of step ``k`` carries the radii of
the steps before it (the state feeds back; with gradients given, the
recurrences are linear in the state and the radii grow slowly). Each output
element is elementwise (accumulation length 1). A kernel must hand every
row over: a failure's worst element names its step (the first index).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from ..optim_math import OptimConfig, optimizer_step
from ..precision import PrecisionModel
from ..tracked import Tracked, exact, store, tcat, tmap
from ..xp import array_module
from .base import Op, Product, check_positive_int
from .plan import Choice, Dim, Spec

__all__ = ["Optim", "MAX_STEPS", "OPTIMIZER_PARAMS", "OPTIMIZER_PLAN", "optimizer_params"]

#: optimizer hyperparameters of ``optim`` and ``mlp_train``, in draw order: each
#: shrinks towards plain SGD with lr 0.1; flags only where torch allows them
OPTIMIZER_PLAN: tuple[Spec, ...] = (
    Choice("optimizer", ("sgd", "adam", "adamw")),
    Choice("lr", (0.1, 0.01, 0.001)),
    Choice("momentum", (0.0, 0.9), lambda p: p["optimizer"] == "sgd"),
    Choice("dampening", (0.0, 0.1), lambda p: p["optimizer"] == "sgd" and p["momentum"] > 0),
    Choice("nesterov", (False, True), lambda p: p["momentum"] > 0 and p["dampening"] == 0),
    Choice("weight_decay", (0.0, 0.01)),
    Choice("eps", (1e-8, 1e-3), lambda p: p["optimizer"] != "sgd"),
    Choice("amsgrad", (False, True), lambda p: p["optimizer"] != "sgd"),
)


MAX_STEPS = 1000
MAX_NUMEL = 1 << 24
#: the hyperparameter names an op with an optimizer takes, and their defaults
OPTIMIZER_PARAMS: dict[str, Any] = {
    "optimizer": "sgd", "lr": 0.1, "momentum": 0.0, "dampening": 0.0, "nesterov": False,
    "weight_decay": 0.0, "eps": 1e-8, "amsgrad": False}


def optimizer_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The optimizer hyperparameters of ``params``, defaults filled in and
    validated through :class:`OptimConfig` (which raises InvalidArgument)."""
    out = {k: params.get(k, v) for k, v in OPTIMIZER_PARAMS.items()}
    for k in ("lr", "momentum", "dampening", "weight_decay", "eps"):
        if isinstance(out[k], (int, float, np.floating, np.integer)) \
                and not isinstance(out[k], bool):
            out[k] = float(out[k])
    for k in ("nesterov", "amsgrad"):
        if isinstance(out[k], np.bool_):
            out[k] = bool(out[k])
    OptimConfig.from_params(out)
    return out


def stack_rows(rows: list[Tracked]) -> Tracked:
    """Tracked arrays of one shape stacked along a new first axis (a row's low
    part, where it has one, joins its oracle error)."""
    return replace(tcat(rows, axis=0, stack=True), n=max(r.max_n for r in rows))


def row(t: Tracked, k: int) -> Tracked:
    """Row ``k`` of a tracked array (its first axis), as exact inputs' rows are taken."""
    return exact(t.value[k]) if t.is_exact else tmap(t, lambda a: a[k])


class Optim(Op):
    name = "optim"
    group = "optim"
    plan = OPTIMIZER_PLAN + (Dim("steps", 50), Dim("numel", 1024))
    #: parameter tensors up to 10**7 elements
    realistic_plan = OPTIMIZER_PLAN + (Dim("steps", 8), Dim("numel", 10_000_000))
    param_names = tuple(OPTIMIZER_PARAMS) + ("steps", "numel")
    passes_params = True
    precision_ladder = False

    def validate(self, params: Mapping[str, Any]) -> dict[str, Any]:
        self._reject_unknown(params)
        out = optimizer_params(params)
        out["steps"] = check_positive_int("steps", params.get("steps"), upper=MAX_STEPS)
        out["numel"] = check_positive_int("numel", params.get("numel"), upper=MAX_NUMEL)
        return out

    def input_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        return {"param0": (params["numel"],), "grads": (params["steps"], params["numel"])}

    def outputs(self, params: Mapping[str, Any]) -> tuple[str, ...]:
        return ("param",) + OptimConfig.from_params(params).state_names

    def output_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        return dict.fromkeys(self.outputs(params), (params["steps"], params["numel"]))

    def reductions(self, params: Mapping[str, Any]) -> dict[str, int]:
        return dict.fromkeys(self.outputs(params), 1)

    def products(self, params: Mapping[str, Any]) -> tuple[Product, ...]:
        return ()

    def reference(
        self,
        inputs: Mapping[str, np.ndarray],
        params: Mapping[str, Any],
        model: PrecisionModel,
        outputs: tuple[str, ...] = (),
    ) -> dict[str, Tracked]:
        self._check_inputs(inputs, params)
        cfg = OptimConfig.from_params(params)
        want = outputs or self.outputs(params)
        xp = array_module(inputs["param0"])
        grads = xp.asarray(inputs["grads"], dtype=xp.float64)  # in the inputs' namespace
        p = exact(inputs["param0"])
        state: dict[str, Tracked] = {}
        rows: dict[str, list[Tracked]] = {k: [] for k in self.outputs(params)}
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            for k in range(params["steps"]):
                p, state = optimizer_step(cfg, p, exact(grads[k]), state, k + 1, model)
                p = store(p, model)
                state = {n: store(s, model) for n, s in state.items()}
                rows["param"].append(p)
                for n, s in state.items():
                    rows[n].append(s)
        return {k: stack_rows(rows[k]) for k in want}
