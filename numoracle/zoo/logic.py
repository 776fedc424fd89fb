"""Mutants of a differentiable logic-gate layer and of a logic cellular automaton
(seed 004), each claiming fp32.

The layer mutants are difflogic's layer in torch on the CPU with one gradient
changed; the automaton mutants are seed 004's backward pass in NumPy
(:func:`numoracle.kernels.numpy_logic.ca_numpy`, per-cell gradients merged cell by
cell) with one bug planted. ``numoracle zoo --ops logic`` must catch each with the
default strategies, and the correct kernels must pass.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from numoracle.targets.target import Target
from numoracle.kernels.numpy_logic import ca_numpy
from numoracle.kernels.torch_logic import bin_op, logic_layer_forward_backward
from numoracle.oracle.precision import get_model


# -- the layer (torch, CPU) ---------------------------------------------------------------------
def layer_xor_derivative_wrong(x, idx_a, idx_b, weights, grad_output) -> dict[str, Any]:
    """The XOR gate's derivative taken as OR's: ``d/da (a + b - 2ab)`` computed as
    ``1 - b`` (and ``1 - a`` for ``b``); the forward pass is right."""
    out = logic_layer_forward_backward(x, idx_a, idx_b, weights, grad_output)
    ia, ib = idx_a.long(), idx_b.long()
    p6 = torch.softmax(weights, dim=-1)[:, 6]
    a, b = x[:, ia], x[:, ib]
    gx = out["grad_input"].clone()
    gx.index_add_(1, ia, grad_output * p6 * b)  # (1 - b) - (1 - 2b) = b
    gx.index_add_(1, ib, grad_output * p6 * a)
    out["grad_input"] = gx
    return out


def layer_softmax_no_centring(x, idx_a, idx_b, weights, grad_output) -> dict[str, Any]:
    """The gradient of the logits without the softmax's centring term:
    ``p * G`` instead of ``p * (G - <p, G>)``."""
    out = logic_layer_forward_backward(x, idx_a, idx_b, weights, grad_output)
    ia, ib = idx_a.long(), idx_b.long()
    p = torch.softmax(weights, dim=-1)
    a, b = x[:, ia], x[:, ib]
    g = torch.stack([(grad_output * bin_op(a, b, i)).sum(0) for i in range(16)], dim=-1)
    out["grad_weights"] = p * g
    return out


# -- the automaton (NumPy, seed 004's design) --------------------------------------------------
def _ca(**flags: Any) -> Any:
    def fn(grid, target, perception, perception_idx, update, update_idx, params):
        return ca_numpy(grid, target, perception, perception_idx, update, update_idx,
                        params=params, dtype=np.float32, **flags)
    return fn


def ca_periodic_wrap_wrong(grid, target, perception, perception_idx, update, update_idx,
                           params) -> dict[str, Any]:
    """Distributing the neighbourhood gradients, the periodic wrap of the row uses the
    grid's width instead of its height (the forward pass wraps correctly)."""
    return _ca(wrap_wrong=True)(grid, target, perception, perception_idx, update,
                                update_idx, params)


def ca_bptt_steps_forward_order(grid, target, perception, perception_idx, update,
                                update_idx, params) -> dict[str, Any]:
    """Backpropagation through time visits the steps in forward order: the gradient of
    the last grid meets the activations of the first step."""
    return _ca(bptt_forward_order=True)(grid, target, perception, perception_idx, update,
                                        update_idx, params)


def ca_xor_derivative_wrong(grid, target, perception, perception_idx, update, update_idx,
                            params) -> dict[str, Any]:
    """XOR's relaxation and derivative taken as OR's in the backward pass."""
    return _ca(xor_wrong=True)(grid, target, perception, perception_idx, update,
                               update_idx, params)


def ca_softmax_no_centring(grid, target, perception, perception_idx, update, update_idx,
                           params) -> dict[str, Any]:
    """Every layer's logit gradient without the softmax's centring term."""
    return _ca(no_centring=True)(grid, target, perception, perception_idx, update,
                                 update_idx, params)


def ca_unsynchronised_merge(grid, target, perception, perception_idx, update, update_idx,
                            params) -> dict[str, Any]:
    """Per-cell gradients added into the shared accumulators without synchronisation:
    cells merge in pairs that both read before either writes, so one update of each
    pair is lost (a CPU emulation of the race)."""
    return _ca(merge="racy")(grid, target, perception, perception_idx, update,
                             update_idx, params)


def ca_perception_kernel_dropped(grid, target, perception, perception_idx, update,
                                 update_idx, params) -> dict[str, Any]:
    """The last perception kernel's gate gradients are never merged (stay zero)."""
    return _ca(drop_kernel=-1)(grid, target, perception, perception_idx, update,
                               update_idx, params)


_LAYER = {
    "logic_layer_xor_derivative_wrong": layer_xor_derivative_wrong,
    "logic_layer_softmax_no_centring": layer_softmax_no_centring,
}
_CA = {
    "logic_ca_periodic_wrap_wrong": ca_periodic_wrap_wrong,
    "logic_ca_bptt_steps_forward_order": ca_bptt_steps_forward_order,
    "logic_ca_xor_derivative_wrong": ca_xor_derivative_wrong,
    "logic_ca_softmax_no_centring": ca_softmax_no_centring,
    "logic_ca_unsynchronised_merge": ca_unsynchronised_merge,
    "logic_ca_perception_kernel_dropped": ca_perception_kernel_dropped,
}

TARGETS: list[Target] = [
    Target(name=name, op="logic_layer", backend="torch-cpu", precision=get_model("fp32"),
           fn=fn, description=(fn.__doc__ or "").strip(), source=__name__)
    for name, fn in _LAYER.items()
] + [
    Target(name=name, op="logic_ca", backend="numpy", precision=get_model("fp32"), fn=fn,
           description=(fn.__doc__ or "").strip(), source=__name__)
    for name, fn in _CA.items()
]
