"""NumPy float32 target for ``conv2d``: im2col, ``sgemm`` and col2im on the host.

``numpy-fp32`` takes activations in ``NHWC`` and weights in ``HWIO`` (the
TensorFlow layouts; row- or column-major) and returns ``y`` and
``grad_input`` in ``NHWC`` and ``grad_weight`` in ``HWIO``, so the layout
machinery of the runner is exercised on the CPU. Per group:

* ``y``: the im2col rows ``(N*Ho*Wo, kH*kW*C/g)`` times the weight matrix
  ``(kH*kW*C/g, O/g)``, plus the bias;
* ``grad_weight``: the im2col rows transposed times ``grad_output``;
* ``grad_input``: ``grad_output`` times the weight matrix transposed, then
  col2im: each tap's partial sum added into its input position
  (``np.add.at``), padding taps dropped;
* ``grad_bias``: ``np.add.reduce`` over every axis but the channels.

Every product and sum is float32, in orders NumPy does not promise: the
``fp32`` preset (order ``any``) bounds each output.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..oracle.precision import get_model
from ..targets.backends import get_backend
from ..targets.target import Target

__all__ = ["conv2d", "im2col_nhwc", "TARGETS"]


def _indices(params: dict[str, Any], ho: int, wo: int) -> tuple[np.ndarray, np.ndarray]:
    (kh, kw), (sh, sw), (dh, dw) = params["kernel_size"], params["stride"], params["dilation"]
    rows = (np.arange(ho) * sh)[:, None, None, None] + (np.arange(kh) * dh)[None, None, :, None]
    cols = (np.arange(wo) * sw)[None, :, None, None] + (np.arange(kw) * dw)[None, None, None, :]
    return rows, cols  # broadcast to (Ho, Wo, kH, kW)


def im2col_nhwc(x: np.ndarray, params: dict[str, Any], ho: int,
                wo: int) -> np.ndarray:
    """Patches of the padded NHWC ``x``: ``(N, Ho, Wo, kH, kW, C)``."""
    ph, pw = params["padding"]
    xpad = np.pad(x, ((0, 0), (ph, ph), (pw, pw), (0, 0)))
    rows, cols = _indices(params, ho, wo)
    return xpad[:, rows, cols, :]


def conv2d(x: np.ndarray, weight: np.ndarray, grad_output: np.ndarray,
           bias: np.ndarray | None = None, *, params: dict[str, Any]) -> dict[str, np.ndarray]:
    """Forward and gradients from ``x`` (N, H, W, C), ``weight`` (kH, kW, C/g, O)
    and ``grad_output`` (N, Ho, Wo, O); outputs NHWC / HWIO, float32."""
    n, h, w, c = x.shape
    kh, kw, cg, o = weight.shape
    _, ho, wo, _ = grad_output.shape
    groups = params["groups"]
    og = o // groups
    ph, pw = params["padding"]
    patches = im2col_nhwc(x, params, ho, wo)
    rows, cols = _indices(params, ho, wo)
    y = np.empty((n, ho, wo, o), np.float32)
    gw = np.empty((kh, kw, cg, o), np.float32)
    gpad = np.zeros((n, h + 2 * ph, w + 2 * pw, c), np.float32)
    for gi in range(groups):
        ci, oi = slice(gi * cg, (gi + 1) * cg), slice(gi * og, (gi + 1) * og)
        a = patches[..., ci].reshape(n * ho * wo, kh * kw * cg)
        wm = weight[:, :, :, oi].reshape(kh * kw * cg, og)
        gm = grad_output[..., oi].reshape(n * ho * wo, og)
        y[..., oi] = (a @ wm).reshape(n, ho, wo, og)
        gw[..., oi] = (a.T @ gm).reshape(kh, kw, cg, og)
        dcols = (gm @ wm.T).reshape(n, ho, wo, kh, kw, cg)
        where: Any = (slice(None), rows, cols, ci)
        np.add.at(gpad, where, dcols)
    out = {"y": y, "grad_weight": gw,
           "grad_input": np.ascontiguousarray(gpad[:, ph:ph + h, pw:pw + w, :])}
    if bias is not None:
        out["y"] = y + bias  # one more rounded term of each output's reduction
        out["grad_bias"] = np.add.reduce(grad_output.reshape(-1, o), axis=0)
    return out


#: the NumPy conv2d target
TARGETS: tuple[Target, ...] = (
    Target(
        name="numpy-fp32", op="conv2d", backend="numpy", precision=get_model("fp32"),
        fn=conv2d, available=get_backend("numpy").available,
        layouts={"x": ("NHWC", "NHWC:F"), "weight": ("HWIO", "HWIO:F"),
                 "grad_output": ("NHWC", "NHWC:F"), "bias": ("C", "S")},
        output_layouts={"y": "NHWC", "grad_input": "NHWC", "grad_weight": "HWIO"},
        description="NumPy float32 im2col + sgemm, col2im by np.add.at; NHWC / HWIO",
    ),
)
