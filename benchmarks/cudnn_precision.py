"""Which precision do cuDNN's convolutions really deliver? A table by op and shape class.

    python benchmarks/cudnn_precision.py [--out DIR] [--cases 20] [--targets NAME,...]

For each shape class (kernel size, channels, batch, spatial size) draws
``--cases`` random normal cases (seeds 0, 1, ...), computes for each case the
reference with its bound once per candidate model (fp32, tf32, fp16 inputs,
fp16 accumulation, bf16 inputs; on the GPU's float64 path when CuPy has a GPU),
runs every cuDNN target on it (TF32 off and on, cudnn.deterministic off and on,
contiguous and channels_last) and records, for every output (y, grad_input,
grad_weight, grad_bias), the worst err/bound under each model. The effective
precision of a line is the most precise model whose worst ratio stays below 1
over all its cases. Writes DIR/cudnn_precision.json and .md, with the shapes of
each line's arrays and its number of cases.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from numoracle.cases.case import Case
from numoracle.checking.check import run_kernel
from numoracle.checking.verdict import compare
from numoracle.kernels import get_backend, get_target
from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import STANDARD_MODELS, get_model

#: (label, params) of the shape classes
SHAPES: list[tuple[str, dict[str, Any]]] = [
    ("1x1, 64->64, N=8, 16x16", {"kernel_size": 1, "in_channels": 64, "out_channels": 64, "batch": 8,
                                     "height": 16, "width": 16}),
    ("3x3, 3->16, N=8, 32x32", {"kernel_size": 3, "in_channels": 3, "out_channels": 16, "batch": 8,
                                    "height": 32, "width": 32, "padding": 1}),
    ("3x3, 64->64, N=4, 16x16", {"kernel_size": 3, "in_channels": 64, "out_channels": 64, "batch": 4,
                                     "height": 16, "width": 16, "padding": 1}),
    ("3x3, 1->16, N=2, 128x128 (seed 000)", {"kernel_size": 3, "in_channels": 1, "out_channels": 16,
                                                 "batch": 2, "height": 128, "width": 128}),
    ("5x5, 32->32, N=2, 24x24, stride 2", {"kernel_size": 5, "in_channels": 32, "out_channels": 32,
                                                "batch": 2, "height": 24, "width": 24, "stride": 2}),
    ("3x3 depthwise, 32 ch, N=4, 16x16", {"kernel_size": 3, "in_channels": 32, "out_channels": 32,
                                               "batch": 4, "height": 16, "width": 16, "padding": 1,
                                               "groups": 32}),
]
TARGETS = ("torch-cuda-fp32", "torch-cuda-fp32-cl", "torch-cuda-tf32", "torch-cuda-tf32-det",
           "torch-cuda-tf32-cl")


def effective(per_model: dict[str, float]) -> str:
    for name in STANDARD_MODELS:
        if per_model.get(name, float("inf")) < 1.0:
            return name
    return "none (exceeds every model)"


def shapes_of(params: dict[str, Any]) -> str:
    """The arrays and geometry of a shape class, for the table."""
    case = Case("conv2d", params)
    sh = case.shapes()
    p = case.params
    geo = ", ".join(f"{k} {p[k][0] if p[k][0] == p[k][1] else p[k]}" for k in
                    ("stride", "padding", "dilation") if p[k] != ((1, 1) if k != "padding"
                                                                   else (0, 0)))
    parts = [f"x {tuple(sh['x'])}", f"w {tuple(sh['weight'])}",
             f"y {tuple(sh['grad_output'])}"]
    if p["groups"] > 1:
        parts.append(f"groups {p['groups']}")
    return ", ".join(parts + ([geo] if geo else []))


def references(case: Case, inputs: dict[str, Any], gpu: bool) -> dict[str, dict[str, Any]]:
    """Per standard model, the reference (value and bound) of every output, on the host."""
    op = get_op("conv2d")
    where = inputs
    if gpu:
        import cupy  # noqa: PLC0415 - only with a GPU

        where = {k: cupy.asarray(v) for k, v in inputs.items()}
    return {m: {k: v.to_host() for k, v in op.reference(where, case.params,
                                                        get_model(m)).items()}
            for m in STANDARD_MODELS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--cases", type=int, default=20)
    ap.add_argument("--targets", default=",".join(TARGETS))
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    targets = []
    for tname in a.targets.split(","):
        target = get_target(tname, "conv2d")
        reason = target.unavailable_reason()
        if reason:
            print(f"{tname}: {reason}")
        else:
            targets.append(target)
    gpu = get_backend("cupy").available() is None
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1))
    for label, params in SHAPES:
        params = {"bias": True, **params}
        shapes = shapes_of(params)
        worst: dict[tuple[str, str], dict[str, float]] = {}
        for seed in range(a.cases):
            case = Case("conv2d", params, family="normal", seed=seed)
            inputs = case.inputs()
            refs = references(case, inputs, gpu)
            jobs = []
            for target in targets:
                got, error = run_kernel(case, target, inputs)
                if error:
                    raise SystemExit(f"{target.name} on {label}: {error}")
                jobs += [((target.name, name), m, pool.submit(
                    lambda n, a, r: compare(n, a, r).worst_ratio_det, name, arr, refs[m][name]))
                    for name, arr in got.items() for m in STANDARD_MODELS]
            for key, m, job in jobs:  # the comparisons run in threads (NumPy releases the GIL)
                w = worst.setdefault(key, {})
                w[m] = max(w.get(m, 0.0), job.result())
        for (tname, name), w in worst.items():
            row = {"shape": label, "shapes": shapes, "cases": a.cases, "target": tname,
                   "output": name, "effective": effective(w), "worst_by_model": w,
                   "claimed": get_target(tname, "conv2d").precision.name}
            rows.append(row)
            print(f"{label:38s} {tname:20s} {name:12s} -> {row['effective']:12s} "
                  + " ".join(f"{k}={v:.3g}" for k, v in w.items()), flush=True)
        write(out, rows, a.cases, time.perf_counter() - t0)  # a cut-off run keeps its lines


def write(out: Path, rows: list[dict[str, Any]], cases: int, seconds: float) -> None:
    (out / "cudnn_precision.json").write_text(json.dumps(rows, indent=2))
    lines = ["# cuDNN conv2d: effective precision by op and shape class", "",
             f"`python benchmarks/cudnn_precision.py --cases {cases}`: {cases} random normal "
             "fp32 cases per line (seeds 0 to "
             f"{cases - 1}, bias on); the effective precision is the most precise model whose "
             f"worst err/bound over the line's cases stays below 1 ({seconds:.0f} s). A ratio of 0 "
             "under fp16 accumulation means no element was judged there: its sums exceed "
             "fp16's range, where that model leaves them unjudged.", "",
             "| shape | arrays | target | output | cases | effective | fp32 | tf32 | "
             "fp16 in | fp16 acc | bf16 in |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        w = r["worst_by_model"]
        lines.append(f"| {r['shape']} | {r['shapes']} | {r['target']} | {r['output']} | "
                     f"{r['cases']} | {r['effective']} | "
                     + " | ".join(f"{w.get(k, float('nan')):.3g}" for k in STANDARD_MODELS)
                     + " |")
    (out / "cudnn_precision.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
