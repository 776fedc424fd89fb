"""Throughput: cases per second of the runner on small shapes, and the speed-up
pytest-xdist gives a test run.

    python benchmarks/throughput.py [--out FILE.json] [--repeats 3]

Part 1 runs each CPU target for a fixed number of cases on small shapes (at
most 1024 input and output elements) in this process, one core, and reports
cases/s. Part 2 times the test suite (``pytest tests``) with ``-n 0`` and ``-n 2``,
alternating the two, and reports the median of each and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time


def cases_per_second(examples: int) -> list[dict]:
    from numoracle.kernels import available_targets
    from numoracle.runner import default_strategy, run_target

    rows = []
    for t in available_targets():
        if t.backend not in ("numpy", "torch-cpu"):
            continue
        strat = default_strategy(t, max_elements=1024)
        t0 = time.perf_counter()
        res = run_target(t, examples=examples, seed=0, strategy=strat, store=None)
        dt = time.perf_counter() - t0
        rows.append({"target": t.name, "op": t.op, "cases": res.cases, "seconds": dt,
                     "cases_per_s": res.cases / dt, "verdict": res.verdict})
        print(rows[-1], flush=True)
    return rows


def xdist_speedup(repeats: int) -> dict:
    base = [sys.executable, "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider"]
    if "benchmark" in subprocess.run([sys.executable, "-m", "pip", "list"], capture_output=True,
                                     text=True).stdout:
        base += ["-p", "no:benchmark"]
    times: dict[str, list[float]] = {"n0": [], "n2": []}
    for _ in range(repeats):
        for key, extra in (("n0", ["-n", "0"]), ("n2", ["-n", "2"])):
            t0 = time.perf_counter()
            subprocess.run(base + extra, check=True, capture_output=True)
            times[key].append(time.perf_counter() - t0)
            print(key, times[key][-1], flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"command": " ".join(base[1:]), "runs": times, "median_s": med,
            "speedup": med["n0"] / med["n2"], "cores": os.cpu_count()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--examples", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-cases", action="store_true", help="only the xdist part")
    a = ap.parse_args()
    res = {"machine": platform.platform(),
           "cases_per_second": None if a.skip_cases else cases_per_second(a.examples),
           "xdist": xdist_speedup(a.repeats)}
    print(json.dumps(res["xdist"], indent=1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
