"""Mutants of efficient-kan's KAN layer (torch on the CPU, float32), each claiming fp32.

Every mutant is one of seed 001's bugs or a close relative; ``numoracle zoo --ops kan``
must catch each with the default strategies, and the correct kernel must pass.
The functions follow the dtype of their inputs, so the same mutants can be run
under float32 central differences and float64 ``torch.autograd.gradcheck`` for
comparison.
"""

from __future__ import annotations

from typing import Any

import torch

import numoracle.kernels.torch_kan as _host
from numoracle.targets.target import Target
from numoracle.targets.backends import get_backend
from numoracle.kernels.torch_kan import b_splines, kan_forward_backward
from numoracle.kernels.torch_targets import TorchMode, precision_flags
from numoracle.oracle.precision import get_model

_CPU = TorchMode("cpu", "fp32")


def _order(grid: Any, coef: Any) -> int:
    return int(grid.shape[1] - coef.shape[2] - 1)


def _spline_input_delta(x: Any, coef: Any, spline_weight: Any, grad_output: Any,
                        d_wrong: Any, d_right: Any) -> Any:
    """How much ``grad_input`` changes when the kernel uses ``d_wrong`` for ``B'``."""
    gb = torch.einsum("bj,jic->bic", grad_output, coef * spline_weight.unsqueeze(-1))
    return (gb * (d_wrong - d_right)).sum(-1)


def _derivative(x: Any, grid: Any, order: int, factor: float | None = None) -> Any:
    """Closed-form ``B'`` (with ``factor`` in place of the order, for the mutant)."""
    prev = b_splines(x, grid, order - 1)
    k = order if factor is None else factor
    return (k * prev[:, :, :-1] / (grid[:, order:-1] - grid[:, :-(order + 1)])
            - k * prev[:, :, 1:] / (grid[:, order + 1:] - grid[:, 1:-order]))


def correct(x, grid, coef, base_weight, spline_weight, grad_output) -> dict[str, Any]:
    """efficient-kan as written: the reference mutant-free kernel."""
    with precision_flags(_CPU):
        return kan_forward_backward(x, grid, coef, base_weight, spline_weight, grad_output)


def input_grad_skipped_first_layer(x, grid, coef, base_weight, spline_weight,
                                   grad_output) -> dict[str, Any]:
    """``compute_input_grad = layer_idx > 0``: the first (here: only) layer's input
    gradient is never computed and stays zero (seed 001, fixed in v0.3.1)."""
    out = correct(x, grid, coef, base_weight, spline_weight, grad_output)
    out["grad_input"] = torch.zeros_like(out["grad_input"])
    return out


def order2_basis_derivative_wrong(x, grid, coef, base_weight, spline_weight,
                                  grad_output) -> dict[str, Any]:
    """For spline order 2 the basis derivative uses the factor ``k - 1`` instead of
    ``k`` (the seed's order-2 regression); other orders are right."""
    out = correct(x, grid, coef, base_weight, spline_weight, grad_output)
    k = _order(grid, coef)
    if k == 2:
        right, wrong = _derivative(x, grid, 2), _derivative(x, grid, 2, factor=1.0)
        out["grad_input"] = out["grad_input"] + _spline_input_delta(
            x, coef, spline_weight, grad_output, wrong, right)
    return out


def upper_edge_index_off_by_one(x, grid, coef, base_weight, spline_weight,
                                grad_output) -> dict[str, Any]:
    """At and beyond the grid's upper edge (``x >= hi``) the cell index is one too
    small: the last interior polynomial piece is extrapolated over the extension."""
    k = _order(grid, coef)
    g_int = grid.shape[1] - 2 * k - 1  # intervals of the grid proper
    edge = grid[:, k + g_int]  # hi

    def bases(xx: Any, gg: Any, order: int) -> Any:
        xe = xx.unsqueeze(-1)
        b = ((xe >= gg[:, :-1]) & (xe < gg[:, 1:])).to(xx.dtype)
        beyond = (xx >= edge) & (xx < gg[:, -1])
        moved = torch.zeros_like(b)
        moved[..., k + g_int - 1] = 1.0
        b = torch.where(beyond.unsqueeze(-1), moved, b)
        for p in range(1, order + 1):
            b = ((xe - gg[:, :-(p + 1)]) / (gg[:, p:-1] - gg[:, :-(p + 1)]) * b[:, :, :-1]
                 + (gg[:, p + 1:] - xe) / (gg[:, p + 1:] - gg[:, 1:-p]) * b[:, :, 1:])
        return b

    saved = _host.b_splines
    _host.b_splines = bases  # type: ignore[assignment]  # the mutant swaps the basis in
    try:
        return correct(x, grid, coef, base_weight, spline_weight, grad_output)
    finally:
        _host.b_splines = saved


def silu_derivative_wrong(x, grid, coef, base_weight, spline_weight,
                          grad_output) -> dict[str, Any]:
    """``silu'(x)`` taken as ``sigmoid(x)``: the ``x s (1 - s)`` term is dropped."""
    out = correct(x, grid, coef, base_weight, spline_weight, grad_output)
    s = torch.sigmoid(x)
    right = s * (1 + x * (1 - s))
    out["grad_input"] = out["grad_input"] + (s - right) * (grad_output @ base_weight)
    return out


# the stale buffers live as long as the process, like a kernel's device buffers: on a
# module the zoo does not reload (a repro reloads this file and must see them)
_STALE: dict[tuple[Any, ...], Any] = _host.__dict__.setdefault("_zoo_stale_coef_grads", {})


def coef_grad_not_reset(x, grid, coef, base_weight, spline_weight,
                        grad_output) -> dict[str, Any]:
    """The coefficient-gradient buffer (one per shape, kept between calls) is not
    zeroed before the atomics add into it: every call after the first adds the
    previous calls' gradients."""
    out = correct(x, grid, coef, base_weight, spline_weight, grad_output)
    key = (tuple(coef.shape), coef.dtype)
    buf = _STALE.get(key)
    buf = out["grad_coef"].clone() if buf is None else buf + out["grad_coef"]
    _STALE[key] = buf
    out["grad_coef"] = buf.clone()
    return out


MUTANTS: dict[str, Any] = {
    "kan_input_grad_skipped_first_layer": input_grad_skipped_first_layer,
    "kan_order2_basis_derivative_wrong": order2_basis_derivative_wrong,
    "kan_upper_edge_index_off_by_one": upper_edge_index_off_by_one,
    "kan_silu_derivative_wrong": silu_derivative_wrong,
    "kan_coef_grad_not_reset": coef_grad_not_reset,
}

TARGETS: list[Target] = [
    Target(name=name, op="kan", backend="torch-cpu", precision=get_model("fp32"), fn=fn,
           description=(fn.__doc__ or "").strip(), source=__name__,
           available=get_backend("torch-cpu").available)
    for name, fn in MUTANTS.items()
]
