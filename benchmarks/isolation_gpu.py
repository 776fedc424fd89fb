"""The GPU part of the fault table, and the isolated mode's overhead on a GPU.

Hostile CuPy RawKernels after a correct ``cupy.matmul``: an illegal address
(a write at 2^40 floats past the output: a sticky ``cudaErrorIllegalAddress``),
an out-of-bounds write one element past the output (inside the allocation's
rounding: no fault, silent; compute-sanitizer memcheck names it), and a
shared-memory race (a missing ``__syncthreads``: racecheck names it). Each is
checked isolated and in-process, followed by a correct CuPy kernel in the same
process; the out-of-bounds and racy kernels are then replayed under
``numoracle replay --sanitize``. Overhead: the median ``run_kernel`` time
in-process and isolated for CuPy and torch CUDA targets.

    python benchmarks/isolation_gpu.py --out OUT     (run by isolation_gpu.sh)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from numoracle import Target
from numoracle.kernels.backends import get_backend

TIMEOUT = 60.0  # first calls compile the RawKernels

_SOURCES = {
    "illegal": r'''extern "C" __global__ void k(float* p, long long n) {
        if (threadIdx.x == 0) p[(long long)1 << 40] = 1.0f; }''',
    "oob": r'''extern "C" __global__ void k(float* p, long long n) {
        if (threadIdx.x == 0) p[n] = 0.0f; }''',
    "race": r'''extern "C" __global__ void k(float* p, long long n) {
        __shared__ float s[1024];
        int t = threadIdx.x, m = blockDim.x;
        s[t] = p[t];
        /* __syncthreads() missing: thread t reads the slot thread m-1-t writes */
        float v = s[m - 1 - t];
        p[m - 1 - t] = v; }''',
}
_COMPILED: dict[str, Any] = {}


def _hostile(kind: str, a: Any, b: Any) -> dict[str, Any]:
    import cupy  # noqa: PLC0415 - GPU only

    out = cupy.ascontiguousarray(cupy.matmul(a, b))
    if kind not in _COMPILED:
        _COMPILED[kind] = cupy.RawKernel(_SOURCES[kind], "k")
    threads = max(1, min(out.size, 1024))
    _COMPILED[kind]((1,), (threads,), (out, np.int64(out.size)))
    return {"out": out}


def good(a: Any, b: Any) -> dict[str, Any]:
    import cupy  # noqa: PLC0415 - GPU only

    return {"out": cupy.matmul(a, b)}


def illegal_address(a: Any, b: Any) -> dict[str, Any]:
    return _hostile("illegal", a, b)


def out_of_bounds_write(a: Any, b: Any) -> dict[str, Any]:
    return _hostile("oob", a, b)


def shared_memory_race(a: Any, b: Any) -> dict[str, Any]:
    return _hostile("race", a, b)


def _cupy() -> str | None:
    return get_backend("cupy").available()


TARGETS = [Target(name=f.__name__, op="matmul", backend="cupy", precision="fp32", fn=f,
                  source=__file__, available=_cupy)
           for f in (good, illegal_address, out_of_bounds_write, shared_memory_race)]


def fault_rows(store: Path, *, in_process_illegal: bool = False) -> list[dict[str, Any]]:
    import numoracle  # noqa: PLC0415
    from numoracle.running.runner import run_target  # noqa: PLC0415

    rows = []
    # isolated first; in-process the illegal address comes last (it poisons this process)
    runs = ([(TARGETS[1], False)] if in_process_illegal else
            [(t, True) for t in TARGETS[1:]] + [(t, False) for t in TARGETS[2:]])
    for target, iso in runs:
        t0 = time.perf_counter()
        res = run_target(target, examples=30, store=store, isolate=iso, timeout=TIMEOUT)
        wall = time.perf_counter() - t0
        t1 = time.perf_counter()
        try:
            after = numoracle.check_kernel(good, op="matmul", backend="cupy", examples=10,
                                           store=None, isolate=iso).verdict
        except Exception as exc:  # noqa: BLE001 - a poisoned context is the finding
            after = f"FAILS: {str(exc).splitlines()[0][:160]}"
        rows.append({"fault": target.name, "mode": "isolated" if iso else "in-process",
                     "verdict": res.verdict, "fault_kind": res.fault,
                     "diagnosis": res.diagnosis[:300], "repro": res.repro,
                     "cases_to_catch": res.cases_to_catch, "wall_s": round(wall, 3),
                     "next_check": after, "next_check_s": round(time.perf_counter() - t1, 3)})
        print(rows[-1], flush=True)
    return rows


def sanitizer_rows(store: Path, out: Path) -> list[dict[str, Any]]:
    """Replay a repro of the silent and the racy kernel under compute-sanitizer."""
    from hypothesis import find  # noqa: PLC0415

    from numoracle.checking.check import check_case  # noqa: PLC0415
    from numoracle.store.repro import save_repro  # noqa: PLC0415
    from numoracle.strategies import cases  # noqa: PLC0415

    rows = []
    case = find(cases(op="matmul", storage="fp32", max_elements=4096),
                lambda c: 64 <= c.shapes()["a"][-2] * c.shapes()["b"][-1] <= 1024)
    for target, tool in ((TARGETS[2], "memcheck"), (TARGETS[3], "racecheck")):
        verdict = check_case(case, target, timeout=TIMEOUT)
        folder = save_repro(verdict, target, store=store)  # a repro even where it passed
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "numoracle", "replay", "--sanitize", tool,
                               str(folder)], capture_output=True, text=True, check=False)
        report = folder / f"sanitizer-{tool}.txt"
        text = report.read_text() if report.is_file() else done.stderr
        (out / f"sanitizer-{target.name}-{tool}.txt").write_text(text)
        summary = [ln for ln in text.splitlines() if "ERROR SUMMARY" in ln or "RACECHECK SUMMARY"
                   in ln or "Invalid __global__ write" in ln or "hazard" in ln.lower()][:6]
        rows.append({"kernel": target.name, "tool": tool, "verdict_in_check": verdict.passed,
                     "exit": done.returncode, "summary": summary,
                     "wall_s": round(time.perf_counter() - t0, 3)})
        print(rows[-1], flush=True)
    return rows


def overhead(calls: int) -> list[dict[str, Any]]:
    from numoracle.cases.case import Case  # noqa: PLC0415
    from numoracle.checking.check import run_kernel  # noqa: PLC0415
    from numoracle.checking import isolate  # noqa: PLC0415

    rows = []
    configs: list[tuple[Target, Case]] = []
    for shape in ((), (8,)):
        for m in (4, 512):
            configs.append((TARGETS[0], Case(op="matmul", storage="fp32", family="normal",
                                             seed=0, params={"batch_shape": shape, "m": m,
                                                             "k": m, "n": m})))
    try:
        from numoracle.kernels import get_target  # noqa: PLC0415

        torch_t = get_target("torch-cuda-fp32", "linear")
        for size in (8, 1024):
            configs.append((torch_t, Case(op="linear", storage="fp32", family="normal", seed=0,
                                          params={"batch": size, "in_features": size,
                                                  "out_features": size, "bias": True})))
    except Exception as exc:  # noqa: BLE001 - torch CUDA may be missing: the CuPy rows stand
        print(f"no torch CUDA target: {exc}")
    for target, case in configs:
        inputs = case.inputs()
        t0 = time.perf_counter()
        isolate.prepare(target)
        load = time.perf_counter() - t0
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(3):
            run_kernel(case, target, inputs, isolate=False)
            run_kernel(case, target, inputs, isolate=True)
        for _ in range(calls):
            for iso in (False, True):
                t0 = time.perf_counter()
                _, err = run_kernel(case, target, inputs, isolate=iso)
                times[iso].append(time.perf_counter() - t0)
                assert err is None, err
        here, there = statistics.median(times[False]), statistics.median(times[True])
        rows.append({"what": f"run_kernel {target.name} {case.op} {case.params}",
                     "input_bytes_f64": sum(v.nbytes for v in inputs.values()),
                     "in_process_ms": round(1e3 * here, 3), "isolated_ms": round(1e3 * there, 3),
                     "overhead_ms": round(1e3 * (there - here), 3), "first_load_s": round(load, 3)})
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--calls", type=int, default=200)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    reason = _cupy()
    if reason is not None:
        raise SystemExit(f"needs CuPy and a GPU: {reason}")
    meta = {"command": " ".join([Path(sys.executable).name, *sys.argv]),
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                        "python": platform.python_version()},
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    store = args.out / "repros"
    result: dict[str, Any] = {"meta": meta}
    result["overhead"] = overhead(args.calls)  # first: before any fault touched the context
    result["faults"] = fault_rows(store)
    result["sanitizer"] = sanitizer_rows(store, args.out)
    # last: an illegal address in-process leaves this process's CUDA context unusable
    result["faults"] += fault_rows(store, in_process_illegal=True)
    (args.out / "isolation_gpu.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"written: {args.out}/isolation_gpu.json")


if __name__ == "__main__":
    main()
