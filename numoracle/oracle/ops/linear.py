"""``linear``: y = x W^T + b and its gradients.

Inputs ``x`` (batch, in_features), ``weight`` (out_features, in_features),
``bias`` (out_features,) when ``bias=True``, and ``grad_output``
(batch, out_features) for the backward outputs. Outputs ``y``,
``grad_input`` = grad_output W, ``grad_weight`` = grad_output^T x and
``grad_bias`` = sum over the batch of grad_output.

Accumulation lengths: ``y`` in_features (+1 with the bias, which counts as one
more term of the reduction, wherever the kernel adds it), ``grad_input``
out_features, ``grad_weight`` and ``grad_bias`` batch. A model with
``bias_after_store`` rounds ``x W^T`` to the storage format first, then adds
the bias and rounds again (an unfused epilogue).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...errors import InvalidArgument
from ..precision import PrecisionModel
from ..tracked import Tracked, add, exact, keep_operand_facts, matmul, store, sum_
from .base import Op, Product, check_positive_int, with_bias_gradient
from .plan import Dim, Flag

__all__ = ["Linear"]

MAX_DIM = 1 << 20


class Linear(Op):
    name = "linear"
    plan = (Flag("bias"), Dim("batch", 128, is_batch=True), Dim("in_features"),
            Dim("out_features"))
    #: layers up to 8,192 features; the batch (grad_weight's reduction) up to 2**20
    realistic_plan = (Flag("bias"), Dim("batch", 1 << 20, is_batch=True),
                      Dim("in_features", 8192), Dim("out_features", 8192))
    param_names = ("batch", "in_features", "out_features", "bias")

    def validate(self, params: Mapping[str, Any]) -> dict[str, Any]:
        self._reject_unknown(params)
        out = {k: check_positive_int(k, params.get(k), upper=MAX_DIM)
               for k in ("batch", "in_features", "out_features")}
        bias = params.get("bias", True)
        if not isinstance(bias, (bool, np.bool_)):
            raise InvalidArgument(f"{bias=} must be True or False")
        out["bias"] = bool(bias)
        return out

    def input_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        b, i, o = params["batch"], params["in_features"], params["out_features"]
        shapes: dict[str, tuple[int, ...]] = {"x": (b, i), "weight": (o, i),
                                              "grad_output": (b, o)}
        if params["bias"]:
            shapes["bias"] = (o,)
        return shapes

    def outputs(self, params: Mapping[str, Any]) -> tuple[str, ...]:
        return with_bias_gradient(params)

    def output_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        b, i, o = params["batch"], params["in_features"], params["out_features"]
        shapes: dict[str, tuple[int, ...]] = {"y": (b, o), "grad_input": (b, i),
                                              "grad_weight": (o, i)}
        if params["bias"]:
            shapes["grad_bias"] = (o,)
        return shapes

    def reductions(self, params: Mapping[str, Any]) -> dict[str, int]:
        r = {
            "y": params["in_features"] + int(params["bias"]),
            "grad_input": params["out_features"],
            "grad_weight": params["batch"],
        }
        if params["bias"]:
            r["grad_bias"] = params["batch"]
        return r

    def products(self, params: Mapping[str, Any]) -> tuple[Product, ...]:
        return (
            Product("x", "weight", params["in_features"] + int(params["bias"])),
            Product("grad_output", "weight", params["out_features"]),
            Product("grad_output", "x", params["batch"]),
        )

    def reference(
        self,
        inputs: Mapping[str, np.ndarray],
        params: Mapping[str, Any],
        model: PrecisionModel,
        outputs: tuple[str, ...] = (),
    ) -> dict[str, Tracked]:
        self._check_inputs(inputs, params)
        want = outputs or self.outputs(params)
        x, w, g = exact(inputs["x"]), exact(inputs["weight"]), exact(inputs["grad_output"])
        b = exact(inputs["bias"]) if params["bias"] and "y" in want else None
        # on a GPU every operand's facts in one pass each and one wait, before the GEMMs
        keep_operand_facts([x if {"y", "grad_weight"} & set(want) else None,
                            w if {"y", "grad_input"} & set(want) else None, b,
                            g if {"grad_input", "grad_weight"} & set(want) else None], model)
        res: dict[str, Tracked] = {}  # each stored (rounded to the output format)
        if "y" in want:
            if b is not None and model.bias_after_store:
                res["y"] = store(add(matmul(x, w.T, model, stored=True), b, model), model)
            else:
                res["y"] = matmul(x, w.T, model, bias=b, stored=True)
        if "grad_input" in want:
            res["grad_input"] = matmul(g, w, model, stored=True)
        if "grad_weight" in want:
            res["grad_weight"] = matmul(g.T, x, model, stored=True)
        if "grad_bias" in want:
            res["grad_bias"] = sum_(g, axis=0, model=model, stored=True)
        return res
