"""torch targets for ``logic_layer`` and ``logic_ca``: difflogic's relaxed logic gates,
forward by its formulas, backward by :func:`torch.autograd.grad`, on the CPU and on
CUDA, in float32 and float64.

The layer is difflogic's ``LogicLayer.forward_python`` in training mode:
``a, b = x[..., idx_a], x[..., idx_b]``, then ``r = r + p[..., g] * bin_op(a, b, g)``
for the 16 gates in order, ``p = softmax(weights, -1)`` (:func:`bin_op` writes the
gate formulas of :mod:`numoracle.oracle.logic_gates` as difflogic does).

The automaton (:func:`ca_forward`) runs ``steps`` steps of: the 3x3 neighbourhood of
every cell and channel (``torch.roll`` for a periodic boundary, zero padding
otherwise), each perception kernel's logic tree ``9 -> 4 -> 2 -> 1`` on every
channel's neighbourhood, the features ``[cell, kernel 0 channels, kernel 1
channels, ...]``, and the update network ``C (1 + K) -> hidden -> C``; the loss is
the mean squared error to ``target``. The softmax of each layer's logits is taken
once; autograd then sums every cell's and step's gradient of the probabilities
before the softmax backward.

:func:`logic_layer_forward_backward` and :func:`ca_forward_backward` are the plain
functions (torch tensors in, dict out) that the bug zoo reuses.
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import Any

from ..oracle.precision import get_model
from ..targets.backends import get_backend
from ..targets.target import Target
from .torch_targets import _NO_CONTEXT_WARNING, TorchMode, precision_flags

__all__ = ["bin_op", "bin_op_s", "logic_layer_forward", "logic_layer_forward_backward",
           "ca_forward", "ca_forward_backward", "PERCEPTION_WIDTHS", "OFFSETS", "TARGETS"]

#: the perception kernel's logic tree: 9 neighbourhood values -> 4 -> 2 -> 1
PERCEPTION_WIDTHS = (4, 2, 1)
#: the 3x3 neighbourhood, (dy, dx), row by row
OFFSETS = tuple((dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1))


def bin_op(a: Any, b: Any, i: int) -> Any:
    """Gate ``i`` of two tensors, difflogic's formula."""
    import torch

    forms = (
        lambda: torch.zeros_like(a), lambda: a * b, lambda: a - a * b, lambda: a,
        lambda: b - a * b, lambda: b, lambda: a + b - 2 * a * b, lambda: a + b - a * b,
        lambda: 1 - (a + b - a * b), lambda: 1 - (a + b - 2 * a * b), lambda: 1 - b,
        lambda: 1 - b + a * b, lambda: 1 - a, lambda: 1 - a + a * b, lambda: 1 - a * b,
        lambda: torch.ones_like(a))
    return forms[i]()


def bin_op_s(a: Any, b: Any, p: Any) -> Any:
    """``sum_g p[..., g] bin_op(a, b, g)``, accumulated gate by gate."""
    import torch

    r = torch.zeros_like(a)
    for i in range(16):
        r = r + p[..., i] * bin_op(a, b, i)
    return r


def logic_layer_forward(x: Any, idx_a: Any, idx_b: Any, p: Any) -> Any:
    """One layer for probabilities ``p`` (J, 16); ``idx_a``, ``idx_b`` integer tensors."""
    return bin_op_s(x[..., idx_a], x[..., idx_b], p)


def logic_layer_forward_backward(x: Any, idx_a: Any, idx_b: Any, weights: Any,
                                 grad_output: Any) -> dict[str, Any]:
    """``y``, ``grad_input`` and ``grad_weights`` by autograd."""
    import torch

    with torch.enable_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", _NO_CONTEXT_WARNING, UserWarning)
        xl = x.detach().requires_grad_(True)
        wl = weights.detach().requires_grad_(True)
        p = torch.nn.functional.softmax(wl, dim=-1)
        y = logic_layer_forward(xl, idx_a.long(), idx_b.long(), p)
        gx, gw = torch.autograd.grad(y, (xl, wl), grad_outputs=grad_output)
    return {"y": y.detach(), "grad_input": gx, "grad_weights": gw}


def logic_layer(x: Any, idx_a: Any, idx_b: Any, weights: Any, grad_output: Any, *,
                mode: TorchMode) -> dict[str, Any]:
    """The layer target: flags pinned for ``mode``, then autograd."""
    with precision_flags(mode):
        return logic_layer_forward_backward(x, idx_a, idx_b, weights, grad_output)


