"""torch targets for ``kan``: efficient-kan's KAN layer, forward by its formulas,
backward by :func:`torch.autograd.grad`, on the CPU and on CUDA, in float32 and float64.

The forward pass is efficient-kan's ``KANLinear.forward``: the B-spline bases by
the Cox–de Boor recursion on the ``grid`` buffer (``b_splines``), then
``F.linear(silu(x), base_weight) + F.linear(bases.view(B, -1),
(coef * spline_weight[..., None]).view(O, -1))``. The backward pass is autograd
through all of it, so the input gradient is the reverse mode through the
recursion (what the oracle's ``either`` covers). Matmul flags are pinned as
for the linear targets (TF32 off on CUDA, IEEE oneDNN on the CPU).

:func:`kan_forward_backward` is the plain function (torch tensors in, dict out)
that the bug zoo and the comparison benchmark reuse.

The ``kan_chain`` targets chain the same layer: the forward pass through every
layer (each layer's input is the previous layer's output tensor, in the storage
dtype), then one :func:`torch.autograd.grad` from ``grad_output`` at the last
layer for the inputs of every layer (the first layer's ``x`` included) and
every layer's parameters (:func:`kan_chain_forward_backward`).
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import Any

from ..oracle.precision import get_model
from ..targets.backends import get_backend
from ..targets.target import Target
from .torch_targets import _NO_CONTEXT_WARNING, TorchMode, precision_flags

__all__ = ["b_splines", "kan_forward", "kan_forward_backward", "kan", "kan_chain",
           "kan_chain_forward_backward", "chain_layers", "TARGETS"]


def b_splines(x: Any, grid: Any, order: int) -> Any:
    """efficient-kan's ``b_splines``: ``(B, I)`` inputs, ``(I, M)`` knots ->
    ``(B, I, M - 1 - order)`` bases."""
    xe = x.unsqueeze(-1)
    b = ((xe >= grid[:, :-1]) & (xe < grid[:, 1:])).to(x.dtype)
    for p in range(1, order + 1):
        b = ((xe - grid[:, :-(p + 1)]) / (grid[:, p:-1] - grid[:, :-(p + 1)]) * b[:, :, :-1]
             + (grid[:, p + 1:] - xe) / (grid[:, p + 1:] - grid[:, 1:-p]) * b[:, :, 1:])
    return b


def kan_forward(x: Any, grid: Any, coef: Any, base_weight: Any, spline_weight: Any) -> Any:
    """efficient-kan's ``KANLinear.forward`` (the order follows from the shapes)."""
    import torch.nn.functional as F

    order = grid.shape[1] - coef.shape[2] - 1
    bases = b_splines(x, grid, order)
    scaled = coef * spline_weight.unsqueeze(-1)
    return (F.linear(F.silu(x), base_weight)
            + F.linear(bases.reshape(x.shape[0], -1), scaled.reshape(coef.shape[0], -1)))


def kan_forward_backward(x: Any, grid: Any, coef: Any, base_weight: Any, spline_weight: Any,
                         grad_output: Any) -> dict[str, Any]:
    """``y`` and the four gradients for ``grad_output``, by autograd."""
    import torch

    with torch.enable_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", _NO_CONTEXT_WARNING, UserWarning)
        leaves = [t.detach().requires_grad_(True) for t in (x, coef, base_weight, spline_weight)]
        y = kan_forward(leaves[0], grid, leaves[1], leaves[2], leaves[3])
        grads = torch.autograd.grad(y, leaves, grad_outputs=grad_output)
    return {"y": y.detach(), "grad_input": grads[0], "grad_coef": grads[1],
            "grad_base_weight": grads[2], "grad_spline_weight": grads[3]}


def kan(x: Any, grid: Any, coef: Any, base_weight: Any, spline_weight: Any, grad_output: Any,
        *, mode: TorchMode) -> dict[str, Any]:
    """The target function: flags pinned for ``mode``, then :func:`kan_forward_backward`."""
    with precision_flags(mode):
        return kan_forward_backward(x, grid, coef, base_weight, spline_weight, grad_output)


def chain_layers(arrays: dict[str, Any]) -> int:
    """The number of layers of a chain's inputs (``grid_0``, ``grid_1``, ...)."""
    n = 0
    while f"grid_{n}" in arrays:
        n += 1
    return n


def kan_chain_forward_backward(arrays: dict[str, Any], *,
                               skip_first_input_grad: bool = False) -> dict[str, Any]:
    """Every layer's ``y`` and four gradients for a chain's inputs (names of
    :mod:`numoracle.oracle.ops.kan_chain`), by autograd through the whole chain.

    ``skip_first_input_grad`` plants seed 001's bug (``compute_input_grad =
    layer_idx > 0``): the first layer's input gradient is never computed (zeros).
    """
    import torch

    n = chain_layers(arrays)
    with torch.enable_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", _NO_CONTEXT_WARNING, UserWarning)
        x = arrays["x"].detach().requires_grad_(True)
        params = [[arrays[f"{p}_{i}"].detach().requires_grad_(True)
                   for p in ("coef", "base_weight", "spline_weight")] for i in range(n)]
        xs, h = [x], x
        for i in range(n):
            h = kan_forward(h, arrays[f"grid_{i}"], *params[i])
            xs.append(h)
        wrt = xs[1 if skip_first_input_grad else 0:-1] + [p for ps in params for p in ps]
        grads = list(torch.autograd.grad(xs[-1], wrt, grad_outputs=arrays["grad_output"]))
    if skip_first_input_grad:
        grads.insert(0, torch.zeros_like(x))
    out: dict[str, Any] = {}
    for i in range(n):
        out[f"y_{i}"] = xs[i + 1].detach()
        out[f"grad_input_{i}"] = grads[i]
        gc, gb, gs = grads[n + 3 * i: n + 3 * i + 3]
        out.update({f"grad_coef_{i}": gc, f"grad_base_weight_{i}": gb,
                    f"grad_spline_weight_{i}": gs})
    return out


def kan_chain(*, mode: TorchMode, **arrays: Any) -> dict[str, Any]:
    """The chain target function: flags pinned for ``mode``, then
    :func:`kan_chain_forward_backward`."""
    with precision_flags(mode):
        return kan_chain_forward_backward(arrays)


def _available(device: str) -> str | None:
    return get_backend(f"torch-{device}").available()


def _targets() -> tuple[Target, ...]:
    out = []
    for device in ("cpu", "cuda"):
        for storage, dtype in (("fp32", "float32"), ("fp64", "float64")):
            mode = TorchMode(device, "fp32")  # flags: TF32 off, IEEE oneDNN (fp64 unaffected)
            out.append(Target(
                name=f"torch-{device}-{storage}", op="kan", backend=f"torch-{device}",
                precision=get_model(storage), fn=partial(kan, mode=mode),
                available=partial(_available, device),
                description=f"efficient-kan KANLinear in torch {dtype} on {device}: forward "
                            "by its formulas, backward by autograd; all outputs"))
            out.append(Target(
                name=f"torch-{device}-{storage}", op="kan_chain", backend=f"torch-{device}",
                precision=get_model(storage), fn=partial(kan_chain, mode=mode),
                available=partial(_available, device),
                description=f"a chain of efficient-kan KANLinear layers in torch {dtype} on "
                            f"{device}: forward through every layer, backward by autograd "
                            "through the chain; every layer's outputs"))
    return tuple(out)


#: the torch KAN targets: CPU and CUDA, float32 and float64, a layer and a chain
TARGETS: tuple[Target, ...] = _targets()
