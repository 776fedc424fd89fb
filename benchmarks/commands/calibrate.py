"""``calibrate``: the sharp mode's calibration: the probabilistic bound's false-alarm rate on
correct kernels, against its failure budget alpha, by reduction length.

The sharp mode judges each element by the probabilistic bound of Higham & Mary
(2019), ``gamma~_h(lambda)`` with ``lambda = sqrt(2 ln(2h/alpha))``: an element
of a correct round-to-nearest kernel should exceed it with probability at most
``alpha`` (1e-6 by default), *if* its rounding errors behave as independent,
mean-zero random variables. This script counts, over many cases drawn directly
(shapes log-uniform in the reduction length, every value family but the exact
one, whose bound is 0), the elements whose error exceeds the probabilistic and
the deterministic bounds, per power-of-two bucket of the reduction length, and
compares them with ``alpha * elements``.

It also shows where the assumption breaks: a sequential float32 sum of one
repeated value makes correlated rounding errors (each partial sum rounds the
same way), and the probabilistic bound is exceeded by a factor that grows with n,
while the deterministic bound holds. The sharp mode must not be used there, nor
for truncating accumulation (tensor cores), which the models refuse.

    python -m benchmarks calibrate --cases 100000 --out benchmarks/results/cpu/sharp
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from benchmarks.record import meta
from numoracle.cases.case import Case
from numoracle.checking.check import check_case
from numoracle.cli._common import sharpened
from numoracle.kernels import get_target
from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import gamma, gamma_tilde

FAMILIES = ("normal", "uniform", "positive", "heavy", "cancel")


def calibrate(name: str, cases: int, max_log2: int, seed: int) -> dict:
    target = sharpened(get_target(name, "matmul"))
    assert target.precision.probabilistic
    rng = np.random.default_rng(seed)
    buckets: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    start = time.perf_counter()
    for i in range(cases):
        k = round(2 ** rng.uniform(0, max_log2))
        m, n = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        case = Case(op="matmul", params={"batch_shape": (), "m": m, "k": k, "n": n},
                    storage="fp32", family=str(rng.choice(FAMILIES)), seed=i)
        verdict = check_case(case, target, update_first=False)
        for out in verdict.outputs.values():
            b = buckets[int(math.log2(max(out.n, 1)))]
            b["cases"] += 1
            b["elements"] += math.prod(out.shape)
            b["prob_exceed"] += out.mismatched
            b["det_exceed"] += int(out.worst_ratio_det >= 1.0)
            b["worst_prob"] = max(b["worst_prob"], out.worst_ratio)
            b["worst_det"] = max(b["worst_det"], out.worst_ratio_det)
    seconds = time.perf_counter() - start
    rows = []
    alpha = target.precision.alpha
    for lg in sorted(buckets):
        b = buckets[lg]
        rows.append({"n_bucket": f"[{2**lg}, {2**(lg + 1)})", **{k: b[k] for k in (
            "cases", "elements", "prob_exceed", "det_exceed", "worst_prob", "worst_det")},
            "expected_prob_exceed": alpha * b["elements"]})
    total = {k: sum(r[k] for r in rows) for k in ("cases", "elements", "prob_exceed",
                                                   "det_exceed", "expected_prob_exceed")}
    return {"target": name, "op": "matmul", "alpha": alpha, "seconds": round(seconds, 1),
            "rows": rows, "total": total}


def correlated_limit() -> list[dict]:
    """A sequential float32 sum of one repeated value: where the assumption fails."""
    u, alpha, out = 2.0 ** -24, 1e-6, []
    for lg in (10, 14, 16, 18, 20):
        k = 1 << lg
        x = np.full(k, np.float32(0.1), dtype=np.float32)
        s = float(np.cumsum(x, dtype=np.float32)[-1])
        exact = float(np.float32(0.1)) * k
        rel = abs(s - exact) / exact
        out.append({"n": k, "err_over_S": rel,
                    "prob_ratio": rel / float(gamma_tilde(np.asarray(k - 1), u, alpha)),
                    "det_ratio": rel / float(gamma(np.asarray(k - 1), u))})
    return out


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``calibrate`` to the harness's subcommands."""
    ap = sub.add_parser("calibrate", help="the probabilistic bound's false-alarm rate on "
                                          "correct kernels, against its failure budget")
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--targets", default="numpy-fp32,torch-cpu-fp32")
    ap.add_argument("--max-log2", type=int, default=14)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/cpu/sharp"))
    ap.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Calibrate on the targets ``args`` names; writes ``calibration.json`` and ``.md``."""
    get_op("matmul")
    results = {**meta(args.argv),
               "runs": [calibrate(t, args.cases, args.max_log2, args.seed)
                        for t in args.targets.split(",")],
               "correlated_limit": correlated_limit()}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "calibration.json").write_text(json.dumps(results, indent=1))
    lines = [f"# Sharp mode calibration\n\ncommand: `{results['command']}`  \n"
             f"machine: {results['machine']}\n"]
    for run in results["runs"]:
        t = run["total"]
        lines.append(f"\n## {run['target']} {run['op']} (alpha {run['alpha']:g}, "
                     f"{run['seconds']} s)\n\nover {int(t['cases'])} outputs, "
                     f"{int(t['elements'])} elements: {int(t['prob_exceed'])} exceed the "
                     f"probabilistic bound (alpha x elements = "
                     f"{t['expected_prob_exceed']:.3g}), {int(t['det_exceed'])} outputs exceed "
                     "the deterministic one\n\n| n | outputs | elements | > prob | expected | "
                     "worst prob | worst det |\n|---|---|---|---|---|---|---|")
        for r in run["rows"]:
            lines.append(f"| {r['n_bucket']} | {int(r['cases'])} | {int(r['elements'])} | "
                         f"{int(r['prob_exceed'])} | {r['expected_prob_exceed']:.2g} | "
                         f"{r['worst_prob']:.3g} | {r['worst_det']:.3g} |")
    lines.append("\n## Where it must not be used: correlated rounding errors\n\nA sequential "
                 "float32 sum of n copies of 0.1 (each partial sum rounds the same way):\n\n"
                 "| n | err/S | err / prob bound | err / det bound |\n|---|---|---|---|")
    for r in results["correlated_limit"]:
        lines.append(f"| {r['n']} | {r['err_over_S']:.3g} | {r['prob_ratio']:.3g} | "
                     f"{r['det_ratio']:.3g} |")
    (args.out / "calibration.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


