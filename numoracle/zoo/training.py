"""Mutants of the torch CPU float32 SGD step of ``TinyCNN`` (conv2d -> ReLU -> MSE).

Each is a factory like :func:`numoracle.kernels.sgd_steps.torch_sgd_step`:
``factory(x, target, lr, conv=None) -> step(weight, bias)``, checked by
:func:`numoracle.trajectory.check_trajectory`, which must name the first step
and tensor that break the bound:

* ``stale_weights``: the forward pass keeps using the weights of the first
  call (a cached copy: the seed-002 descriptor bug): step 2, tensor ``y``;
* ``grad_not_averaged``: the loss gradient is not divided by ``numel(y)``
  (the reported loss is the mean): step 1, tensor ``grad_weight``;
* ``update_sign_flipped``: ``w + lr * grad``: step 1, tensor ``weight``.

They are not runner targets (``TARGETS`` is empty: ``numoracle zoo`` runs
single-op cases); ``STEP_MUTANTS`` lists them with the step and tensor at
which each must be caught. ``GPU_STEP_MUTANTS`` holds the same three bugs in
the torch CUDA step (cuDNN convolutions, TF32 off, claiming fp32), caught at
the same step and tensor.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import numpy as np

from numoracle.targets.target import Target
from numoracle.kernels.torch_targets import TorchMode, precision_flags

Step = Callable[[np.ndarray, "np.ndarray | None"], dict[str, np.ndarray]]
_MODE = TorchMode("cpu", "fp32")

#: no single-op runner targets here (see the module docstring)
TARGETS: list[Target] = []


def _flags(cuda: bool) -> Any:
    """The precision flags of the step: torch CPU fp32, or cuDNN with TF32 off."""
    if not cuda:
        return precision_flags(_MODE)
    from numoracle.kernels.torch_conv2d_cuda import CudnnMode, cudnn_flags  # noqa: PLC0415

    return cudnn_flags(CudnnMode())


def _torch_step(x: np.ndarray, target: np.ndarray, lr: float, conv: Mapping[str, Any] | None,
                *, stale: bool = False, averaged: bool = True, sign: float = 1.0,
                cuda: bool = False) -> Step:
    import torch  # noqa: PLC0415 - torch only when a mutant runs
    import torch.nn.functional as F  # noqa: PLC0415

    dev = torch.device("cuda" if cuda else "cpu")
    xt = torch.from_numpy(np.asarray(x, dtype=np.float32)).to(dev)
    tt = torch.from_numpy(np.asarray(target, dtype=np.float32)).to(dev)
    c = {"stride": 1, "padding": 0, "dilation": 1, "groups": 1, **(conv or {})}
    cache: dict[str, np.ndarray] = {}

    def step(weight: np.ndarray, bias: np.ndarray | None) -> dict[str, np.ndarray]:
        used = cache.setdefault("weight", np.array(weight, dtype=np.float32)) if stale \
            else np.asarray(weight, dtype=np.float32)
        with _flags(cuda), torch.enable_grad():
            w = torch.from_numpy(np.array(used)).to(dev).requires_grad_(True)
            b = None if bias is None else torch.from_numpy(
                np.asarray(bias, dtype=np.float32)).to(dev).requires_grad_(True)
            y = F.conv2d(xt, w, b, stride=c["stride"], padding=c["padding"],
                         dilation=c["dilation"], groups=c["groups"])
            r = F.relu(y)
            loss = F.mse_loss(r, tt)
            objective = loss if averaged else F.mse_loss(r, tt, reduction="sum")
            leaves = [w] if b is None else [w, b]
            grads = torch.autograd.grad(objective, leaves)
            with torch.no_grad():
                w_in = torch.from_numpy(np.asarray(weight, dtype=np.float32)).to(dev)
                out = {"y": y.detach().cpu().numpy(), "loss": loss.detach().cpu().numpy(),
                       "grad_weight": grads[0].cpu().numpy(),
                       "weight": (w_in - sign * lr * grads[0]).cpu().numpy()}
                if b is not None:
                    out["grad_bias"] = grads[1].cpu().numpy()
                    out["bias"] = (b - sign * lr * grads[1]).cpu().numpy()
        return out
    return step


def stale_weights(x: np.ndarray, target: np.ndarray, lr: float,
                  conv: Mapping[str, Any] | None = None, *, cuda: bool = False) -> Step:
    """The forward pass keeps the weights of the first call (a cached copy)."""
    return _torch_step(x, target, lr, conv, stale=True, cuda=cuda)


def grad_not_averaged(x: np.ndarray, target: np.ndarray, lr: float,
                      conv: Mapping[str, Any] | None = None, *, cuda: bool = False) -> Step:
    """The loss gradient is 2 (relu(y) - t), not divided by numel(y)."""
    return _torch_step(x, target, lr, conv, averaged=False, cuda=cuda)


def update_sign_flipped(x: np.ndarray, target: np.ndarray, lr: float,
                        conv: Mapping[str, Any] | None = None, *, cuda: bool = False) -> Step:
    """The update adds the gradient: w + lr * grad."""
    return _torch_step(x, target, lr, conv, sign=-1.0, cuda=cuda)


#: name -> (factory, the first step that must fail, the tensor named there)
STEP_MUTANTS: dict[str, tuple[Callable[..., Step], int, str]] = {
    "stale_weights": (stale_weights, 2, "y"),
    "grad_not_averaged": (grad_not_averaged, 1, "grad_weight"),
    "update_sign_flipped": (update_sign_flipped, 1, "weight"),
}

#: the same bugs in the torch CUDA step (cuDNN, TF32 off): name -> (factory, step, tensor)
GPU_STEP_MUTANTS: dict[str, tuple[Callable[..., Step], int, str]] = {
    f"{name}_cudnn": (partial(factory, cuda=True), step, tensor)
    for name, (factory, step, tensor) in STEP_MUTANTS.items()
}
