"""Two-run check of every available conv2d and linear target on a few cases.

    python benchmarks/rerun_check.py [--out FILE.json] [--runs 4]

Reports, per target and case, whether repeated runs were bit-identical, stayed
within the two-order yardstick (legitimate nondeterminism), or left it.
"""

from __future__ import annotations

import argparse
import json

from numoracle.cases.case import Case
from numoracle.checking.rerun import check_reruns
from numoracle.kernels import available_targets

CASES = [
    Case("conv2d", {"batch": 8, "in_channels": 16, "out_channels": 16, "height": 32, "width": 32,
                    "kernel_size": 3, "padding": 1, "bias": True}, family="normal", seed=1),
    Case("conv2d", {"batch": 2, "in_channels": 1, "out_channels": 16, "height": 128,
                    "width": 128, "kernel_size": 3, "bias": True}, family="normal", seed=2),
    Case("linear", {"batch": 128, "in_features": 1024, "out_features": 256, "bias": True},
         family="normal", seed=3),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--runs", type=int, default=4)
    a = ap.parse_args()
    rows = []
    for case in CASES:
        for t in available_targets(case.op):
            if t.precision.storage.name != case.storage:
                continue
            v = check_reruns(case, t, runs=a.runs)
            rows.append({"target": t.name, "op": case.op, "case": case.describe(),
                         "claims_deterministic": v.deterministic, "passed": v.passed,
                         "ratios": v.ratios, "diagnosis": v.diagnosis})
            print(f"{t.name:24s} {case.op:7s} {'pass' if v.passed else 'FAIL'}  {v.diagnosis}",
                  flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
