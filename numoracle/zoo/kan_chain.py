"""Mutants of a chain of efficient-kan KAN layers (torch on the CPU, float32), each
claiming fp32.

Seed 001's bug as the network had it: ``compute_input_grad = layer_idx > 0``, so
the first layer's input gradient stays zero, for single-layer networks and for
the first layer of deeper ones (the layers above get theirs). ``numoracle zoo
--ops kan`` must catch it on chains of 1-3 layers with the default strategies.
"""

from __future__ import annotations

from typing import Any

from numoracle.targets.target import Target
from numoracle.targets.backends import get_backend
from numoracle.kernels.torch_kan import kan_chain_forward_backward
from numoracle.kernels.torch_targets import TorchMode, precision_flags
from numoracle.oracle.precision import get_model

_CPU = TorchMode("cpu", "fp32")


def input_grad_skipped_first_layer(**arrays: Any) -> dict[str, Any]:
    """``compute_input_grad = layer_idx > 0``: the first layer's input gradient is
    never computed and stays zero; every other output is right (seed 001)."""
    with precision_flags(_CPU):
        return kan_chain_forward_backward(arrays, skip_first_input_grad=True)


MUTANTS: dict[str, Any] = {
    "kan_chain_input_grad_skipped_first_layer": input_grad_skipped_first_layer,
}

TARGETS: list[Target] = [
    Target(name=name, op="kan_chain", backend="torch-cpu", precision=get_model("fp32"), fn=fn,
           description=(fn.__doc__ or "").strip(), source=__name__,
           available=get_backend("torch-cpu").available)
    for name, fn in MUTANTS.items()
]
