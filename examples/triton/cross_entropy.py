"""Per-row cross-entropy in Triton, forward and logits gradient, fp32:
``logsumexp(x) - x[label]``, the gradient ``(softmax(x) - onehot) * dloss``."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from _rows import rows_of


@triton.jit
def _fwd_bwd(x_ptr, lab_ptr, dl_ptr, loss_ptr, dx_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * n + cols, mask=mask, other=-float("inf"))
    lab = tl.load(lab_ptr + row)
    m = tl.max(x, axis=0)
    e = tl.where(mask, tl.exp(x - m), 0.0)
    s = tl.sum(e, axis=0)
    x_lab = tl.sum(tl.where(cols == lab, x, 0.0), axis=0)
    tl.store(loss_ptr + row, m + tl.log(s) - x_lab)
    dl = tl.load(dl_ptr + row)
    p = e / s
    tl.store(dx_ptr + row * n + cols, (p - tl.where(cols == lab, 1.0, 0.0)) * dl, mask=mask)


def reference(x, labels):
    return torch.nn.functional.cross_entropy(x, labels, reduction="none")


def cross_entropy(x, labels, grad_out):
    x2, rows, n, block = rows_of(x)
    loss = torch.empty(rows, device=x.device, dtype=x.dtype)
    dx = torch.empty_like(x2)
    _fwd_bwd[(rows,)](x2, labels.contiguous(), grad_out.contiguous(), loss, dx, n, BLOCK=block)
    return {"out": loss, "grad_x": dx}


CHECKS = {
    "cross_entropy": dict(fn=cross_entropy, reference=reference,
                          inputs={"x": ("rows", "n"), "labels": ("rows",)},
                          integers={"labels": (0, "n")}, dims={"rows": (1, 16), "n": (1, 1024)},
                          grads=("x",)),
}
