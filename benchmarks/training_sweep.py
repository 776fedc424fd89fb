"""Stepwise training check over random problems: correct SGD steps must pass every
step; each mutant must be named at its expected step and tensor.

    python benchmarks/training_sweep.py [--problems 300] [--out FILE.json]

The correct steps are torch CPU and NumPy, and where a GPU is present the torch
CUDA step on cuDNN with TF32 off (claiming fp32) and on (claiming the cuDNN TF32
targets' model) and the CuPy step (atomic and two-phase grad_weight); the
mutants are those of :mod:`numoracle.zoo.training`, on the torch CUDA step too
where torch sees a GPU. Each step claims :func:`numoracle.kernels.sgd_steps.step_model`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from numoracle.kernels import get_backend
from numoracle.kernels.sgd_steps import STEPS, step_model
from numoracle.oracle.ops.conv2d import Conv2d
import importlib
from numoracle.trajectory import check_trajectory

ZOO = importlib.import_module("numoracle.zoo.training")


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


def run(make_step, p: dict, model: str | object = "fp32") -> object:
    step = make_step(p["x"], p["target"], p["lr"], p["conv"])
    return check_trajectory(step, p["weight"], p["bias"], p["x"], p["target"], p["lr"],
                            p["steps"], model=model, conv=p["conv"], diagnose_failure=False,
                            free_running=False)


def available_steps() -> list[str]:
    """The correct steps that can run here."""
    names = ["torch-cpu", "numpy"]
    try:
        import torch  # noqa: PLC0415

        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    if cuda:
        names += ["torch-cuda", "torch-cuda-tf32"]
    if get_backend("cupy").available() is None:
        names += ["cupy", "cupy-det"]
    return names


def available_mutants() -> dict:
    mutants = dict(ZOO.STEP_MUTANTS)
    if "torch-cuda" in available_steps():
        mutants.update(ZOO.GPU_STEP_MUTANTS)
    return mutants


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=300)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    steps, mutants = available_steps(), available_mutants()
    # per correct step: [problems, failing problems, worst err/bound, claimed model]
    res: dict = {"correct": {s: [0, 0, 0.0, step_model(s).name] for s in steps},
                 "mutants": {m: {"caught_right": 0, "caught_wrong": 0, "missed": 0}
                             for m in mutants}}
    for _ in range(a.problems):
        p = problem(rng)
        for name in steps:
            v = run(STEPS[name], p, step_model(name))
            row = res["correct"][name]
            row[0] += 1
            row[1] += 0 if v.passed else 1
            row[2] = max(row[2], v.worst_ratio)
        for m, (make, step, tensor) in mutants.items():
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
