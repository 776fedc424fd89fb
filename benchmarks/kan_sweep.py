"""KAN soundness sweep: many cases per correct target, orders 1-5, batch 1-128.

Usage::

    python benchmarks/kan_sweep.py OUT_DIR [CASES_PER_TARGET] [TARGET,...]
    python benchmarks/kan_sweep.py OUT_DIR 500 kan_chain:cupy-fp32,kan_chain:torch-cuda-fp32

A target is ``NAME`` (op ``kan``) or ``OP:NAME`` (``kan`` or ``kan_chain``: chains of
1-3 layers of widths 1-8, every layer's outputs judged).

Each target's cases are split over worker processes (spawned: CUDA and fork do
not mix), each running :func:`numoracle.running.runner.run_target` with its own
Hypothesis seed on cases of every value family but ``special``, up to two
special-value overlays, spline orders 1-5, grid sizes 1-16 and batches 1-128
(a quarter of the inputs on, next to, or outside the knots). Writes
``OUT_DIR/kan_sweep.json`` and ``kan_sweep.md``: per target, cases, failures,
the worst ratio per output and per spline order, and the repro of any failure.
"""

from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

DEFAULT_TARGETS = ("cupy-fp32", "torch-cuda-fp32", "torch-cuda-fp64")


def _split(spec: str) -> tuple[str, str]:
    """``OP:NAME`` or ``NAME`` (op ``kan``) -> ``(op, name)``."""
    op, _, name = spec.rpartition(":")
    return (op or "kan"), name


def _work(args: tuple[str, int, int, str]) -> dict[str, Any]:
    spec, examples, seed, store = args
    op, name = _split(spec)
    from hypothesis import strategies as st

    from numoracle.kernels import get_target
    from numoracle.running.runner import run_target
    from numoracle.strategies import FAMILY_ORDER, cases

    target = get_target(name, op)
    fams = tuple(f for f in FAMILY_ORDER if f != "special")
    small = target.precision.storage.name == "fp64"  # the float64 oracle escalates: smaller
    strat = cases(op=op, storage=target.precision.storage.name, families=fams,
                  max_overlays=2, params={"spline_order": st.integers(1, 5)},
                  max_elements=(1 << 13) if small else (1 << 16))
    orders: dict[int, int] = {}
    depths: dict[int, int] = {}
    worst_by_order: dict[int, float] = {}

    def on_case(v: Any) -> None:
        k = v.case.params["spline_order"]
        orders[k] = orders.get(k, 0) + 1
        depth = v.case.params.get("layers", 1)
        depths[depth] = depths.get(depth, 0) + 1
        worst_by_order[k] = max(worst_by_order.get(k, 0.0), v.worst_ratio)

    budget = float(os.environ.get("KAN_SWEEP_SECONDS", "0")) or None
    res = run_target(target, examples=examples, seed=seed, strategy=strat, store=store,
                     on_case=on_case, seconds=budget)
    worst: dict[str, float] = {}
    for out, _n, wd, _wp, _md, _mp, _ex in res.samples:
        worst[out] = max(worst.get(out, 0.0), wd)
    return {"target": spec, "seed": seed, "cases": res.cases, "failures": res.failures,
            "verdict": res.verdict, "worst_ratio": res.worst_ratio, "worst_by_output": worst,
            "cases_by_order": orders, "cases_by_layers": depths, "worst_by_order": worst_by_order,
            "diagnosis": res.diagnosis, "repro": res.repro, "seconds": res.seconds,
            "message": res.message}


def main(argv: list[str]) -> int:
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    per_target = int(argv[2]) if len(argv) > 2 else 2000
    names = argv[3].split(",") if len(argv) > 3 else list(DEFAULT_TARGETS)
    procs = int(os.environ.get("KAN_SWEEP_PROCS", str(max(1, (os.cpu_count() or 2) - 2))))
    chunks = max(1, procs // len(names))
    jobs = [(n, -(-per_target // chunks), 1000 + s, str(out / "repros"))
            for n in names for s in range(chunks)]
    t0 = time.time()
    import multiprocessing as mp

    with ProcessPoolExecutor(max_workers=procs, mp_context=mp.get_context("spawn")) as ex:
        rows = list(ex.map(_work, jobs))
    summary: dict[str, dict[str, Any]] = {}
    for r in rows:
        s = summary.setdefault(r["target"], {"cases": 0, "failures": 0, "worst_ratio": 0.0,
                                             "worst_by_output": {}, "cases_by_order": {},
                                             "worst_by_order": {}, "cases_by_layers": {},
                                             "failing": []})
        s["cases"] += r["cases"]
        s["failures"] += r["failures"]
        s["worst_ratio"] = max(s["worst_ratio"], r["worst_ratio"])
        for key in ("worst_by_output", "worst_by_order"):
            for k, v in r[key].items():
                s[key][str(k)] = max(s[key].get(str(k), 0.0), v)
        for key in ("cases_by_order", "cases_by_layers"):
            for k, v in r[key].items():
                s[key][str(k)] = s[key].get(str(k), 0) + v
        if r["verdict"] != "pass":
            s["failing"].append({"seed": r["seed"], "verdict": r["verdict"],
                                 "diagnosis": r["diagnosis"], "repro": r["repro"],
                                 "message": r["message"][:3000]})
    (out / "kan_sweep.json").write_text(json.dumps({"seconds": time.time() - t0,
                                                    "jobs": rows, "summary": summary},
                                                   indent=1, default=str))
    lines = ["| target | cases | failures | worst ratio | worst by output | cases by order | "
             "cases by layers |", "|---|---|---|---|---|---|---|"]
    for name, s in summary.items():
        wo = ", ".join(f"{k} {v:.3g}" for k, v in sorted(s["worst_by_output"].items()))
        co = ", ".join(f"{k}: {v}" for k, v in sorted(s["cases_by_order"].items()))
        cl = ", ".join(f"{k}: {v}" for k, v in sorted(s["cases_by_layers"].items()))
        lines.append(f"| {name} | {s['cases']} | {s['failures']} | {s['worst_ratio']:.3g} | "
                     f"{wo} | {co} | {cl} |")
    (out / "kan_sweep.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"{time.time() - t0:.0f} s")
    return 0 if all(s["failures"] == 0 for s in summary.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
