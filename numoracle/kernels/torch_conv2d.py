"""torch CPU target for ``conv2d``: ``F.conv2d`` forward, autograd backward.

``torch-cpu-fp32`` runs :func:`torch.nn.functional.conv2d` on float32 CPU
tensors (oneDNN or ATen's own im2col + sgemm, whichever torch picks) and
:func:`torch.autograd.grad` for the given ``grad_output``, under
:func:`~numoracle.kernels.torch_targets.precision_flags` (oneDNN's fp32
precision pinned to IEEE). It claims the ``fp32`` preset: fp32 products and
sums in an unspecified order, which bounds the forward pass and each
gradient alike.

It takes activations in ``NCHW`` and weights in ``OIHW``, row- or
column-major (torch reads any strides), and returns every output in the
canonical order.
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import Any

from ..oracle.precision import get_model
from ..targets.target import Target
from .torch_targets import (
    _NO_CONTEXT_WARNING,
    TorchMode,
    _available,
    _check_tensors,
    precision_flags,
)

__all__ = ["conv2d", "TARGETS"]


def conv2d(x: Any, weight: Any, grad_output: Any, bias: Any = None, *,
           params: dict[str, Any], mode: TorchMode) -> dict[str, Any]:
    """``y = F.conv2d(x, weight, bias, stride, padding, dilation, groups)`` and its
    gradients for ``grad_output``; tensors of the inputs' dtype on their device."""
    import torch
    import torch.nn.functional as F

    _check_tensors(mode, x=x, weight=weight, grad_output=grad_output, bias=bias)
    with precision_flags(mode), torch.enable_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", _NO_CONTEXT_WARNING, UserWarning)
        inputs = (x, weight) if bias is None else (x, weight, bias)
        leaves = [t.detach().requires_grad_(True) for t in inputs]
        y = F.conv2d(leaves[0], leaves[1], leaves[2] if bias is not None else None,
                     stride=params["stride"], padding=params["padding"],
                     dilation=params["dilation"], groups=params["groups"])
        grads = torch.autograd.grad(y, leaves, grad_outputs=grad_output)
    out = {"y": y.detach(), "grad_input": grads[0], "grad_weight": grads[1]}
    if bias is not None:
        out["grad_bias"] = grads[2]
    return out


_CPU_FP32 = TorchMode("cpu", "fp32")

#: the torch CPU conv2d targets
TARGETS: tuple[Target, ...] = (
    Target(
        name=_CPU_FP32.target_name, op="conv2d", backend="torch-cpu",
        precision=get_model("fp32"), fn=partial(conv2d, mode=_CPU_FP32),
        layouts={"x": ("NCHW", "NCHW:F", "S"), "weight": ("OIHW", "OIHW:F", "S"),
                 "grad_output": ("NCHW", "NCHW:F", "S"), "bias": ("C", "S")},
        available=partial(_available, _CPU_FP32),
        description="torch CPU float32 F.conv2d forward, autograd backward; all outputs",
    ),
)
