"""torch CPU bfloat16 linear: a NaN or Inf input turns finite results into NaN.

    python benchmarks/results/findings/torch-cpu-bf16-linear-nan-spreads/show.py

1. The stored case (arrays.npz): torch's autograd linear backward in bfloat16 on
   the CPU, x handed in column-major order as the case did, against the float64
   products of the same bfloat16 values: elements of grad_weight whose exact value
   is finite (every term finite, no 0 * inf) come back NaN.
2. Random trials (seed 1), 60 per pair of layouts of x and weight, two of every
   three with up to two non-finite entries in x and grad_output: in how many do
   y, grad_input or grad_weight hold a NaN where the float64 result is finite.
"""

from pathlib import Path

import numpy as np
import torch


def _lay(a: np.ndarray, lay: str) -> torch.Tensor:
    t = torch.tensor(a).bfloat16()
    if lay == "F":
        return t.T.contiguous().T
    if lay == "S":  # every other column of a wider buffer
        big = torch.zeros(a.shape[0], 2 * a.shape[1], dtype=torch.bfloat16)
        big[:, ::2] = t
        return big[:, ::2]
    return t


def backward(x: np.ndarray, w: np.ndarray, g: np.ndarray, lx: str, lw: str) -> dict:
    xt, wt = _lay(x, lx).requires_grad_(True), _lay(w, lw).requires_grad_(True)
    gt = torch.tensor(g).bfloat16()
    y = torch.nn.functional.linear(xt, wt)
    y.backward(gt)
    got = {"y": y.detach(), "grad_input": xt.grad, "grad_weight": wt.grad}
    X, W, G = (torch.tensor(a).bfloat16().double() for a in (x, w, g))
    exact = {"y": X @ W.T, "grad_input": G @ W, "grad_weight": G.T @ X}
    return {k: int((got[k].float().isnan() & ~exact[k].isnan()).sum()) for k in got}


here = Path(__file__).resolve().parent
a = np.load(here / "arrays.npz")
x, w, g = a["input_x"], a["input_weight"], a["input_grad_output"]
print("torch", torch.__version__)
print("stored case, x and weight column-major: NaN where finite:", backward(x, w, g, "F", "F"))
print("stored case, row-major:                  NaN where finite:", backward(x, w, g, "C", "C"))
rng = np.random.default_rng(1)
print("random trials with NaN where finite, per (x layout, weight layout), of 60:")
for lx in "CFS":
    for lw in "CFS":
        hits = 0
        for _ in range(60):
            b, i, o = (int(v) for v in rng.integers(2, 40, 3))
            xs = rng.standard_normal((b, i)).astype(np.float32)
            ws = rng.standard_normal((o, i)).astype(np.float32)
            gs = rng.standard_normal((b, o)).astype(np.float32)
            for arr in (xs, gs):
                for _ in range(int(rng.integers(0, 3))):
                    arr[rng.integers(0, arr.shape[0]), rng.integers(0, arr.shape[1])] = \
                        rng.choice([np.inf, -np.inf, np.nan])
            hits += any(backward(xs, ws, gs, lx, lw).values())
        print(f"  {lx} {lw}: {hits}")
