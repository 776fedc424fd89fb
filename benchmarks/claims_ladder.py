"""The traced diagnosis on kernels that each do one thing a claim may not name:
what its headline says.

Every kernel here is a torch CPU kernel judged against a traced reference under
the fp32 claim; each departs from fp32 arithmetic in exactly one way (a wider
class of arithmetic, or a bug). The table gives, per kernel, the verdict and the
diagnosis headline::

    PYTHONPATH=$PWD python -m benchmarks.claims_ladder [--examples N] [--out FILE.md]

It runs against any numoracle that has ``check_kernel(reference=...)``, so the
same command on an older checkout gives the table before.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.traced.formulations import approximate
from numoracle import check_kernel
from numoracle.errors import KernelMismatch

ROWS = {"x": ("rows", "n")}
DIMS = {"rows": (1, 8), "n": (2, 512)}


def softmax(x):
    return torch.softmax(x, dim=-1)


def divide(x, y):
    return x / y


def row_sum(x):
    return x.sum(dim=-1)


def linear(x, w):
    return x @ w.T


def swiglu(a, b):
    return torch.nn.functional.silu(a) * b


def layer_norm(x, w, b):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)


def _f32(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))


def _seq_sum(e: np.ndarray, dtype: Any) -> np.ndarray:
    """Row sums accumulated one term at a time in ``dtype``."""
    acc = np.zeros(e.shape[:-1], dtype=dtype)
    for j in range(e.shape[-1]):
        acc = (acc + e[..., j].astype(dtype)).astype(dtype)
    return acc.astype(np.float32)


def _bf16(a: np.ndarray) -> np.ndarray:
    return torch.from_numpy(np.asarray(a, dtype=np.float32)).to(torch.bfloat16).float().numpy()


# -- the kernels: fp32 softmax and sums, each departing in one way -------------------

def approx_division(x, y):
    """A quotient 1 ulp beyond correct rounding (``div.full.f32`` allows 2)."""
    xn, yn = x.numpy(), y.numpy()
    q = (xn / yn).astype(np.float32)
    up = q.astype(np.float64) >= xn.astype(np.float64) / yn.astype(np.float64)
    off = np.where(up, np.nextafter(q, np.float32(np.inf)), np.nextafter(q, np.float32(-np.inf)))
    return {"out": _f32(np.where((q == 0) | ~np.isfinite(q), q, off))}


def approx_swiglu(a, b):
    """SwiGLU as a Triton kernel computes it, ``a / (1 + exp(-a)) * b`` through
    ``1 / (1 + exp(-a))``, its exponential and division off by Triton's ulps
    (``ex2.approx``: ``2 + 1.173 |x|``; ``div.full.f32``: 2), each on a random side."""
    an, bn = a.numpy(), b.numpy()
    rng = np.random.default_rng(0)
    with np.errstate(over="ignore", invalid="ignore"):
        e = approximate(np.exp(-an.astype(np.float64)), 2.0 + 1.173 * np.abs(an), rng)
        sig = approximate(1.0 / (np.float32(1.0) + e).astype(np.float64), 2.0, rng)
        return {"out": _f32((an * sig) * bn)}


def one_pass_variance(x, w, b):
    """Layer norm whose variance is ``E[x²] - E[x]²`` (one pass; it cancels)."""
    mean = x.mean(-1, keepdim=True)
    var = (x * x).mean(-1, keepdim=True) - mean * mean
    return {"out": (x - mean) * torch.rsqrt(var + 1e-5) * w + b}


def fp16_accumulation(x):
    """Softmax whose denominator is summed in fp16."""
    xn = x.numpy()
    e = np.exp(xn - xn.max(-1, keepdims=True))
    return {"out": _f32(e / _seq_sum(e, np.float16)[..., None])}


def bf16_summed_softmax(x):
    """Softmax whose denominator is summed in bf16, its outputs fp32 (not bf16 values)."""
    e = torch.exp(x - x.amax(-1, keepdim=True))
    acc = torch.zeros(x.shape[:-1], dtype=torch.bfloat16)
    for j in range(x.shape[-1]):
        acc = acc + e[..., j].to(torch.bfloat16)
    return {"out": e / acc.float()[..., None]}


def bf16_accumulation(x):
    """Row sum accumulated in bf16."""
    xn = x.numpy()
    acc = torch.zeros(xn.shape[:-1], dtype=torch.bfloat16)
    for j in range(xn.shape[-1]):
        acc = acc + torch.from_numpy(np.ascontiguousarray(xn[..., j])).to(torch.bfloat16)
    return {"out": acc.float()}


def bf16_rounding_per_op(x):
    """Softmax with every intermediate rounded to bf16 (fp32 arrays)."""
    xn = x.numpy()
    d = _bf16(xn - xn.max(-1, keepdims=True))
    e = _bf16(np.exp(d))
    s = _bf16(e.sum(-1, keepdims=True, dtype=np.float32))
    return {"out": _f32(_bf16(e / s))}


def bf16_stored_softmax(x):
    """Softmax computed in fp32 and stored in bf16 (as eager torch's bf16 softmax
    rounds its one op), handed back as fp32 arrays."""
    return {"out": torch.softmax(x, dim=-1).to(torch.bfloat16).float()}


def tf32_inputs(x, w):
    """A product whose inputs are rounded to tf32 (10 explicit bits) first."""
    def tf32(a: np.ndarray) -> np.ndarray:
        b = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
        b = ((b + 0xFFF + ((b >> 13) & 1)) & ~np.uint64(0x1FFF)).astype(np.uint32)
        return b.view(np.float32)
    return {"out": _f32(tf32(x.numpy()).astype(np.float64) @ tf32(w.numpy()).astype(np.float64).T)}


_NOISE = np.random.default_rng()
#: calls of :func:`nondeterministic` in this process
_RACES = [0]


def nondeterministic(x):
    """Row sum with a different error on every call (a racing reduction): of random
    size, its sign alternating from call to call, so that any two consecutive runs of
    one case differ by more than either misses the exact sum."""
    _RACES[0] += 1
    sign = 1.0 if _RACES[0] % 2 else -1.0
    s = x.numpy().astype(np.float64).sum(-1)
    size = _NOISE.uniform(0.5, 1.0, size=s.shape) * 1e-3 * (np.abs(x.numpy()).sum(-1) + 1)
    return {"out": _f32(s + sign * size)}


def dropped_term(x):
    """Softmax that leaves the last element out of the denominator: a logic bug."""
    xn = x.numpy()
    e = np.exp(xn - xn.max(-1, keepdims=True))
    return {"out": _f32(e / e[..., :-1].sum(-1, keepdims=True))}


KERNELS: list[tuple[str, Callable[..., Any], Callable[..., Any], dict[str, Any]]] = [
    ("approximate division", approx_division, divide, {"x": ("rows", "n"), "y": ("rows", "n")}),
    ("approximate exp and division (a Triton SwiGLU)", approx_swiglu, swiglu,
     {"a": ("rows", "n"), "b": ("rows", "n")}),
    ("a one-pass variance (a layer norm)", one_pass_variance, layer_norm,
     {"x": ("rows", "n"), "w": ("n",), "b": ("n",)}),
    ("fp16 accumulation", fp16_accumulation, softmax, ROWS),
    ("bf16 accumulation", bf16_accumulation, row_sum, ROWS),
    ("bf16 accumulation (a softmax's denominator, fp32 outputs)", bf16_summed_softmax, softmax,
     ROWS),
    ("an extra bf16 rounding per op", bf16_rounding_per_op, softmax, ROWS),
    ("bf16 storage (a softmax rounded once)", bf16_stored_softmax, softmax, ROWS),
    ("tf32 inputs", tf32_inputs, linear, {"x": ("rows", "n"), "w": ("o", "n")}),
    ("nondeterminism", nondeterministic, row_sum, ROWS),
    ("a logic bug (a dropped term)", dropped_term, softmax, ROWS),
]


def run(examples: int) -> list[tuple[str, str, str, float]]:
    rows = []
    for i, (what, kernel, reference, inputs) in enumerate(KERNELS):
        dims = dict(DIMS, o=(1, 8))
        dims = {k: v for k, v in dims.items() if any(k in s for s in inputs.values())}
        t0 = time.perf_counter()
        try:
            r = check_kernel(kernel, reference=reference, inputs=inputs, dims=dims,
                             op=f"ladder_{i}", precision="fp32", backend="torch-cpu",
                             examples=examples, store=None)
            verdict, headline = "pass", f"{r.cases} cases within fp32"
        except KernelMismatch as exc:
            v = exc.verdict
            verdict = "FAIL"
            headline = str(getattr(v, "diagnosis", exc)).split("\n")[0]
        rows.append((what, verdict, headline, time.perf_counter() - t0))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=30)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rows = run(args.examples)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    lines = [f"commit {commit}, {platform.machine()}, {args.examples} cases per kernel", "",
             "| kernel does | verdict | diagnosis headline | s |", "|---|---|---|---|"]
    for what, verdict, headline, secs in rows:
        lines.append(f"| {what} | {verdict} | {headline.replace('|', '/')} | {secs:.1f} |")
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
