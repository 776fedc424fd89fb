"""Correct SGD steps of :class:`~numoracle.training.TinyCNN` (conv2d -> ReLU -> MSE),
the targets of :func:`~numoracle.training.check_trajectory`.

Each factory takes the step's fixed data (``x``, ``target``, ``lr`` and the
convolution's ``stride`` / ``padding`` / ``dilation`` / ``groups``) and returns
``step(weight, bias) -> {"loss", "y", "grad_weight", "grad_bias", "weight",
"bias"}`` on float32 NumPy arrays (``bias`` None for none):

* :func:`torch_sgd_step`: torch CPU float32, ``F.conv2d``, ``F.relu``,
  ``F.mse_loss``, gradients by :func:`torch.autograd.grad`, the update by hand
  (``w - lr * grad``);
* :func:`numpy_sgd_step`: NumPy float32 through the ``numpy-fp32`` conv2d
  kernel (im2col + sgemm), the loss and its gradient written out.

Both claim the ``fp32`` preset.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..oracle.ops.conv2d import Conv2d
from .numpy_conv2d import conv2d as numpy_conv2d
from .torch_targets import TorchMode, precision_flags

__all__ = ["torch_sgd_step", "numpy_sgd_step", "conv_params"]

Step = Callable[[np.ndarray, "np.ndarray | None"], dict[str, np.ndarray]]
_CPU_FP32 = TorchMode("cpu", "fp32")


def conv_params(x: np.ndarray, weight_shape: tuple[int, ...], bias: bool,
                conv: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Validated :class:`~numoracle.oracle.ops.conv2d.Conv2d` parameters for these shapes."""
    return Conv2d().validate({
        "batch": x.shape[0], "in_channels": x.shape[1], "out_channels": weight_shape[0],
        "height": x.shape[2], "width": x.shape[3], "kernel_size": tuple(weight_shape[2:]),
        "bias": bias, **(conv or {})})


def torch_sgd_step(x: np.ndarray, target: np.ndarray, lr: float,
                   conv: Mapping[str, Any] | None = None) -> Step:
    """One SGD step in torch CPU float32 (autograd through ``F.conv2d``)."""
    import torch
    import torch.nn.functional as F

    xt = torch.from_numpy(np.asarray(x, dtype=np.float32))
    tt = torch.from_numpy(np.asarray(target, dtype=np.float32))
    c = {"stride": 1, "padding": 0, "dilation": 1, "groups": 1, **(conv or {})}

    def step(weight: np.ndarray, bias: np.ndarray | None) -> dict[str, np.ndarray]:
        with precision_flags(_CPU_FP32), torch.enable_grad():
            w = torch.from_numpy(np.asarray(weight, dtype=np.float32)).requires_grad_(True)
            b = None if bias is None else torch.from_numpy(
                np.asarray(bias, dtype=np.float32)).requires_grad_(True)
            y = F.conv2d(xt, w, b, stride=c["stride"], padding=c["padding"],
                         dilation=c["dilation"], groups=c["groups"])
            loss = F.mse_loss(F.relu(y), tt)
            leaves = [w] if b is None else [w, b]
            grads = torch.autograd.grad(loss, leaves)
            with torch.no_grad():
                out = {"y": y.detach().numpy(), "loss": loss.detach().numpy(),
                       "grad_weight": grads[0].numpy(), "weight": (w - lr * grads[0]).numpy()}
                if b is not None:
                    out["grad_bias"] = grads[1].numpy()
                    out["bias"] = (b - lr * grads[1]).numpy()
        return out
    return step


def numpy_sgd_step(x: np.ndarray, target: np.ndarray, lr: float,
                   conv: Mapping[str, Any] | None = None) -> Step:
    """One SGD step in NumPy float32 (the ``numpy-fp32`` conv2d kernel, NHWC / HWIO)."""
    x32 = np.asarray(x, dtype=np.float32)
    t32 = np.asarray(target, dtype=np.float32)
    xn = np.ascontiguousarray(x32.transpose(0, 2, 3, 1))
    lr32 = np.float32(lr)

    def step(weight: np.ndarray, bias: np.ndarray | None) -> dict[str, np.ndarray]:
        w32 = np.asarray(weight, dtype=np.float32)
        b32 = None if bias is None else np.asarray(bias, dtype=np.float32)
        params = conv_params(x32, w32.shape, b32 is not None, conv)
        wh = np.ascontiguousarray(w32.transpose(2, 3, 1, 0))  # HWIO
        n, o = x32.shape[0], w32.shape[0]
        ho, wo = t32.shape[2:]
        zero = np.zeros((n, ho, wo, o), np.float32)
        y = numpy_conv2d(xn, wh, zero, b32, params=params)["y"].transpose(0, 3, 1, 2)
        d = np.maximum(y, np.float32(0)) - t32
        m = np.float32(d.size)
        loss = np.sum(d * d, dtype=np.float32) / m
        grad_y = (np.float32(2) * d) / m * (y > 0)
        back = numpy_conv2d(xn, wh, np.ascontiguousarray(grad_y.transpose(0, 2, 3, 1)), b32,
                            params=params)
        gw = np.ascontiguousarray(back["grad_weight"].transpose(3, 2, 0, 1))
        out = {"y": np.ascontiguousarray(y), "loss": np.asarray(loss, dtype=np.float32),
               "grad_weight": gw, "weight": w32 - lr32 * gw}
        if b32 is not None:
            out["grad_bias"] = back["grad_bias"]
            out["bias"] = b32 - lr32 * back["grad_bias"]
        return out
    return step
