"""Where a GPU check spends its time: cProfile of the oracle and of whole realistic cases.

    CUDA_LAUNCH_BLOCKING=1 python benchmarks/profile_gpu.py --out DIR [--cases 4]

Run with ``CUDA_LAUNCH_BLOCKING=1`` so that every kernel launch returns only
when the kernel has finished: the profile then charges GPU time to the Python
line that launched it (slower overall, but the shares are right).

Writes ``DIR/<name>.txt`` (the 45 most expensive functions by cumulative and by
own time) for

* ``oracle_linear_small`` and ``oracle_linear``: the linear reference + bound
  (fp32 model, CuPy) at 128x1024x1024 (where a fixed cost dominates: 13 ms,
  about 5 ms since the fused kernels) and 1024x4096x4096;
* ``stages_linear_small``: the same small reference with every function of the
  error-tracking arithmetic timed between device synchronisations (own time,
  its callees' excluded), without ``CUDA_LAUNCH_BLOCKING`` being needed;
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


#: the functions of numoracle.oracle.tracked that ``stages`` times
STAGES = ("matmul", "_matmul", "_exact_fused_matmul", "operand_facts",
          "exact_contraction_radii", "_settle", "_operand", "_gammas", "contraction_radii", "_grid_and_top",
          "_may_fit", "lsb_exponent", "lowest_set_bit", "device_scalars", "_finite_magnitude",
          "_overflow_to_inf", "_escalate", "store", "_store", "store_rounding", "add_rounding",
          "rounded", "representable", "either", "add", "sum_")


def _stages(out: Path, name: str, params: dict[str, Any], repeats: int = 5) -> None:
    """Own time of each tracked function, the device synchronised around each call
    (on NumPy, where CuPy is missing: the same table for the CPU)."""
    try:
        import cupy

        xp: Any = cupy
        sync = cupy.cuda.Device().synchronize
    except ImportError:
        xp, sync = np, (lambda: None)
    import numoracle.oracle.ops.linear as lin
    import numoracle.oracle.tracked as tr
    from numoracle.oracle.ops import get_op
    from numoracle.oracle.precision import get_model

    op = get_op("linear")
    params = op.validate(params)
    rng = np.random.default_rng(0)
    inputs = {k: xp.asarray(rng.standard_normal(s, dtype=np.float32).astype(np.float64))
              for k, s in op.input_shapes(params).items()}
    model = get_model("fp32")
    own: dict[str, float] = dict.fromkeys(STAGES, 0.0)
    calls: dict[str, int] = dict.fromkeys(STAGES, 0)
    stack: list[float] = []  # callees' time, to subtract from the caller's

    def timed(fname: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            sync()
            stack.append(0.0)
            t0 = time.perf_counter()
            res = fn(*args, **kwargs)
            sync()
            dt = time.perf_counter() - t0
            inner = stack.pop()
            own[fname] += dt - inner
            calls[fname] += 1
            if stack:
                stack[-1] += dt
            return res
        return wrapper

    originals = {f: getattr(tr, f) for f in STAGES if hasattr(tr, f)}
    for f, fn in originals.items():
        setattr(tr, f, timed(f, fn))
        if hasattr(lin, f):
            setattr(lin, f, getattr(tr, f))
    try:
        op.reference(inputs, params, model)  # warm-up
        for k in own:
            own[k], calls[k] = 0.0, 0
        sync()
        t0 = time.perf_counter()
        for _ in range(repeats):
            op.reference(inputs, params, model)
        sync()
        total = (time.perf_counter() - t0) / repeats
    finally:
        for f, fn in originals.items():
            setattr(tr, f, fn)
            if hasattr(lin, f):
                setattr(lin, f, fn)
    lines = [f"{name} {params}: {1e3 * total:.2f} ms per reference (synchronised calls)",
             "", "| function | calls | own ms |", "|---|---|---|"]
    lines += [f"| {f} | {calls[f] // repeats} | {1e3 * own[f] / repeats:.3f} |"
              for f in sorted(own, key=lambda f: -own[f]) if calls[f]]
    (out / f"{name}.md").write_text("\n".join(lines) + "\n")
    print(lines[0], flush=True)


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
    small = {"batch": 128, "in_features": 1024, "out_features": 1024, "bias": True}
    _stages(out, "stages_linear_small", small)
    _oracle(out, "oracle_linear_small", "linear", small)
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
