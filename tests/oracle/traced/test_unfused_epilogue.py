"""addmm under a model claiming an unfused epilogue (``bias_after_store``)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from numoracle.api import check_kernel
from numoracle.oracle.precision import get_model
from numoracle.oracle.traced.library.contractions import addmm_rule
from numoracle.oracle.traced.op import traced_op
from numoracle.oracle.traced.rules import RuleContext
from numoracle.oracle.tracked import exact


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.linear(x, weight, bias)


def unfused(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
            ) -> dict[str, torch.Tensor]:
    """x W^T accumulated in float32 and rounded to bfloat16, then the bias added."""
    prod = (x.float() @ weight.float().T).bfloat16()
    return {"out": prod + bias}


def test_the_claim_rounds_the_product_before_the_bias() -> None:
    rng = np.random.default_rng(0)
    a, b = exact(rng.standard_normal((3, 5))), exact(rng.standard_normal((5, 2)))
    bias = exact(rng.standard_normal(2) * 100.0)  # the product's rounding is then visible
    fused = addmm_rule(RuleContext(get_model("bf16")), bias, a, b)
    split = addmm_rule(RuleContext(get_model("bf16", bias_after_store=True)), bias, a, b)
    np.testing.assert_array_equal(fused.value, split.value)
    assert np.all(split.det >= fused.det) and np.any(split.det > fused.det)


def test_an_unfused_kernel_passes_the_claim() -> None:
    op = traced_op(linear, inputs={"x": ("batch", "i"), "weight": ("o", "i"), "bias": ("o",)},
                   dims={"i": (1, 16), "o": (1, 4)}, name="traced_linear_epilogue")
    check_kernel(unfused, op=op.name, precision=get_model("bf16", bias_after_store=True),
                 examples=40, store=None, backend="torch-cpu")
