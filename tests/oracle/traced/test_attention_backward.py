"""Fused attention is traced as its math, so its backward is judged too."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from numoracle.api import check_kernel
from numoracle.errors import KernelMismatch
from numoracle.oracle.traced.op import traced_op

GRADS = ("q", "k", "v")


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v)


def _op() -> Any:
    return traced_op(sdpa, inputs={"q": ("batch", 2, "s", "d"), "k": ("batch", 2, "t", "d"),
                                   "v": ("batch", 2, "t", "e")},
                     dims={"s": (1, 6), "t": (1, 6), "d": (1, 8), "e": (1, 4)}, grads=GRADS,
                     name="traced_sdpa_heads")


def _kernel(scale_k_grad: float) -> Any:
    def kernel(**kw: np.ndarray) -> dict[str, np.ndarray]:
        ins = {k: torch.from_numpy(np.array(v)) for k, v in kw.items()}
        for n in GRADS:
            ins[n].requires_grad_(True)
        out = sdpa(ins["q"], ins["k"], ins["v"])
        grads = torch.autograd.grad(out, [ins[n] for n in GRADS], ins["grad_out"])
        got = {f"grad_{n}": g.numpy() for n, g in zip(GRADS, grads, strict=True)}
        got["grad_k"] = got["grad_k"] * scale_k_grad
        return {"out": out.detach().numpy(), **got}
    return kernel


def test_four_dimensional_attention_with_gradients_is_judged() -> None:
    op = _op()
    check_kernel(_kernel(1.0), op=op.name, precision="fp32", examples=25, store=None)
    with pytest.raises(KernelMismatch, match="grad_k"):
        check_kernel(_kernel(1.01), op=op.name, precision="fp32", examples=25, store=None)
