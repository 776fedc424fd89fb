"""SwiGLU ``silu(a) * b`` in Triton, forward and both gradients, fp32, elementwise.

``sigmoid(a) = 1 / (1 + exp(-a))`` with ``tl.exp`` (``ex2.approx``) and ``/``
(``div.full.f32``)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _fwd_bwd(a_ptr, b_ptr, g_ptr, y_ptr, da_ptr, db_ptr, numel, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    a = tl.load(a_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    g = tl.load(g_ptr + offs, mask=mask, other=0.0)
    sig = 1.0 / (1.0 + tl.exp(-a))
    silu = a * sig
    tl.store(y_ptr + offs, silu * b, mask=mask)
    tl.store(db_ptr + offs, g * silu, mask=mask)
    tl.store(da_ptr + offs, g * b * (sig * (1.0 + a * (1.0 - sig))), mask=mask)


def reference(a, b):
    return torch.nn.functional.silu(a) * b


def swiglu(a, b, grad_out):
    a, b, g = a.contiguous(), b.contiguous(), grad_out.contiguous()
    y, da, db = torch.empty_like(a), torch.empty_like(a), torch.empty_like(a)
    numel = a.numel()
    _fwd_bwd[(triton.cdiv(numel, BLOCK),)](a, b, g, y, da, db, numel, BLOCK=BLOCK)
    return {"out": y, "grad_a": da, "grad_b": db}


CHECKS = {
    "swiglu": dict(fn=swiglu, reference=reference, inputs={"a": ("rows", "n"), "b": ("rows", "n")},
                   dims={"rows": (1, 16), "n": (1, 1024)}, grads=("a", "b")),
}
