"""Time to draw a realistic case's inputs, with ``quantize`` casting to fp32/fp16 on
the host (A) and with its general scaling path only (B), interleaved in one run.

    python benchmarks/case_inputs_speed.py [--repeats 3] [--out FILE.json]

Cases: linear 1024x4096x4096 with bias and conv2d 32x256->256 at 56x56, 3x3 (fp32),
and linear 1024x4096x4096 in fp16, every value family. Both ways give the same
arrays (checked here on every case).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

import numoracle.oracle.formats as formats
from numoracle.cases.case import Case
from numoracle.cases.values import FAMILIES

CASES = [("linear", {"batch": 1024, "in_features": 4096, "out_features": 4096, "bias": True},
          "fp32"),
         ("conv2d", {"batch": 32, "in_channels": 256, "out_channels": 256, "height": 56,
                     "width": 56, "kernel_size": 3, "padding": 1}, "fp32"),
         ("linear", {"batch": 1024, "in_features": 4096, "out_features": 4096, "bias": True},
          "fp16")]


def draw(case: Case, native: bool) -> tuple[float, dict[str, np.ndarray]]:
    saved = dict(formats._NATIVE)
    if not native:
        formats._NATIVE.clear()
    try:
        t0 = time.perf_counter()
        arrays = case.inputs()
        return time.perf_counter() - t0, arrays
    finally:
        formats._NATIVE.update(saved)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    rows = []
    for op, params, storage in CASES:
        for family in FAMILIES:
            case = Case(op, params, storage=storage, family=family, seed=1)
            times: dict[str, list[float]] = {"cast": [], "general": []}
            for _ in range(a.repeats):
                ta, xa = draw(case, True)
                tb, xb = draw(case, False)
                times["cast"].append(ta)
                times["general"].append(tb)
                for k in xa:
                    np.testing.assert_array_equal(xa[k], xb[k])
            row = {"op": op, "storage": storage, "family": family,
                   "cast_s": float(np.median(times["cast"])),
                   "general_s": float(np.median(times["general"]))}
            row["speedup"] = row["general_s"] / row["cast_s"]
            rows.append(row)
            print(f"{op:7} {storage} {family:9} cast {row['cast_s']:.3f} s  general "
                  f"{row['general_s']:.3f} s  x{row['speedup']:.1f}", flush=True)
    if a.out:
        a.out.write_text(json.dumps({"command": "python benchmarks/case_inputs_speed.py "
                                                f"--repeats {a.repeats}",
                                     "machine": platform.platform(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
