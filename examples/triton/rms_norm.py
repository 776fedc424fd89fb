"""RMSNorm over the last axis in Triton, forward and input gradient, fp32."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from _rows import rows_of

EPS = 1e-6


@triton.jit
def _fwd(x_ptr, w_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * n + cols, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    r = tl.rsqrt(tl.sum(x * x, axis=0) / n + eps)
    tl.store(y_ptr + row * n + cols, x * r * w, mask=mask)


@triton.jit
def _bwd(x_ptr, w_ptr, dy_ptr, dx_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * n + cols, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    dy = tl.load(dy_ptr + row * n + cols, mask=mask, other=0.0)
    r = tl.rsqrt(tl.sum(x * x, axis=0) / n + eps)
    wdy = w * dy
    c = tl.sum(wdy * x, axis=0) / n
    tl.store(dx_ptr + row * n + cols, r * wdy - x * (r * r * r) * c, mask=mask)


def reference(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def rms_norm(x, w, grad_out):
    x2, rows, n, block = rows_of(x)
    y = torch.empty_like(x2)
    _fwd[(rows,)](x2, w.contiguous(), y, n, EPS, BLOCK=block)
    dx = torch.empty_like(x2)
    _bwd[(rows,)](x2, w.contiguous(), rows_of(grad_out)[0], dx, n, EPS, BLOCK=block)
    return {"out": y.view(x.shape), "grad_x": dx.view(x.shape)}


CHECKS = {
    "rms_norm": dict(fn=rms_norm, reference=reference, inputs={"x": ("rows", "n"), "w": ("n",)},
                     dims={"rows": (1, 16), "n": (1, 1024)}, grads=("x",)),
}
