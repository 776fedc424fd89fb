"""Small cases: cases per second of the runner on tiny NumPy cases, and where the time goes.

    python benchmarks/oracle_speed_small.py [--examples 300] [--max-elements 1024] [--out FILE.json]

Runs each NumPy target of ``linear`` and ``matmul`` for ``--examples`` cases on
one core (``OPENBLAS_NUM_THREADS=1`` is set before NumPy loads), first plainly
(cases/s), then under cProfile, and splits the profiled time into: drawing the
case (the numoracle strategy, Hypothesis draws included), materialising its
inputs (``Case.inputs``: values, overlays, quantisation), handing them to the
kernel and running it (``run_kernel``), the reference and bounds (the op's
``reference``), the verdict (``judge`` less the reference), and the rest
(Hypothesis's engine: generation, mutation, database, bookkeeping). Shares are
of the profiled total; cProfile slows pure-Python code more than NumPy, so the
shares are indicative.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import cProfile
import json
import platform
import pstats
import sys
import time

#: (label, file suffix or folder, function name) of the parts measured by
#: cumulative time (the reference: the op's own ``reference`` method)
PARTS = (
    ("draw", "strategies/cases.py", "_cases"),
    ("inputs", "cases/case.py", "inputs"),
    ("kernel", "checking/check.py", "run_kernel"),
    ("judge", "checking/check.py", "judge"),
    ("reference", "oracle/ops/", "reference"),
    ("total", "running/runner.py", "run_target"),
)


def _cum(stats: pstats.Stats, suffix: str, name: str) -> float | None:
    def where(f: str) -> bool:
        f = f.replace("\\", "/")
        return f.endswith(suffix) if suffix.endswith(".py") else suffix in f

    found = [v[3] for (f, _, fn), v in stats.stats.items()  # type: ignore[attr-defined]
             if fn == name and where(f)]
    return max(found) if found else None


def profile_target(target: object, examples: int, max_elements: int) -> dict:
    from numoracle.running.runner import default_strategy, run_target  # noqa: PLC0415

    strat = default_strategy(target, max_elements=max_elements)
    run_target(target, examples=20, seed=1, strategy=strat, store=None)  # warm-up
    t0 = time.perf_counter()
    res = run_target(target, examples=examples, seed=0, strategy=strat, store=None)
    plain = time.perf_counter() - t0
    prof = cProfile.Profile()
    prof.enable()
    run_target(target, examples=examples, seed=0, strategy=strat, store=None)
    prof.disable()
    stats = pstats.Stats(prof)
    cum = {label: _cum(stats, suffix, name) for label, suffix, name in PARTS}
    total = cum.pop("total") or 1.0
    judge, ref = cum.pop("judge"), cum.get("reference")
    parts = {"draw": cum["draw"], "inputs": cum["inputs"], "kernel": cum["kernel"],
             "reference": ref,
             "verdict": None if judge is None or ref is None else judge - ref}
    known = sum(v for v in parts.values() if v is not None)
    parts["hypothesis engine and rest"] = total - known
    top = sorted(((v[2], f"{f.rsplit('/', 2)[-1]}:{fn}") for (f, _, fn), v in
                  stats.stats.items()), reverse=True)[:15]  # type: ignore[attr-defined]
    return {"target": getattr(target, "name", "?"), "op": getattr(target, "op", "?"),
            "cases": res.cases, "seconds": plain, "cases_per_s": res.cases / plain,
            "verdict": res.verdict, "profiled_s": total,
            "share": {k: (None if v is None else v / total) for k, v in parts.items()},
            "ms_per_case_profiled": {k: (None if v is None else 1e3 * v / res.cases)
                                     for k, v in parts.items()},
            "top_self_time": [{"where": w, "s": s} for s, w in top]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=300)
    ap.add_argument("--max-elements", type=int, default=1024)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    from numoracle.kernels import available_targets  # noqa: PLC0415

    res: dict = {"command": " ".join(["python"] + sys.argv), "machine": platform.platform(),
                 "cpu_cores": os.cpu_count(), "loadavg_start": os.getloadavg()[0],
                 "blas_threads": os.environ["OPENBLAS_NUM_THREADS"], "targets": []}
    for t in available_targets():
        if t.backend != "numpy" or t.op not in ("linear", "matmul"):
            continue
        row = profile_target(t, a.examples, a.max_elements)
        print(json.dumps({k: v for k, v in row.items() if k != "top_self_time"}), flush=True)
        res["targets"].append(row)
    res["loadavg_end"] = os.getloadavg()[0]
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
