"""``isolation``: the fault table and the isolated mode's overhead, on the CPU.

For each hostile kernel: ``check_kernel`` (matmul, 20 cases, timeout 0.5 s) in
the mode named, its outcome (the verdict's first line), whether a repro was
saved, the wall time, and whether a correct kernel checked right after, in the
same process, passes (the run goes on). The in-process segfault runs in a child
interpreter, to show what isolation prevents.

Overhead: the median time of one kernel call (``run_kernel``) in-process and
isolated, for small and larger cases of NumPy and torch-CPU targets, the time
of a whole ``check_kernel`` of 100 cases both ways, and a worker's start-up.

    python -m benchmarks isolation [--out benchmarks/results/cpu/isolation]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.hostile import (
    aborts,
    busy,
    exits,
    first_calls_only,
    good,
    good_linear,
    hangs,
    killed,
    nondeterministic,
    out_of_memory,
    raises,
    returns_none,
    segfault,
    writes_input,
    writes_read_only,
)
from benchmarks.record import meta as record_meta

TIMEOUT = 0.5


FAULTS = [
    ("raise", raises, False), ("raise", raises, True),
    ("return garbage (None)", returns_none, False),
    ("hang (sleep)", hangs, False), ("hang (sleep)", hangs, True),
    ("busy loop", busy, True),
    ("segfault", segfault, True), ("abort", aborts, True), ("os._exit(3)", exits, True),
    ("SIGKILL (as the OOM killer)", killed, True),
    ("MemoryError", out_of_memory, False), ("MemoryError", out_of_memory, True),
    ("input written (past read-only)", writes_input, False),
    ("input written (past read-only)", writes_input, True),
    ("input written (read-only view)", writes_read_only, False),
    ("nondeterministic", nondeterministic, True),
    ("correct only for the first 3 calls", first_calls_only, False),
]


def fault_table(store: Path) -> list[dict[str, Any]]:
    import numoracle  # noqa: PLC0415 - after the worker-safe module level

    rows = []
    for i, (name, fn, isolated) in enumerate(FAULTS):
        t0 = time.perf_counter()
        before = set(store.rglob("repro.json"))
        try:  # a store per row: no row replays another's repro first
            numoracle.check_kernel(fn, op="matmul", examples=20, store=store / str(i),
                                   isolate=isolated,
                                   timeout=TIMEOUT, max_elements=64)
            outcome = "PASSED (missed)"
        except numoracle.KernelMismatch as exc:
            lines = str(exc).splitlines()
            outcome = next((ln.strip() for ln in lines[1:] if "the kernel" in ln
                            or ("(" in ln and "|got" in ln)), lines[0])
        wall = time.perf_counter() - t0
        repro = bool(set(store.rglob("repro.json")) - before)
        t1 = time.perf_counter()
        after = numoracle.check_kernel(good, op="matmul", examples=5, store=None,
                                       isolate=isolated, max_elements=64).verdict
        rows.append({"fault": name, "mode": "isolated" if isolated else "in-process",
                     "outcome": outcome, "repro": repro, "wall_s": round(wall, 3),
                     "next_check": after, "next_check_s": round(time.perf_counter() - t1, 3)})
        print(rows[-1], flush=True)
    rows.append(_segfault_in_process())
    print(rows[-1], flush=True)
    return rows


def _segfault_in_process() -> dict[str, Any]:
    script = ("import ctypes, numoracle\n"
              "def seg(a, b):\n    ctypes.string_at(0)\n"
              "numoracle.check_kernel(seg, op='matmul', examples=5, store=None, "
              "isolate=False)\nprint('survived')\n")
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False)
    return {"fault": "segfault", "mode": "in-process",
            "outcome": f"the whole process dies (exit {done.returncode}), no verdict",
            "repro": False, "wall_s": round(time.perf_counter() - t0, 3),
            "next_check": "none (process gone)", "next_check_s": None}


def overhead(calls: int, blocked: bool = False) -> list[dict[str, Any]]:
    from numoracle import Target  # noqa: PLC0415
    from numoracle.cases.case import Case  # noqa: PLC0415
    from numoracle.checking import isolate  # noqa: PLC0415
    from numoracle.checking.check import run_kernel  # noqa: PLC0415

    rows = []
    isolate.shutdown()
    t0 = time.perf_counter()
    isolate.prepare(Target(name="good", op="matmul", backend="numpy", precision="fp32",
                           fn=good))
    startup = time.perf_counter() - t0
    rows.append({"what": "worker start-up (spawn, imports, load a NumPy target)",
                 "seconds": round(startup, 3)})
    configs = [("numpy", "matmul", good, {"batch_shape": (), "m": 4, "k": 4, "n": 4}),
               ("numpy", "matmul", good, {"batch_shape": (8,), "m": 128, "k": 128, "n": 128}),
               ("numpy", "linear", good_linear,
                {"batch": 4, "in_features": 8, "out_features": 8, "bias": True}),
               ("numpy", "linear", good_linear,
                {"batch": 64, "in_features": 512, "out_features": 512, "bias": True})]
    try:
        import torch  # noqa: F401, PLC0415

        configs += [("torch-cpu", "linear", good_linear,
                     {"batch": 4, "in_features": 8, "out_features": 8, "bias": True}),
                    ("torch-cpu", "linear", good_linear,
                     {"batch": 64, "in_features": 512, "out_features": 512, "bias": True})]
    except ImportError:
        pass
    for backend, op, fn, params in configs:
        target = Target(name=fn.__name__, op=op, backend=backend, precision="fp32", fn=fn)
        case = Case(op=op, params=params, storage="fp32", family="normal", seed=0)
        inputs = case.inputs()
        t0 = time.perf_counter()
        isolate.prepare(target)
        load = time.perf_counter() - t0
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(3):  # warm-up both ways
            run_kernel(case, target, inputs, isolate=False)
            run_kernel(case, target, inputs, isolate=True)
        order = ([False] * calls + [True] * calls if blocked  # all in-process calls first
                 else [False, True] * calls)  # interleaved: load changes hit both alike
        for iso in order:
            t0 = time.perf_counter()
            _, err = run_kernel(case, target, inputs, isolate=iso)
            times[iso].append(time.perf_counter() - t0)
            assert err is None, err
        here, there = statistics.median(times[False]), statistics.median(times[True])
        size = sum(v.nbytes for v in inputs.values())
        rows.append({"what": f"run_kernel {backend} {op} {params}", "input_bytes_f64": size,
                     "in_process_ms": round(1e3 * here, 3), "isolated_ms": round(1e3 * there, 3),
                     "overhead_ms": round(1e3 * (there - here), 3),
                     "min_in_process_ms": round(1e3 * min(times[False]), 3),
                     "min_isolated_ms": round(1e3 * min(times[True]), 3),
                     "min_overhead_ms": round(1e3 * (min(times[True]) - min(times[False])), 3),
                     "first_load_s": round(load, 3)})
        print(rows[-1], flush=True)
    import numoracle  # noqa: PLC0415

    for iso in (False, True):
        t0 = time.perf_counter()
        numoracle.check_kernel(good, op="matmul", examples=100, store=None, isolate=iso)
        mode = "isolated" if iso else "in-process"
        rows.append({"what": f"check_kernel matmul 100 cases, {mode}",
                     "seconds": round(time.perf_counter() - t0, 3)})
        print(rows[-1], flush=True)
    return rows


def machine() -> dict[str, Any]:
    return {"platform": platform.platform(), "python": platform.python_version(),
            "cpus": os.cpu_count(), "processor": platform.processor(),
            "load_average": os.getloadavg(), "numpy": np.__version__}


def markdown(faults: list[dict[str, Any]], over: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    out = ["# Isolation: fault table and overhead (CPU)", "",
           f"command: `{meta['command']}`  ", f"machine: {meta['machine']}  ",
           f"date: {meta['date']}", "",
           "## Fault table (check_kernel, matmul, 20 cases, timeout 0.5 s)", "",
           "| fault | mode | outcome | repro | wall s | next check |", "|---|---|---|---|---|---|"]
    for r in faults:
        out.append(f"| {r['fault']} | {r['mode']} | {r['outcome'].replace('|', '/')} | "
                   f"{'yes' if r['repro'] else 'no'} | {r['wall_s']} | {r['next_check']} |")
    out += ["", "## Overhead of the isolated mode", "",
            "medians (and minima) of interleaved calls; seconds: start-up, first load or the "
            "whole check", "",
            "| what | in-process ms | isolated ms | overhead ms | min overhead ms | seconds |",
            "|---|---|---|---|---|---|"]
    for r in over:
        out.append(f"| {r['what']} | {r.get('in_process_ms', '')} | {r.get('isolated_ms', '')} | "
                   f"{r.get('overhead_ms', '')} | {r.get('min_overhead_ms', '')} | "
                   f"{r.get('seconds', r.get('first_load_s', ''))} |")
    return "\n".join(out) + "\n"


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``isolation`` to the harness's subcommands."""
    p = sub.add_parser("isolation", help="hostile kernels (crash, hang, exit, write to an "
                                         "input) in-process and isolated; isolation's overhead")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/cpu/isolation"))
    p.add_argument("--calls", type=int, default=200, help="timed calls per overhead row")
    p.add_argument("--overhead-only", action="store_true",
                   help="skip the fault table (keep the one OUT holds)")
    p.add_argument("--blocked", action="store_true",
                   help="time all in-process calls, then all isolated ones (the thread pools "
                        "of two processes do not then spin against each other)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Make the fault table and time the overhead; writes isolation.json and .md."""
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {**record_meta(args.argv), "machine": machine()}
    if args.overhead_only:
        old = json.loads((args.out / "isolation.json").read_text())
        faults = old["faults"]
        meta["fault_table_from"] = old["meta"]
    else:
        with tempfile.TemporaryDirectory() as tmp:
            faults = fault_table(Path(tmp))
    over = overhead(args.calls, args.blocked)
    meta["order"] = "blocked" if args.blocked else "interleaved"
    meta["load_average_after"] = os.getloadavg()
    (args.out / "isolation.json").write_text(json.dumps(
        {"meta": meta, "faults": faults, "overhead": over}, indent=2) + "\n")
    (args.out / "isolation.md").write_text(markdown(faults, over, meta))
    print(f"written: {args.out}/isolation.json, isolation.md")
    return 0
