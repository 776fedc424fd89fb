"""Mutants of CPU ``conv2d`` kernels (NumPy and torch CPU float32), each claiming fp32.

Every mutant is one plausible bug; ``numoracle zoo --ops conv2d`` must catch
each with the default strategies, and the correct kernels
(``numpy-fp32`` and ``torch-cpu-fp32`` for conv2d) must pass.

The torch mutants compute their forward pass with ``F.conv2d`` (or a wrong
variant of it) and their gradients by autograd through that same forward
pass, as a kernel whose backward matches its own (wrong) forward would; the
gradient mutants replace one gradient of the correct kernel.

``stale_weights`` keeps the weights of the first call per weight shape in a
process-wide cache (one that outlives reloading this file, as a library's
descriptor cache outlives its wrapper) and reuses them. It is caught on any
single case, in any process: for ops with trained parameters every check first
calls the target with other parameter values and judges the call after that
update (:func:`numoracle.checking.check.earlier_parameters`, DESIGN §4). Its training
counterpart, a step that keeps stale weights, is named at step 2, tensor ``y``
by the stepwise training check (:mod:`numoracle.zoo.training`).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Mapping
from typing import Any, cast

import numpy as np

from numoracle.targets.target import Target
from numoracle.kernels.numpy_conv2d import TARGETS as NUMPY_TARGETS
from numoracle.kernels.numpy_conv2d import conv2d as numpy_conv2d
from numoracle.kernels.torch_conv2d import TARGETS as TORCH_TARGETS
from numoracle.kernels.torch_conv2d import conv2d as torch_conv2d
from numoracle.kernels.torch_targets import TorchMode, precision_flags
from numoracle.oracle.precision import get_model

Arrays = dict[str, Any]
_MODE = TorchMode("cpu", "fp32")
_NUMPY = NUMPY_TARGETS[0]
_TORCH = TORCH_TARGETS[0]
#: numpy-fp32's conv2d declares its layouts per input (a mapping)
_NUMPY_LAYOUTS = cast("Mapping[str, tuple[str, ...]]", _NUMPY.layouts)


# -- weight layouts read wrongly (NumPy, NHWC / HWIO kernel) --------------------------
def weight_oihw_read_as_hwio(x, weight, grad_output, bias=None, *, params) -> Arrays:
    """Handed an OIHW weight buffer, reads it as HWIO (the cuDNN layout mismatch)."""
    o, cg, kh, kw = weight.shape
    misread = np.ascontiguousarray(weight).reshape(-1).reshape(kh, kw, cg, o)
    out = numpy_conv2d(x, misread, grad_output, bias, params=params)
    # grad_weight is written back through the same misreading of the buffer
    out["grad_weight"] = np.ascontiguousarray(out["grad_weight"]).reshape(o, cg, kh, kw)
    return out


def weight_fortran_read_as_c(x, weight, grad_output, bias=None, *, params) -> Arrays:
    """Handed a column-major (O, I, kH, kW) weight, reads its buffer in C order."""
    o, cg, kh, kw = weight.shape
    buffer = np.ravel(weight, order="K")  # the memory, in the order it is stored
    misread = buffer.reshape(o, cg, kh, kw)
    out = numpy_conv2d(x, misread.transpose(2, 3, 1, 0), grad_output, bias, params=params)
    out["grad_weight"] = np.ascontiguousarray(out["grad_weight"].transpose(3, 2, 0, 1))
    return out


# -- wrong forward passes (torch CPU), gradients by autograd through them ----------------
def _autograd(forward: Callable[..., Any], x, weight, grad_output, bias) -> Arrays:
    """Run ``forward(x, w, b)`` on fresh leaves and its backward for ``grad_output``."""
    import torch  # noqa: PLC0415 - torch only when a torch mutant runs

    with precision_flags(_MODE), torch.enable_grad():
        ins = (x, weight) if bias is None else (x, weight, bias)
        leaves = [t.detach().requires_grad_(True) for t in ins]
        y = forward(leaves[0], leaves[1], leaves[2] if bias is not None else None)
        grads = torch.autograd.grad(y, leaves, grad_outputs=grad_output)
    out = {"y": y.detach(), "grad_input": grads[0], "grad_weight": grads[1]}
    if bias is not None:
        out["grad_bias"] = grads[2]
    return out


def _conv(x, w, b, params, **changes) -> Any:
    import torch.nn.functional as F  # noqa: PLC0415 - torch only when a torch mutant runs

    p = {**params, **changes}
    return F.conv2d(x, w, b, stride=p["stride"], padding=p["padding"], dilation=p["dilation"],
                    groups=p["groups"])


def kernel_flipped(x, weight, grad_output, bias=None, *, params) -> Arrays:
    """Computes a true convolution (kernel flipped) instead of cross-correlation."""
    return _autograd(lambda a, w, b: _conv(a, w.flip((2, 3)), b, params),
                     x, weight, grad_output, bias)


def padding_off_by_one(x, weight, grad_output, bias=None, *, params) -> Arrays:
    """Pads one row and column more than asked on the top and left."""
    ho, wo = grad_output.shape[2:]
    ph, pw = params["padding"]

    def forward(a, w, b):
        return _conv(a, w, b, params, padding=(ph + 1, pw + 1))[:, :, :ho, :wo]
    return _autograd(forward, x, weight, grad_output, bias)


def stride_ignored_on_last_row(x, weight, grad_output, bias=None, *, params) -> Arrays:
    """The last output row is computed at stride 1 vertically (a tail-loop bug)."""
    import torch  # noqa: PLC0415 - torch only when a torch mutant runs

    ho = grad_output.shape[2]
    sw = params["stride"][1]

    def forward(a, w, b):
        y = _conv(a, w, b, params)
        tail = _conv(a, w, b, params, stride=(1, sw))[:, :, ho - 1:ho]
        return torch.cat([y[:, :, :ho - 1], tail], dim=2)
    return _autograd(forward, x, weight, grad_output, bias)


# -- wrong gradients (torch CPU) -------------------------------------------------------
def grad_bias_wrong_axes(x, weight, grad_output, bias=None, *, params) -> Arrays:
    """grad_bias reduced over the batch and height only, keeping the first column."""
    out = torch_conv2d(x, weight, grad_output, bias, params=params, mode=_MODE)
    if bias is not None:
        out["grad_bias"] = grad_output.sum(dim=(0, 2))[:, 0].contiguous()
    return out


def grad_weight_lost_update(x, weight, grad_output, bias=None, *, params) -> Arrays:
    """A race loses the last sample's update of the last output channel's grad_weight."""
    import torch  # noqa: PLC0415 - torch only when a torch mutant runs

    out = torch_conv2d(x, weight, grad_output, bias, params=params, mode=_MODE)
    gw = out["grad_weight"].clone()
    if x.shape[0] > 1:
        partial_sum = torch_conv2d(x[:-1], weight, grad_output[:-1], bias, params=params,
                                   mode=_MODE)["grad_weight"]
        gw[-1] = partial_sum[-1]
    else:
        gw[-1] = torch.zeros_like(gw[-1])
    out["grad_weight"] = gw
    return out


#: weights of the first call per weight shape (the stale buffer), process-wide
_CACHE_HOLDER = sys.modules.setdefault("_numoracle_zoo_conv2d_cache",
                                       types.ModuleType("_numoracle_zoo_conv2d_cache"))
_WEIGHT_CACHE: dict[tuple[int, ...], Any] = _CACHE_HOLDER.__dict__.setdefault("weights", {})


def stale_weights(x, weight, grad_output, bias=None, *, params) -> Arrays:
    """Uploads the weights once per shape and reuses them on later calls (stale)."""
    cached = _WEIGHT_CACHE.setdefault(tuple(weight.shape), weight.detach().clone())
    return torch_conv2d(x, cached, grad_output, bias, params=params, mode=_MODE)


def _target(name: str, fn: Callable[..., Arrays], base: Target, **changes: Any) -> Target:
    kw: dict[str, Any] = {"backend": base.backend, "layouts": base.layouts,
                          "available": base.available,
                          "output_layouts": base.output_layouts, **changes}
    return Target(name=name, op="conv2d", precision=get_model("fp32"), fn=fn,
                  description=(fn.__doc__ or "").strip(), source=__name__, **kw)


TARGETS: list[Target] = [
    _target("weight_oihw_read_as_hwio", weight_oihw_read_as_hwio, _NUMPY,
            layouts={**_NUMPY_LAYOUTS, "weight": ("OIHW",)},
            output_layouts={"y": "NHWC", "grad_input": "NHWC"}),
    _target("weight_fortran_read_as_c", weight_fortran_read_as_c, _NUMPY,
            layouts={**_NUMPY_LAYOUTS, "weight": ("OIHW:F",)},
            output_layouts={"y": "NHWC", "grad_input": "NHWC"}),
    _target("kernel_flipped", kernel_flipped, _TORCH),
    _target("padding_off_by_one", padding_off_by_one, _TORCH),
    _target("stride_ignored_on_last_row", stride_ignored_on_last_row, _TORCH),
    _target("grad_bias_wrong_axes", grad_bias_wrong_axes, _TORCH),
    _target("grad_weight_lost_update", grad_weight_lost_update, _TORCH),
    _target("stale_weights", stale_weights, _TORCH),
]
