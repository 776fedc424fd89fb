"""cuDNN's fp32 5×5 filter gradient judged under summation and transform claims.

    python -m benchmarks sharpness --cudnn-winograd run --saved OUT/grad_weight.npz
    python -m benchmarks sharpness --cudnn-winograd judge --saved OUT/grad_weight.npz \
        --out OUT --label LABEL
    python -m benchmarks sharpness --cudnn-winograd diagnose --saved OUT/grad_weight.npz \
        --out OUT --label LABEL

``run`` runs one conv2d case (batch 64, 64→64 channels, 32×32, 5×5, padding 2,
normal values, TF32 off) on cuDNN through the ``torch-cuda-fp32`` and
``torch-cuda-fp32-det`` targets once and keeps the outputs (a CUDA device
needed). ``judge`` judges the kept outputs under the claimed formats with
summation only, summation or Winograd, summation or FFT, and every class (the
targets' claim), with the diagnosis of each claim (``OUT/LABEL.json``): run it
once per numoracle version (``PYTHONPATH`` picks the package) on the same saved
outputs, on any machine (the inputs come from the case's seed). ``diagnose``
judges the ``torch-cuda-fp32`` filter gradient under the target's claim,
deterministic and probabilistic (``OUT/diagnosis-LABEL.json``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

import numoracle
from numoracle.cases.case import Case
from numoracle.checking.check import judge, run_kernel
from numoracle.kernels import get_target

PARAMS = {"batch": 64, "in_channels": 64, "out_channels": 64, "height": 32, "width": 32,
          "kernel_size": (5, 5), "stride": (1, 1), "padding": (2, 2), "dilation": (1, 1),
          "groups": 1, "bias": False}
TARGETS = ("torch-cuda-fp32", "torch-cuda-fp32-det")

__all__ = ["PARAMS", "TARGETS", "case", "diagnose_saved", "judge_saved", "run"]


def case() -> Case:
    """The one conv2d case every step judges (its inputs come back from its seed)."""
    return Case(op="conv2d", params=dict(PARAMS), storage="fp32", family="normal", seed=0)


def run(path: Path) -> None:
    """Run the case on cuDNN through both targets; save their filter gradients to ``path``."""
    c = case()
    inputs = c.inputs()
    arrays: dict[str, Any] = {}  # the inputs come back from the case's seed
    for name in TARGETS:
        t = get_target(name, "conv2d")
        engine = None
        if t.engine is not None:
            def call(t: Any = t) -> Any:
                return run_kernel(c, t, inputs)
            engine = t.engine(call)
        got, err = run_kernel(c, t, inputs)
        assert got is not None, err
        arrays[f"got_{name}_grad_weight"] = got["grad_weight"]
        print(name, "engine:", engine, flush=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)


def judge_saved(path: Path, out: Path) -> None:
    """Judge the saved filter gradients under each claim; write the rows to ``out``."""
    c = case()
    inputs = c.inputs()
    with np.load(path) as z:
        gots = {name: {k[len(f"got_{name}_"):]: z[k] for k in z.files
                       if k.startswith(f"got_{name}_")} for name in TARGETS}
    rows = {}
    for name in TARGETS:
        claimed = get_target(name, "conv2d").precision
        got = {"grad_weight": gots[name]["grad_weight"]}
        res = {}
        for label, algos in (("summation", ("summation",)),
                             ("summation+winograd", ("summation", "winograd")),
                             ("summation+fft", ("summation", "fft")),
                             ("claimed", tuple(claimed.algorithms))):
            t0 = time.perf_counter()
            model = claimed.with_(algorithms=algos)
            v = judge(c, model, inputs, got, with_diagnosis=True)["grad_weight"]
            res[label] = {"algorithms": list(algos), "worst_det": v.worst_ratio_det,
                          "worst_prob": v.worst_ratio_prob, "passed": v.passed,
                          "diagnosis": v.diagnosis, "per_model": v.per_model,
                          "seconds": round(time.perf_counter() - t0, 1)}
            print(name, label, v.worst_ratio_det, v.diagnosis, flush=True)
        rows[name] = res
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w") as f:
        json.dump({"case": c.to_dict() if hasattr(c, "to_dict") else str(c),
                   "numoracle": numoracle.__file__, "rows": rows}, f, indent=1, default=str)


def diagnose_saved(path: Path, out: Path) -> None:
    """The saved ``torch-cuda-fp32`` filter gradient under the target's claim,
    deterministic and probabilistic (the sharp mode), with the diagnosis."""
    c = case()
    inputs = c.inputs()
    with np.load(path) as z:
        got = {"grad_weight": z["got_torch-cuda-fp32_grad_weight"]}
    claimed = get_target("torch-cuda-fp32", "conv2d").precision
    rows = {}
    for label, model in (("deterministic", claimed),
                         ("probabilistic", claimed.with_(probabilistic=True))):
        t0 = time.perf_counter()
        v = judge(c, model, inputs, got, with_diagnosis=True)["grad_weight"]
        rows[label] = {"model": model.describe(), "worst": v.worst_ratio, "passed": v.passed,
                       "diagnosis": v.diagnosis, "per_model": v.per_model,
                       "seconds": round(time.perf_counter() - t0, 1)}
        print(label, v.worst_ratio, v.diagnosis, flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w") as f:
        json.dump({"numoracle": numoracle.__file__, "rows": rows}, f, indent=1)
