"""Where a GPU reference's time goes: device time per kernel, and the device's idle time.

Runs the linear backward reference (fp32 model, the oracle_speed.py case) and the plain
float64 products of the same outputs under torch's profiler, which records every CUDA
kernel of the process (CuPy's and cuBLAS's too), and writes per kernel name its launches
and device time, their sum, and the wall time of the call (each synchronised): wall
minus the kernels' sum is time the device waited for the host (the profiler's own
cost included).

    python benchmarks/gpu_kernel_times.py --linear 1024,4096,4096 --out OUT/kernels.md
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path

import cupy
import torch
from oracle_speed import linear_case
from torch.profiler import ProfilerActivity, profile

from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import get_model


def _table(title: str, fn, repeats: int) -> list[str]:
    fn()
    cupy.cuda.Device().synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        wall = 0.0
        for _ in range(repeats):  # each call synchronised, as a check's reference is
            t0 = time.perf_counter()
            fn()
            cupy.cuda.Device().synchronize()
            wall += (time.perf_counter() - t0) / repeats
    per: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            per[ev.name][0] += 1
            per[ev.name][1] += ev.device_time_total / 1e3 / repeats  # us -> ms, per call
    busy = sum(v[1] for v in per.values())
    lines = [f"## {title}", "", f"wall {1e3 * wall:.3f} ms per call, kernels {busy:.3f} ms, "
             f"device waiting {1e3 * wall - busy:.3f} ms", "",
             "| kernel | launches per call | ms per call |", "|---|---|---|"]
    for name, (n, ms) in sorted(per.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"| {name[:90]} | {n / repeats:g} | {ms:.3f} |")
    return lines + [""]


def _linear(spec: str, repeats: int) -> list[str]:
    op, model = get_op("linear"), get_model("fp32")
    params, inputs, plain = linear_case(tuple(int(v) for v in spec.split(",")), cupy)
    return (_table(f"oracle, linear backward {spec}",
                   lambda: op.reference(inputs, params, model), repeats)
            + _table(f"plain float64, linear backward {spec}", plain, repeats))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--linear", action="append", default=None, metavar="B,I,O")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    lines = [f"# Kernel times, {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}", ""]
    for spec in a.linear or ["1024,4096,4096"]:
        lines += _linear(spec, a.repeats)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
