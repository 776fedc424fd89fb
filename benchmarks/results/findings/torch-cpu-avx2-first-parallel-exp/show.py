"""torch's first parallel CPU exp/sigmoid under ATEN_CPU_CAPABILITY=avx2: wrong values.

    python show.py [--runs 60]

Each trial is a fresh process (the defect shows on the first call only). It
computes torch.exp of 4,000 float32 values drawn as the elementwise soundness
test draws them (uniform on [-100, 88], seed 3000), then the same call again,
and compares both with float64 exp. Modes: 'first' (the call as is), 'threads1'
(torch.set_num_threads(1) first), 'warm' (torch.exp of 8 values first).
Prints, per mode, how many processes returned a value off by more than 2 ulps
in the first call, and the worst relative error seen.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

TRIAL = r"""
import json, sys
import numpy as np, torch
mode, fn = sys.argv[1], sys.argv[2]
if mode == "threads1":
    torch.set_num_threads(1)
if mode == "warm":
    getattr(torch, fn)(torch.ones(8))
v = np.random.default_rng(3000).uniform(-100, 88, 4000).astype(np.float32)
f64 = np.exp(v.astype(np.float64)) if fn == "exp" else 1 / (1 + np.exp(-v.astype(np.float64)))
out = []
for _ in range(2):
    got = getattr(torch, fn)(torch.from_numpy(v)).numpy().astype(np.float64)
    normal = np.abs(f64) > 2.0 ** -126
    rel = np.where(normal, np.abs(got - f64) / np.where(normal, np.abs(f64), 1), 0)
    i = int(np.argmax(rel))
    out.append({"rel": float(rel[i]), "index": i, "x": float(v[i]), "first_bad": int(np.argmax(rel > 2 ** -22)) if rel[i] > 2 ** -22 else None})
print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(), "calls": out}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--fn", default="exp", choices=["exp", "sigmoid"])
    args = ap.parse_args()
    env = dict(os.environ, ATEN_CPU_CAPABILITY="avx2")
    import torch
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, ATEN_CPU_CAPABILITY=avx2, "
          f"torch.{args.fn}, {args.runs} fresh processes per mode")
    for mode in ("first", "threads1", "warm"):
        bad_first = bad_second = 0
        worst = 0.0
        example = None
        for _ in range(args.runs):
            r = json.loads(subprocess.run([sys.executable, "-c", TRIAL, mode, args.fn], env=env,
                                          capture_output=True, text=True, check=True).stdout)
            first, second = r["calls"]
            bad_first += first["rel"] > 2 ** -22
            bad_second += second["rel"] > 2 ** -22
            if first["rel"] > worst:
                worst, example = first["rel"], first
        print(f"{mode:9s} threads={r['threads']} capability={r['capability']}: first call wrong in "
              f"{bad_first}/{args.runs} processes, second call in {bad_second}/{args.runs}; "
              f"worst relative error {worst:.3g}" + (f" (x={example['x']!r}, first wrong index "
                                                     f"{example['first_bad']})" if worst > 2 ** -22 else ""))


if __name__ == "__main__":
    main()
