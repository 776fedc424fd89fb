"""``matmul``: out = a @ b with batch dimensions.

Inputs ``a`` (*batch_shape, m, k) and ``b`` (*batch_shape, k, n); output
``out`` (*batch_shape, m, n); accumulation length k.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...errors import InvalidArgument
from ..precision import PrecisionModel
from ..tracked import Tracked, exact, matmul
from .base import Op, Product, check_positive_int
from .plan import Dim, Shape

__all__ = ["Matmul"]

MAX_DIM = 1 << 20


class Matmul(Op):
    name = "matmul"
    plan = (Shape("batch_shape"), Dim("m"), Dim("k"), Dim("n"))
    #: products up to 8,192 on a side, reductions up to 2**20
    realistic_plan = (Shape("batch_shape", 1, 8), Dim("m", 8192), Dim("k", 1 << 20),
                      Dim("n", 8192))
    param_names = ("batch_shape", "m", "k", "n")

    def validate(self, params: Mapping[str, Any]) -> dict[str, Any]:
        self._reject_unknown(params)
        out: dict[str, Any] = {k: check_positive_int(k, params.get(k), upper=MAX_DIM)
                               for k in ("m", "k", "n")}
        bs = params.get("batch_shape", ())
        if isinstance(bs, (int, np.integer)):
            bs = (bs,)
        if not isinstance(bs, (tuple, list)) or len(bs) > 4:
            raise InvalidArgument(
                f"batch_shape={bs!r} must be a tuple of at most 4 positive ints, e.g. (2, 3)"
            )
        out["batch_shape"] = tuple(check_positive_int("batch_shape entry", d, upper=MAX_DIM)
                                   for d in bs)
        return out

    def input_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        bs = tuple(params["batch_shape"])
        return {"a": bs + (params["m"], params["k"]), "b": bs + (params["k"], params["n"])}

    def outputs(self, params: Mapping[str, Any]) -> tuple[str, ...]:
        return ("out",)

    def output_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        return {"out": tuple(params["batch_shape"]) + (params["m"], params["n"])}

    def reductions(self, params: Mapping[str, Any]) -> dict[str, int]:
        return {"out": params["k"]}

    def products(self, params: Mapping[str, Any]) -> tuple[Product, ...]:
        return (Product("a", "b", params["k"]),)

    def reference(
        self,
        inputs: Mapping[str, np.ndarray],
        params: Mapping[str, Any],
        model: PrecisionModel,
        outputs: tuple[str, ...] = (),
    ) -> dict[str, Tracked]:
        self._check_inputs(inputs, params)
        return {"out": matmul(exact(inputs["a"]), exact(inputs["b"]), model, stored=True)}
