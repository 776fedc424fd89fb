"""Where a GPU check spends its time: cProfile of the oracle and of whole realistic cases.

    CUDA_LAUNCH_BLOCKING=1 python benchmarks/profile_gpu.py --out DIR [--cases 4]

Run with ``CUDA_LAUNCH_BLOCKING=1`` so that every kernel launch returns only
when the kernel has finished: the profile then charges GPU time to the Python
line that launched it (slower overall, but the shares are right).

Writes ``DIR/<name>.txt`` (the 45 most expensive functions by cumulative and by
own time) for

* ``oracle_linear``: the linear reference + bound (fp32 model, CuPy) at
  1024x4096x4096;
* ``oracle_conv``: the conv2d reference + bound, 3x3, 32x256->256 at 56x56;
* ``case_<target>_<op>``: ``run_target`` on ``--cases`` realistic-size cases
  (seed 0), the kernel, the transfers, the oracle and the verdict together.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from pathlib import Path
from typing import Any

import numpy as np


def _report(prof: cProfile.Profile, path: Path, header: str) -> None:
    buf = io.StringIO()
    buf.write(header + "\n")
    for key in ("cumulative", "tottime"):
        buf.write(f"\n== by {key} ==\n")
        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(45)
    path.write_text(buf.getvalue())
    print(header, flush=True)


def _oracle(out: Path, name: str, op_name: str, params: dict[str, Any]) -> None:
    import cupy

    from numoracle.oracle.ops import get_op
    from numoracle.oracle.precision import get_model

    op = get_op(op_name)
    params = op.validate(params)
    rng = np.random.default_rng(0)
    inputs = {k: cupy.asarray(rng.standard_normal(s, dtype=np.float32).astype(np.float64))
              for k, s in op.input_shapes(params).items()}
    model = get_model("fp32")
    op.reference(inputs, params, model)  # warm-up: CuPy compiles its kernels
    cupy.cuda.Device().synchronize()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    refs = op.reference(inputs, params, model)
    cupy.cuda.Device().synchronize()
    t1 = time.perf_counter()
    for r in refs.values():
        r.to_host()
    prof.disable()
    t2 = time.perf_counter()
    _report(prof, out / f"{name}.txt",
            f"{name} {params}: reference {t1 - t0:.4f} s, to host {t2 - t1:.4f} s")


def _cases(out: Path, target_name: str, op: str, n: int) -> None:
    from numoracle.kernels import get_target
    from numoracle.running.runner import default_strategy, run_target

    target = get_target(target_name, op)
    if target.unavailable_reason():
        print(f"{target_name} {op}: {target.unavailable_reason()}")
        return
    strat = default_strategy(target, max_reduction=1 << 20, regime="realistic")
    run_target(target, examples=1, seed=99, strategy=strat, shrink=False)  # warm-up
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    res = run_target(target, examples=n, seed=0, strategy=strat, shrink=False)
    prof.disable()
    _report(prof, out / f"case_{target_name}_{op}.txt",
            f"{target_name} {op}: {res.cases} realistic cases, {res.verdict}, "
            f"{time.perf_counter() - t0:.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", type=int, default=4)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    _oracle(out, "oracle_linear", "linear",
            {"batch": 1024, "in_features": 4096, "out_features": 4096, "bias": True})
    _oracle(out, "oracle_conv", "conv2d",
            {"batch": 32, "in_channels": 256, "out_channels": 256, "height": 56, "width": 56,
             "kernel_size": 3, "padding": 1, "bias": True})
    for t, op in (("torch-cuda-fp32", "conv2d"), ("torch-cuda-fp32", "linear"),
                  ("cupy-fp32", "matmul"), ("torch-cuda-fp32", "kan")):
        try:
            _cases(out, t, op, a.cases)
        except Exception as exc:  # noqa: BLE001 - one profile failing keeps the others
            print(f"{t} {op}: {type(exc).__name__}: {exc}", flush=True)


if __name__ == "__main__":
    main()
