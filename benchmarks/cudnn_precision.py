"""Which precision do cuDNN's convolutions really deliver? A table by op and shape class.

    python benchmarks/cudnn_precision.py [--out DIR] [--cases 20]

For each shape class (kernel size, channels, batch, spatial size) and each
cuDNN target (TF32 off and on, cudnn.deterministic off and on, contiguous and
channels_last), draws random normal cases, runs the target and computes, for
every output (y, grad_input, grad_weight, grad_bias), the worst err/bound under
each candidate model (fp32, tf32, fp16 inputs, fp16 accumulation, bf16 inputs).
The effective precision of a line is the most precise model whose worst ratio
stays below 1 over all its cases. Writes DIR/cudnn_precision.json and .md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from numoracle.case import Case
from numoracle.check import judge, run_kernel
from numoracle.kernels import get_target
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--cases", type=int, default=20)
    a = ap.parse_args()
    rows: list[dict[str, Any]] = []
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for label, params in SHAPES:
        params = {"bias": True, **params}
        for tname in TARGETS:
            target = get_target(tname, "conv2d")
            if target.unavailable_reason():
                print(f"{tname}: {target.unavailable_reason()}")
                continue
            worst: dict[str, dict[str, float]] = {}
            for seed in range(a.cases):
                case = Case("conv2d", params, family="normal", seed=seed)
                inputs = case.inputs()
                got, error = run_kernel(case, target, inputs)
                if error:
                    raise SystemExit(f"{tname} on {label}: {error}")
                fp32 = get_model("fp32")
                verdicts = judge(case, fp32, inputs, got, with_diagnosis=True)
                for name, v in verdicts.items():
                    w = worst.setdefault(name, {})
                    for m, r in v.per_model.items():
                        w[m] = max(w.get(m, 0.0), r)
            for name, w in worst.items():
                row = {"shape": label, "target": tname, "output": name,
                       "effective": effective(w), "worst_by_model": w,
                       "claimed": target.precision.name}
                rows.append(row)
                print(f"{label:38s} {tname:20s} {name:12s} -> {row['effective']:12s} "
                      + " ".join(f"{k}={v:.3g}" for k, v in w.items() if k in STANDARD_MODELS),
                      flush=True)
            write(out, rows, a.cases)  # after every target: a cut-off run keeps its lines


def write(out: Path, rows: list[dict[str, Any]], cases: int) -> None:
    (out / "cudnn_precision.json").write_text(json.dumps(rows, indent=2))
    lines = ["# cuDNN conv2d: effective precision by op and shape class", "",
             f"`python benchmarks/cudnn_precision.py --cases {cases}`: random normal fp32 "
             "inputs; the effective precision is the most precise model whose worst "
             "err/bound over the cases stays below 1.", "",
             "| shape | target | output | effective | fp32 | tf32 | fp16 in | bf16 in |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        w = r["worst_by_model"]
        lines.append(f"| {r['shape']} | {r['target']} | {r['output']} | {r['effective']} | "
                     + " | ".join(f"{w.get(k, float('nan')):.3g}" for k in
                                  ("fp32", "tf32", "fp32-fp16in", "fp32-bf16in")) + " |")
    (out / "cudnn_precision.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
