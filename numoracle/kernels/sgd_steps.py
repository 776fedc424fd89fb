"""Correct SGD steps of :class:`~numoracle.trajectory.cnn.TinyCNN` (conv2d -> ReLU -> MSE),
the targets of :func:`~numoracle.trajectory.check_trajectory`.

Each factory takes the step's fixed data (``x``, ``target``, ``lr`` and the
convolution's ``stride`` / ``padding`` / ``dilation`` / ``groups``) and returns
``step(weight, bias) -> {"loss", "y", "grad_weight", "grad_bias", "weight",
"bias"}`` on float32 NumPy arrays (``bias`` None for none):

* :func:`torch_sgd_step`: torch CPU float32, ``F.conv2d``, ``F.relu``,
  ``F.mse_loss``, gradients by :func:`torch.autograd.grad`, the update by hand
  (``w - lr * grad``);
* :func:`numpy_sgd_step`: NumPy float32 through the ``numpy-fp32`` conv2d
  kernel (im2col + sgemm), the loss and its gradient written out;
* :func:`torch_cuda_sgd_step`: the torch step on a CUDA device, the
  convolutions on cuDNN with its flags pinned as the ``torch-cuda-*`` conv2d
  targets pin them (:func:`~numoracle.kernels.torch_conv2d_cuda.cudnn_flags`);
* :func:`cupy_sgd_step`: the CuPy conv2d kernels of
  :mod:`numoracle.kernels.cupy_conv2d` (forward, atomic or two-phase
  grad_weight, grad_bias), the loss and its gradient in CuPy float32.

What each claims (:func:`step_model`): ``fp32`` for the CPU steps and for
cuDNN with TF32 off; with TF32 on, what the cuDNN TF32 conv2d targets claim:
the ``tf32`` preset with truncating accumulation (inputs rounded to TF32 in an
undocumented way, or not at all; every elementwise rounding then bounded with
the truncation unit ``2^-23``, which covers the round-to-nearest ones torch
makes); for CuPy ``fp32`` with subnormal inputs possibly flushed (CuPy
compiles its kernels with ``-ftz=true``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..errors import InvalidArgument
from ..oracle.ops.conv2d import Conv2d
from ..oracle.precision import PrecisionModel, get_model
from ..targets.backends import get_backend
from .numpy_conv2d import conv2d as numpy_conv2d
from .torch_conv2d_cuda import cudnn_claim
from .torch_targets import TorchMode, precision_flags

__all__ = ["torch_sgd_step", "numpy_sgd_step", "torch_cuda_sgd_step", "cupy_sgd_step",
           "conv_params", "step_model", "STEPS"]

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


def _conv_keywords(conv: Mapping[str, Any] | None) -> dict[str, Any]:
    c = {"stride": 1, "padding": 0, "dilation": 1, "groups": 1, **(conv or {})}
    unknown = set(c) - {"stride", "padding", "dilation", "groups"}
    if unknown:
        raise InvalidArgument(f"conv={dict(conv or {})!r}: unknown keys {sorted(unknown)}; "
                              "give stride, padding, dilation or groups")
    return c


def torch_cuda_sgd_step(x: np.ndarray, target: np.ndarray, lr: float,
                        conv: Mapping[str, Any] | None = None, *, tf32: bool = False,
                        deterministic: bool = False, channels_last: bool = False) -> Step:
    """One SGD step in torch CUDA float32: ``F.conv2d`` on cuDNN, autograd backward.

    ``tf32`` lets cuDNN round the convolutions' fp32 inputs to TF32 (claim
    ``step_model("torch-cuda-tf32")``, not fp32); ``deterministic`` sets
    ``cudnn.deterministic``; ``channels_last`` hands cuDNN NHWC memory. The
    flags are pinned for each call and restored after it. The step returns
    CUDA tensors (the check copies them to the host).
    """
    import torch
    import torch.nn.functional as F

    from .torch_conv2d_cuda import _NO_CONTEXT_WARNING, CudnnMode, cudnn_flags

    if not torch.cuda.is_available():
        raise InvalidArgument("torch_cuda_sgd_step needs a CUDA device; torch sees none "
                              "(use torch_sgd_step on the CPU)")
    mode = CudnnMode(tf32=tf32, deterministic=deterministic, channels_last=channels_last)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    dev = torch.device("cuda")
    xt = torch.from_numpy(np.asarray(x, dtype=np.float32)).to(dev).to(memory_format=fmt)
    tt = torch.from_numpy(np.asarray(target, dtype=np.float32)).to(dev)
    c = _conv_keywords(conv)

    def step(weight: np.ndarray, bias: np.ndarray | None) -> dict[str, Any]:
        with cudnn_flags(mode), torch.enable_grad(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", _NO_CONTEXT_WARNING, UserWarning)
            w = torch.from_numpy(np.asarray(weight, dtype=np.float32)).to(dev) \
                .to(memory_format=fmt).requires_grad_(True)
            b = None if bias is None else torch.from_numpy(
                np.asarray(bias, dtype=np.float32)).to(dev).requires_grad_(True)
            y = F.conv2d(xt, w, b, stride=c["stride"], padding=c["padding"],
                         dilation=c["dilation"], groups=c["groups"])
            loss = F.mse_loss(F.relu(y), tt)
            leaves = [w] if b is None else [w, b]
            grads = torch.autograd.grad(loss, leaves)
            with torch.no_grad():
                out = {"y": y.detach(), "loss": loss.detach(), "grad_weight": grads[0],
                       "weight": w.detach() - lr * grads[0]}
                if b is not None:
                    out["grad_bias"] = grads[1]
                    out["bias"] = b.detach() - lr * grads[1]
        return out
    return step


def cupy_sgd_step(x: np.ndarray, target: np.ndarray, lr: float,
                  conv: Mapping[str, Any] | None = None, *, layout: str = "NCHW",
                  deterministic: bool = False) -> Step:
    """One SGD step in CuPy float32 on the hand-written conv2d kernels.

    ``y`` by ``conv2d_fwd_f32``, ``grad_weight`` by the atomicAdd kernel (or,
    with ``deterministic``, the two-phase fixed-order one), ``grad_bias`` by
    ``conv2d_bgrad_f32``, in ``layout`` (``"NCHW"`` / OIHW or ``"NHWC"`` /
    OHWI); ``relu``, ``d = relu(y) - t``, ``loss = sum(d * d) / m`` and
    ``grad_y = (2 d) / m * (y > 0)`` in CuPy float32; the update
    ``w - lr * grad`` with ``lr`` rounded to float32. Claims
    ``step_model("cupy")``. Returns CuPy arrays in the canonical orders.
    """
    reason = _cupy_reason()
    if reason is not None:
        raise InvalidArgument(f"cupy_sgd_step needs a usable CuPy GPU: {reason}")
    import cupy

    from . import cupy_conv2d as kern
    if layout not in kern.CONV_LAYOUTS:
        raise InvalidArgument(f"{layout=} is unknown; use one of {sorted(kern.CONV_LAYOUTS)}")
    nhwc = layout == "NHWC"
    c = _conv_keywords(conv)
    x32 = np.asarray(x, dtype=np.float32)
    t32 = np.asarray(target, dtype=np.float32)
    xd = cupy.asarray(np.ascontiguousarray(x32.transpose(0, 2, 3, 1) if nhwc else x32))
    td = cupy.asarray(t32)
    lr32 = np.float32(lr)
    zero, two = np.float32(0), np.float32(2)

    def to_layout(a: Any) -> Any:  # NCHW / OIHW -> the kernels' order
        return cupy.ascontiguousarray(a.transpose(0, 2, 3, 1) if nhwc else a)

    def from_layout(a: Any) -> Any:  # the kernels' order -> NCHW / OIHW
        return cupy.ascontiguousarray(a.transpose(0, 3, 1, 2) if nhwc else a)

    def step(weight: np.ndarray, bias: np.ndarray | None) -> dict[str, Any]:
        w32 = cupy.asarray(np.asarray(weight, dtype=np.float32))
        b32 = None if bias is None else cupy.asarray(np.asarray(bias, dtype=np.float32))
        wk = to_layout(w32)
        geom = kern.ConvGeometry.from_shapes(tuple(xd.shape), tuple(wk.shape), layout=layout,
                                             **c)
        y = from_layout(kern.forward(geom, xd, wk, b32))
        d = cupy.maximum(y, zero) - td
        m = np.float32(d.size)
        loss = cupy.sum(d * d, dtype=np.float32) / m
        grad_y = (two * d) / m * (y > zero)
        g = to_layout(grad_y)
        gw = from_layout(kern.grad_weight(geom, xd, g, deterministic=deterministic))
        out = {"y": y, "loss": loss, "grad_weight": gw, "weight": w32 - lr32 * gw}
        if b32 is not None:
            gb = kern.grad_bias(geom, g)
            out["grad_bias"] = gb
            out["bias"] = b32 - lr32 * gb
        return out
    return step


def _cupy_reason() -> str | None:
    return get_backend("cupy").available()


#: step name -> its factory (``factory(x, target, lr, conv) -> step``)
STEPS: dict[str, Callable[..., Step]] = {
    "torch-cpu": torch_sgd_step,
    "numpy": numpy_sgd_step,
    "torch-cuda": torch_cuda_sgd_step,
    "torch-cuda-tf32": lambda x, target, lr, conv=None: torch_cuda_sgd_step(
        x, target, lr, conv, tf32=True),
    "cupy": cupy_sgd_step,
    "cupy-det": lambda x, target, lr, conv=None: cupy_sgd_step(
        x, target, lr, conv, deterministic=True),
}


def step_model(name: str) -> PrecisionModel:
    """The precision model the step :data:`STEPS` ``[name]`` claims.

    Examples
    --------
    >>> step_model("torch-cuda").name, step_model("torch-cuda-tf32").accumulate_rounding
    ('fp32', 'rz')
    """
    if name not in STEPS:
        raise InvalidArgument(f"step {name!r} is unknown; use one of {sorted(STEPS)}")
    if name in ("torch-cuda", "torch-cuda-tf32"):  # as the cuDNN conv2d targets claim
        return cudnn_claim(tf32=name.endswith("tf32"))
    if name.startswith("cupy"):
        return get_model("fp32", flush_subnormal_inputs=True)  # -ftz=true
    return get_model("fp32")
