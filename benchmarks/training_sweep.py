"""Stepwise training check over random problems: correct SGD steps (torch CPU and
NumPy) must pass every step; each mutant must be named at its expected step and tensor.

    python benchmarks/training_sweep.py [--problems 300] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from numoracle.kernels.sgd_steps import numpy_sgd_step, torch_sgd_step
from numoracle.oracle.ops.conv2d import Conv2d
from numoracle.repro import _load_module
from numoracle.training import check_trajectory

ZOO = _load_module(str(Path(__file__).resolve().parent / "zoo" / "training.py"))


def problem(rng: np.random.Generator) -> dict:
    n, c, o = (int(rng.integers(lo, hi)) for lo, hi in ((1, 5), (1, 4), (1, 4)))
    h, w, k = int(rng.integers(3, 9)), int(rng.integers(3, 9)), int(rng.integers(1, 4))
    conv = {"padding": int(rng.integers(0, 2)), "stride": int(rng.integers(1, 3))}
    bias = bool(rng.integers(0, 2))
    params = Conv2d().validate({"batch": n, "in_channels": c, "out_channels": o, "height": h,
                                "width": w, "kernel_size": k, "bias": bias, **conv})
    f32 = lambda s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    return {"x": f32((n, c, h, w)), "weight": f32((o, c, k, k)), "bias": f32((o,)) if bias
            else None, "target": f32((n, o, *Conv2d._out_hw(params))), "conv": conv,
            "lr": float(rng.uniform(1e-3, 0.5)), "steps": int(rng.integers(3, 7))}


def run(make_step, p: dict) -> object:
    step = make_step(p["x"], p["target"], p["lr"], p["conv"])
    return check_trajectory(step, p["weight"], p["bias"], p["x"], p["target"], p["lr"],
                            p["steps"], conv=p["conv"], diagnose_failure=False,
                            free_running=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=300)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    res = {"correct": {"torch": [0, 0, 0.0], "numpy": [0, 0, 0.0]},
           "mutants": {m: {"caught_right": 0, "caught_wrong": 0, "missed": 0}
                       for m in ZOO.STEP_MUTANTS}}
    for _ in range(a.problems):
        p = problem(rng)
        for name, make in (("torch", torch_sgd_step), ("numpy", numpy_sgd_step)):
            v = run(make, p)
            row = res["correct"][name]
            row[0] += 1
            row[1] += 0 if v.passed else 1
            row[2] = max(row[2], v.worst_ratio)
        for m, (make, step, tensor) in ZOO.STEP_MUTANTS.items():
            v = run(make, p)
            f = v.first_failure
            key = "missed" if f is None else (
                "caught_right" if (f.step, f.tensor) == (step, tensor) else "caught_wrong")
            res["mutants"][m][key] += 1
    res["seconds"] = time.perf_counter() - t0
    res["command"] = " ".join(["python"] + sys.argv)
    print(json.dumps(res, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
