"""``--sharp`` on long fp32 dot products of nonzero-mean data: the worst ratio
err / bound under Higham & Mary's probabilistic bound as it was (``gamma~_h``
for every order) and as the oracle now applies it (``gamma~_h`` only where the
order's running sums cannot stagnate, :func:`numoracle.oracle.precision.gamma_prob`;
the deterministic ``gamma_h`` elsewhere), through the oracle's own contraction
(:func:`numoracle.oracle.tracked.matmul`).

The kernels: a sequential fp32 dot (products rounded to fp32, summed left to
right: ``np.add.accumulate``) and a pairwise one (halves added level by level),
on U[0,1) and N(0,1) data::

    PYTHONPATH=$PWD python -m benchmarks.sharp_stagnation [--reps 3] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import time
from pathlib import Path

import numpy as np

from numoracle.oracle.precision import gamma_tilde, get_model
from numoracle.oracle.tracked import exact, matmul

SIZES = (20, 21, 22, 23)


def sequential(p: np.ndarray) -> float:
    return float(np.add.accumulate(p, dtype=np.float32)[-1])


def pairwise(p: np.ndarray) -> float:
    s = p.astype(np.float32)
    while s.size > 1:
        s = (s[0::2] + s[1::2]).astype(np.float32)
    return float(s[0])


def ratios(k: int, dist: str, order: str, rng: np.random.Generator) -> tuple[float, float]:
    """(old, new) ratio err / probabilistic bound of one dot of ``2^k`` terms."""
    n = 2**k
    draw = (lambda: rng.random(n, dtype=np.float32)) if dist == "U[0,1)" else (
        lambda: rng.standard_normal(n, dtype=np.float32))
    x, y = draw(), draw()
    got = (sequential if order == "sequential" else pairwise)((x * y).astype(np.float32))
    model = get_model("fp32", order=order, probabilistic=True)
    t = matmul(exact(x.astype(np.float64)[None, :]), exact(y.astype(np.float64)[:, None]), model)
    exact_value = float(t.value[0, 0]) + (0.0 if t.lo is None else float(t.lo[0, 0]))
    err = abs(got - exact_value)
    new_bound = float(t.bound(True)[0, 0])
    # as it was: gamma~ of the same height for every order, on S = sum |x y|
    S = float(np.abs(x.astype(np.float64) * y).sum())
    h = int(model.order.height(n)) + 1
    old_bound = float(gamma_tilde(np.asarray(h), model.acc_unit(), model.alpha)) * S
    return err / old_bound, err / new_bound


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rng = np.random.default_rng(2026)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    lines = [f"commit {commit}, {platform.machine()}, {args.reps} dots per row (worst shown)",
             "", "| n | order | data | worst ratio, probabilistic bound before | "
             "worst ratio, probabilistic bound now | s |", "|---|---|---|---|---|---|"]
    for k in SIZES:
        for order in ("sequential", "pairwise"):
            for dist in ("U[0,1)", "N(0,1)"):
                t0 = time.perf_counter()
                worst = [max(r) for r in zip(*(ratios(k, dist, order, rng)
                                               for _ in range(args.reps)), strict=True)]
                lines.append(f"| 2^{k} | {order} | {dist} | {worst[0]:.3g} | {worst[1]:.3g} "
                             f"| {time.perf_counter() - t0:.1f} |")
                print(lines[-1], flush=True)
    text = "\n".join(lines)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
