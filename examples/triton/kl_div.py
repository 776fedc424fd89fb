"""Row-summed KL divergence with log-probability inputs in Triton, forward and
gradient, fp32: ``sum_j exp(p_j) (p_j - q_j)``, as
``F.kl_div(q, p, reduction="none", log_target=True).sum(-1)``."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from _rows import rows_of


@triton.jit
def _fwd_bwd(q_ptr, p_ptr, g_ptr, out_ptr, dq_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    q = tl.load(q_ptr + row * n + cols, mask=mask, other=0.0)
    p = tl.load(p_ptr + row * n + cols, mask=mask, other=0.0)
    ep = tl.where(mask, tl.exp(p), 0.0)
    tl.store(out_ptr + row, tl.sum(ep * (p - q), axis=0))
    g = tl.load(g_ptr + row)
    tl.store(dq_ptr + row * n + cols, -ep * g, mask=mask)


def reference(q, p):
    return torch.nn.functional.kl_div(q, p, reduction="none", log_target=True).sum(-1)


def kl_div(q, p, grad_out):
    q2, rows, n, block = rows_of(q)
    out = torch.empty(rows, device=q.device, dtype=q.dtype)
    dq = torch.empty_like(q2)
    _fwd_bwd[(rows,)](q2, rows_of(p)[0], grad_out.contiguous(), out, dq, n, BLOCK=block)
    return {"out": out, "grad_q": dq}


CHECKS = {
    "kl_div": dict(fn=kl_div, reference=reference, inputs={"q": ("rows", "n"), "p": ("rows", "n")},
                   dims={"rows": (1, 16), "n": (1, 1024)}, grads=("q",)),
}
