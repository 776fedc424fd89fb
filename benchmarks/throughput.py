"""Throughput: cases per second of the runner on small shapes, and the speed-up
pytest-xdist gives a test run.

    python benchmarks/throughput.py [--out FILE.json] [--repeats 3]

Part 1 runs each CPU target for a fixed number of cases on small shapes (at
most 1024 input and output elements) in this process, one core, and reports
cases/s. Part 2 writes a user's test file of numoracle checks
(``numoracle.validate``) and times it with ``-n 0`` and ``-n 2``, alternating
the two, and reports the median of each and their ratio.
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
    from numoracle.running.runner import default_strategy, run_target

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


SUITE = """
import numpy as np
import numoracle

def linear(x, weight, grad_output, bias=None):
    out = {"y": x @ weight.T, "grad_input": grad_output @ weight, "grad_weight": grad_output.T @ x}
    if bias is not None:
        out["y"] += bias
        out["grad_bias"] = np.add.reduce(grad_output, axis=0)
    return out

def matmul(a, b):
    return {"out": a @ b}

"""


def write_suite(folder: str, tests: int, examples: int) -> str:
    """A user's test file: ``tests`` numoracle checks of ``examples`` cases each."""
    lines = [SUITE]
    for i in range(tests):
        op = ("linear", "matmul")[i % 2]
        lines.append(f"test_{op}_{i} = numoracle.validate(op={op!r}, examples={examples}, "
                     f"seed={i}, max_elements=4096)({op})")
    path = os.path.join(folder, "test_user_suite.py")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def xdist_speedup(repeats: int, tests: int, examples: int) -> dict:
    import tempfile

    folder = tempfile.mkdtemp()
    path = write_suite(folder, tests, examples)
    base = [sys.executable, "-m", "pytest", path, "-q", "-p", "no:cacheprovider"]
    if "benchmark" in subprocess.run([sys.executable, "-m", "pip", "list"], capture_output=True,
                                     text=True).stdout:
        base += ["-p", "no:benchmark"]
    times: dict[str, list[float]] = {"n0": [], "n2": []}
    for _ in range(repeats):
        for key, extra in (("n0", ["-n", "0"]), ("n2", ["-n", "2"])):
            t0 = time.perf_counter()
            subprocess.run(base + extra, check=True, capture_output=True, cwd=folder)
            times[key].append(time.perf_counter() - t0)
            print(key, times[key][-1], flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"suite": f"{tests} numoracle.validate checks of {examples} cases each "
                     "(NumPy linear and matmul kernels, at most 4096 elements)",
            "command": "pytest test_user_suite.py -n 0 | -n 2", "runs": times, "median_s": med,
            "speedup": med["n0"] / med["n2"], "cores": os.cpu_count()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--examples", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-cases", action="store_true", help="only the xdist part")
    ap.add_argument("--tests", type=int, default=16, help="checks in the xdist suite")
    a = ap.parse_args()
    res = {"machine": platform.platform(),
           "cases_per_second": None if a.skip_cases else cases_per_second(a.examples),
           "xdist": xdist_speedup(a.repeats, a.tests, a.examples)}
    print(json.dumps(res["xdist"], indent=1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
