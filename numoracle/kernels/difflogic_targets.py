"""Targets for ``logic_layer``: the ``difflogic`` package's own ``LogicLayer``
(Petersen et al. 2022) as a third-party client, judged as it ships.

``difflogic-python-*``: ``LogicLayer(in_dim, out_dim, implementation='python')`` in
training mode on the CPU (and on CUDA where there is one), float32 and float64; its
connection map and logits are replaced by the case's, then ``y`` and the gradients
of the input and of the logits come from :func:`torch.autograd.grad`.
``difflogic-cuda-fp32``: the same layer with ``implementation='cuda'`` (its CUDA
extension's forward and backward kernels), with the extension's reverse index
(``given_x_indices_of_y``) rebuilt for the case's connection map as its
constructor builds it.

``difflogic`` builds a CUDA extension in its ``setup.py`` (which imports torch), and
``difflogic/difflogic.py`` imports that extension at the top, so even the python
implementation needs it: install with ``pip install --no-build-isolation --no-deps
difflogic`` on a machine with the CUDA toolkit. With torch 2.11 its kernel source
compiles only after its ``AT_DISPATCH_*(x.type(), ...)`` calls take
``x.scalar_type()``. The CUDA
implementation's input gradient is wrong for a neuron whose two inputs are the same
(``benchmarks/results/findings/difflogic-cuda-same-input-grad/``): the target fails
those cases, as it should. The targets are available only where
``import difflogic`` works. ``LogicLayer`` asserts ``2 out_dim >= in_dim``; for cases
with fewer neurons the layer is built with a smaller ``in_dim`` and then given the
case's (the python implementation reads ``in_dim`` only in that assertion and in its
shape check).
"""

from __future__ import annotations

import importlib
import warnings
from functools import partial
from typing import Any

from ..oracle.precision import get_model
from ..targets.backends import get_backend
from ..targets.target import Target

__all__ = ["difflogic_layer", "TARGETS"]


def _available(device: str, implementation: str) -> str | None:
    reason = get_backend(f"torch-{device}").available()
    if reason:
        return reason
    try:
        importlib.import_module("difflogic")  # optional third-party package
    except Exception as exc:  # noqa: BLE001 - its CUDA extension may fail to load
        return (f"difflogic is not importable ({type(exc).__name__}: {exc}); install it with "
                "`pip install --no-build-isolation --no-deps difflogic` where the CUDA "
                "toolkit is present (with torch >= 2.11 its CUDA source compiles only with "
                "`x.type()` changed to `x.scalar_type()` in its AT_DISPATCH calls)")
    if implementation == "cuda" and device != "cuda":
        return "difflogic's CUDA implementation needs a CUDA device"
    return None


def difflogic_layer(x: Any, idx_a: Any, idx_b: Any, weights: Any, grad_output: Any, *,
                    implementation: str) -> dict[str, Any]:
    """``y``, ``grad_input`` and ``grad_weights`` of difflogic's ``LogicLayer``."""
    import numpy as np
    import torch
    LogicLayer = importlib.import_module("difflogic").LogicLayer

    n_in, n_out = int(x.shape[1]), int(weights.shape[0])
    device = "cuda" if x.is_cuda else "cpu"
    with torch.enable_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        layer = LogicLayer(min(n_in, 2 * n_out), n_out, device=device,
                           implementation=implementation)
        layer.in_dim = n_in
        # int32 indices: int64 ones make forward_python print their dtypes on every call
        a = idx_a.to(torch.int32 if implementation == "python" else torch.int64)
        b = idx_b.to(a.dtype)
        layer.indices = (a, b)
        if implementation == "cuda":
            lists: list[list[int]] = [[] for _ in range(n_in)]
            for j, (ia, ib) in enumerate(zip(a.cpu().tolist(), b.cpu().tolist(), strict=True)):
                lists[ia].append(j)
                lists[ib].append(j)
            layer.given_x_indices_of_y_start = torch.tensor(
                np.array([0] + [len(v) for v in lists]).cumsum(), device=device,
                dtype=torch.int64)
            layer.given_x_indices_of_y = torch.tensor(
                [j for v in lists for j in v], dtype=torch.int64, device=device)
        layer.weights = torch.nn.Parameter(weights.detach().clone())
        layer.train()
        xl = x.detach().requires_grad_(True)
        y = layer(xl)
        gx, gw = torch.autograd.grad(y, (xl, layer.weights), grad_outputs=grad_output)
    return {"y": y.detach(), "grad_input": gx, "grad_weights": gw}


def _targets() -> tuple[Target, ...]:
    out = []
    for device in ("cpu", "cuda"):
        for storage in ("fp32", "fp64"):
            out.append(Target(
                name=f"difflogic-python-{device}-{storage}", op="logic_layer",
                backend=f"torch-{device}", precision=get_model(storage),
                fn=partial(difflogic_layer, implementation="python"),
                available=partial(_available, device, "python"),
                description=f"the difflogic package's LogicLayer, implementation='python', "
                            f"training mode, on {device} in {storage}: autograd"))
    out.append(Target(
        name="difflogic-cuda-fp32", op="logic_layer", backend="torch-cuda",
        precision=get_model("fp32"), fn=partial(difflogic_layer, implementation="cuda"),
        available=partial(_available, "cuda", "cuda"),
        description="the difflogic package's LogicLayer, implementation='cuda' (its CUDA "
                    "extension's kernels), training mode, fp32"))
    return tuple(out)


#: difflogic's LogicLayer: python implementation (CPU/CUDA, fp32/fp64) and CUDA kernels
TARGETS: tuple[Target, ...] = _targets()
