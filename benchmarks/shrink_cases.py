"""``numoracle shrink`` on three failing cases supplied from outside.

Each case is dumped to an ``.npz`` here, as a user would dump the inputs of a
step that went wrong, and then shrunk by the command line (a subprocess per
case, so the time is what a user waits):

* ``linear``: the zoo mutant ``last_term_dropped`` at batch 128, 1024 -> 1024
  features with a bias;
* ``conv2d``: seed 002's situation: a layer (batch 2, 64 -> 64 channels,
  56 x 56, 3 x 3, padding 1) trained for a few SGD steps by a kernel that keeps
  stale weights (the zoo's ``stale_weights``); the step-3 inputs are dumped;
* ``kan``: the zoo mutant ``kan_upper_edge_index_off_by_one`` (seed 001's bug) on a
  KAN layer, batch 128, 32 -> 32 features, grid 8, cubic splines.

Usage::

    python benchmarks/shrink_cases.py OUT [--only linear,conv2d,kan]

writes ``OUT/<case>.npz``, ``OUT/<case>.json`` (sizes before and after, kernel
runs, seconds, the reason) and ``OUT/shrink.json`` (all three, the command and
the machine).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from numoracle.cases.case import Case
from numoracle.oracle.formats import quantize

ROOT = Path(__file__).resolve().parents[1]
from numoracle.zoo.conv2d import stale_weights  # noqa: E402


def dump_linear(path: Path) -> list[str]:
    rng = np.random.default_rng(10)
    arrays = {"x": rng.standard_normal((128, 1024)), "weight": rng.standard_normal((1024, 1024)),
              "grad_output": rng.standard_normal((128, 1024)), "bias": rng.standard_normal(1024)}
    np.savez(path, **{k: quantize(v, "fp32").astype(np.float32) for k, v in arrays.items()})
    return ["--op", "linear", "--target", "last_term_dropped", "--source",
            "numoracle.zoo.linear"]


def dump_conv2d(path: Path) -> list[str]:
    """Three SGD steps of a conv layer whose kernel keeps stale weights; the
    inputs of step 3 dumped (seed 002: a step deep inside a run went wrong)."""
    rng = np.random.default_rng(11)
    params = {"batch": 2, "in_channels": 64, "out_channels": 64, "height": 56, "width": 56,
              "kernel_size": (3, 3), "stride": (1, 1), "padding": (1, 1), "dilation": (1, 1),
              "groups": 1, "bias": True}
    w = torch.tensor(rng.standard_normal((64, 64, 3, 3)) * 0.05, dtype=torch.float32)
    b = torch.zeros(64, dtype=torch.float32)
    x = torch.tensor(rng.standard_normal((2, 64, 56, 56)), dtype=torch.float32)
    target = torch.tensor(rng.standard_normal((2, 64, 56, 56)) * 0.1, dtype=torch.float32)
    for step in range(1, 4):
        g = torch.zeros_like(target)  # the forward pass first, then dL/dy of the MSE
        y = stale_weights(x, w, g, b, params=params)["y"]
        g = 2 * (y - target) / y.numel()
        out = stale_weights(x, w, g, b, params=params)
        if step == 3:
            np.savez(path, x=x.numpy(), weight=w.numpy(), grad_output=g.numpy(), bias=b.numpy())
            break
        w = w - 0.5 * out["grad_weight"]
        b = b - 0.5 * out["grad_bias"]
    return ["--op", "conv2d", "--target", "stale_weights", "--source", "numoracle.zoo.conv2d",
            "--param", "padding=1,1"]


def dump_kan(path: Path) -> list[str]:
    case = Case("kan", {"batch": 128, "in_features": 32, "out_features": 32, "grid_size": 8,
                        "spline_order": 3}, seed=12)
    arrays = case.inputs()
    np.savez(path, **{k: v.astype(np.float32) for k, v in arrays.items()})
    return ["--op", "kan", "--target", "kan_upper_edge_index_off_by_one", "--source",
            "numoracle.zoo.kan"]


CASES = {"linear": dump_linear, "conv2d": dump_conv2d, "kan": dump_kan}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--only", default=",".join(CASES))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.only.split(","):
        npz = args.out / f"{name}.npz"
        cli = CASES[name](npz)
        cmd = [sys.executable, "-m", "numoracle", "shrink", str(npz), *cli,
               "--store", str(args.out / "store"), "--json", str(args.out / f"{name}.json")]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False,
                              env={**os.environ, "COLUMNS": "100"})
        wall = time.perf_counter() - t0
        (args.out / f"{name}.log").write_text(proc.stdout + proc.stderr)
        row = json.loads((args.out / f"{name}.json").read_text()) if proc.returncode == 1 \
            and (args.out / f"{name}.json").is_file() else {"error": proc.stderr[-2000:]}
        row.update({"case": name, "wall_s": round(wall, 2),
                    "command": " ".join(["numoracle", *cmd[3:]])})
        rows.append(row)
        print(name, {k: row.get(k) for k in ("elements_before", "elements_after",
                                              "kernel_runs", "seconds", "reason",
                                              "reason_after")}, flush=True)
    machine = {"platform": platform.platform(), "python": platform.python_version(),
               "cpus": os.cpu_count(), "numpy": np.__version__}
    (args.out / "shrink.json").write_text(json.dumps(
        {"command": " ".join(sys.argv), "machine": machine, "cases": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