def neighbourhood(x: Any, periodic: bool) -> Any:
    """``(H, W, C)`` -> ``(H, W, C, 9)``: value at ``(y + dy, x + dx)`` per offset."""
    import torch

    h, w, _ = x.shape
    if periodic:
        parts = [torch.roll(x, shifts=(-dy, -dx), dims=(0, 1)) for dy, dx in OFFSETS]
    else:
        padded = torch.nn.functional.pad(x.permute(2, 0, 1), (1, 1, 1, 1)).permute(1, 2, 0)
        parts = [padded[1 + dy:1 + dy + h, 1 + dx:1 + dx + w] for dy, dx in OFFSETS]
    return torch.stack(parts, dim=-1)


def ca_forward(grid: Any, pp: Any, pidx: Any, pu: Any, uidx: Any, steps: int,
               periodic: bool) -> Any:
    """The grid after ``steps`` steps for probabilities ``pp`` (K, 7, 16) and
    ``pu`` (hidden + C, 16) and integer connection maps ``pidx``, ``uidx``."""
    import torch

    h, w, c = grid.shape
    k_count = pp.shape[0]
    hidden = pu.shape[0] - c
    x = grid
    for _ in range(steps):
        rows = neighbourhood(x, periodic).reshape(h * w * c, 9)
        feats = [x.reshape(h * w, c)]
        for k in range(k_count):
            z, off = rows, 0
            for width in PERCEPTION_WIDTHS:
                sl = slice(off, off + width)
                z = logic_layer_forward(z, pidx[k, sl, 0], pidx[k, sl, 1], pp[k, sl])
                off += width
            feats.append(z.reshape(h * w, c))
        f = torch.cat(feats, dim=1)
        z = logic_layer_forward(f, uidx[:hidden, 0], uidx[:hidden, 1], pu[:hidden])
        z = logic_layer_forward(z, uidx[hidden:, 0], uidx[hidden:, 1], pu[hidden:])
        x = z.reshape(h, w, c)
    return x


def ca_forward_backward(grid: Any, target: Any, perception: Any, perception_idx: Any,
                        update: Any, update_idx: Any, *, steps: int,
                        periodic: bool) -> dict[str, Any]:
    """The final grid, the loss and the gradients of the initial grid and of every
    gate logit, by autograd through time."""
    import torch

    with torch.enable_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", _NO_CONTEXT_WARNING, UserWarning)
        g0 = grid.detach().requires_grad_(True)
        wp = perception.detach().requires_grad_(True)
        wu = update.detach().requires_grad_(True)
        pp = torch.nn.functional.softmax(wp, dim=-1)
        pu = torch.nn.functional.softmax(wu, dim=-1)
        out = ca_forward(g0, pp, perception_idx.long(), pu, update_idx.long(), steps, periodic)
        loss = ((out - target) ** 2).mean()
        gg, gp, gu = torch.autograd.grad(loss, (g0, wp, wu))
    return {"y": out.detach(), "loss": loss.detach().reshape(1), "grad_grid": gg,
            "grad_perception": gp, "grad_update": gu}


def logic_ca(grid: Any, target: Any, perception: Any, perception_idx: Any, update: Any,
             update_idx: Any, *, params: dict[str, Any], mode: TorchMode) -> dict[str, Any]:
    """The automaton target: flags pinned for ``mode``, then autograd through time."""
    with precision_flags(mode):
        return ca_forward_backward(grid, target, perception, perception_idx, update, update_idx,
                                   steps=int(params["steps"]), periodic=bool(params["periodic"]))


def _available(device: str) -> str | None:
    return get_backend(f"torch-{device}").available()


def _targets() -> tuple[Target, ...]:
    out = []
    for device in ("cpu", "cuda"):
        for storage, dtype in (("fp32", "float32"), ("fp64", "float64")):
            mode = TorchMode(device, "fp32")  # flags only (nothing here uses a matmul)
            out.append(Target(
                name=f"torch-{device}-{storage}", op="logic_layer", backend=f"torch-{device}",
                precision=get_model(storage), fn=partial(logic_layer, mode=mode),
                available=partial(_available, device),
                description=f"difflogic LogicLayer (python implementation's formulas) in torch "
                            f"{dtype} on {device}: forward, backward by autograd"))
            out.append(Target(
                name=f"torch-{device}-{storage}", op="logic_ca", backend=f"torch-{device}",
                precision=get_model(storage), fn=partial(logic_ca, mode=mode),
                available=partial(_available, device),
                description=f"a differentiable logic cellular automaton in torch {dtype} on "
                            f"{device}: T steps, MSE loss, gradients by autograd through time"))
    return tuple(out)


#: the torch logic targets: CPU and CUDA, float32 and float64, a layer and an automaton
TARGETS: tuple[Target, ...] = _targets()
