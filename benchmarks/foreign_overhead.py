"""Foreign targets: overhead per case of each target kind, and every worked
example over many cases (correct version passes, planted bug caught and shrunk).

    python benchmarks/foreign_overhead.py OUT [--cases N] [--examples N]

Overhead: the C matmul kernel (examples/c/matmul.c) called (1) from a Python
target function through hand-written ctypes (the baseline), (2) as a
shared-library target, (3) the same isolated in the worker process, (4) as a
command target once per case and (5) as a persistent command target (a Python
program loading the same .so: examples/command/matmul_program.py). For each:
the median (and mean) time of one kernel call through the target's function
(inputs in, outputs back on the host) and of one whole check_case (oracle
included), on the same fixed cases, each kind in a process of its own.
Writes OUT/overhead.json and OUT/examples.json.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from numoracle.cases.case import Case
from numoracle.cases.target import Target
from numoracle.checking.check import check_case
from numoracle.foreign import command_target, run, shared_library_target

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"
sys.path.insert(0, str(EX))


def build(tmp: Path) -> dict[str, Path]:
    libs = {}
    cmds = {
        "c": ["gcc", "-O2", "-shared", "-fPIC", str(EX / "c" / "matmul.c"), "-o"],
        "c_bug": ["gcc", "-O2", "-shared", "-fPIC", "-DPLANTED_BUG", str(EX / "c" / "matmul.c"),
                  "-o"],
        "fortran": ["gfortran", "-O2", "-shared", "-fPIC", "-J", str(tmp),
                    str(EX / "fortran" / "conv2d.F90"), "-o"],
        "fortran_bug": ["gfortran", "-O2", "-shared", "-fPIC", "-J", str(tmp), "-DPLANTED_BUG",
                        str(EX / "fortran" / "conv2d.F90"), "-o"],
        "fortran_bug_read": ["gfortran", "-O2", "-shared", "-fPIC", "-J", str(tmp),
                             "-DPLANTED_BUG_READ", str(EX / "fortran" / "conv2d.F90"), "-o"],
        "rust": ["rustc", "--edition", "2021", "--crate-type", "cdylib", "-C", "opt-level=2",
                 str(EX / "rust" / "linear.rs"), "-o"],
        "rust_bug": ["rustc", "--edition", "2021", "--crate-type", "cdylib", "-C",
                     "opt-level=2", "--cfg", "planted_bug", str(EX / "rust" / "linear.rs"),
                     "-o"],
    }
    for name, cmd in cmds.items():
        if shutil.which(cmd[0]) is None:
            continue
        out = tmp / f"lib{name}.so"
        subprocess.run([*cmd, str(out)], check=True)
        libs[name] = out
    return libs


def baseline_target(lib: Path) -> Target:
    """The same kernel as a Python target function calling ctypes by hand."""
    func = ctypes.CDLL(str(lib)).matmul_f32
    func.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int32] * 4

    def matmul(a, b):
        a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
        out = np.full(a.shape[:-1] + (b.shape[-1],), np.nan, dtype=np.float32)
        func(a.ctypes.data, b.ctypes.data, out.ctypes.data, math.prod(a.shape[:-2]),
             a.shape[-2], a.shape[-1], b.shape[-1])
        return {"out": out}

    return Target(name="python-ctypes", op="matmul", backend="numpy", precision="fp32",
                  fn=matmul, layouts=("C",))


def _targets(lib: Path, tmp: Path) -> dict:
    args = ["a", "b", "out", "prod(batch_shape)", "m", "k", "n"]
    prog = str(EX / "command" / "matmul_program.py")
    return {
        "python ctypes (baseline)": lambda: baseline_target(lib),
        "shared library": lambda: shared_library_target(lib, "matmul_f32", op="matmul",
                                                        args=args, spec_dir=tmp),
        "shared library, isolated": lambda: shared_library_target(
            lib, "matmul_f32", op="matmul", args=args, spec_dir=tmp, isolate=True),
        "command, once per case": lambda: command_target([sys.executable, prog, str(lib)],
                                                         op="matmul", spec_dir=tmp),
        "command, persistent": lambda: command_target(
            [sys.executable, prog, str(lib), "--persistent"], op="matmul", persistent=True,
            spec_dir=tmp),
    }


def measure_one(label: str, lib: Path, tmp: Path, n: int) -> dict:
    """One target kind in this process alone (no other kind's threads or
    processes about): median and mean per case of the call and of check_case."""
    t = _targets(lib, tmp)[label]()
    if "once" in label:
        n = max(5, n // 10)  # a process start per case
    cases = [Case("matmul", {"m": 16, "k": 16, "n": 16, "batch_shape": ()}, seed=i)
             for i in range(n)]
    inputs = [{k: v.astype(np.float32) for k, v in c.inputs().items()} for c in cases]
    check_case(cases[0], t)  # warm: loads, starts the worker or the program
    call, check = [], []
    for case, inp in zip(cases, inputs, strict=True):
        t0 = time.perf_counter()
        out = t.fn(**inp)
        call.append(time.perf_counter() - t0)
        assert np.isfinite(out["out"]).all()
        t0 = time.perf_counter()
        v = check_case(case, t)
        check.append(time.perf_counter() - t0)
        assert v.passed, label
    return {"call_ms": round(float(np.median(call)) * 1e3, 4),
            "check_case_ms": round(float(np.median(check)) * 1e3, 4),
            "call_mean_ms": round(float(np.mean(call)) * 1e3, 4),
            "check_case_mean_ms": round(float(np.mean(check)) * 1e3, 4), "cases": n}


def overhead(libs: dict[str, Path], tmp: Path, n: int) -> dict:
    rows = {}
    for label in _targets(libs["c"], tmp):  # each kind in a fresh process
        done = subprocess.run([sys.executable, __file__, "--one", label, str(libs["c"]),
                               str(tmp), "--cases", str(n)], capture_output=True, text=True,
                              check=True)
        rows[label] = json.loads(done.stdout.strip().splitlines()[-1])
    base = dict(rows["python ctypes (baseline)"])
    for r in rows.values():
        r["call_overhead_ms"] = round(r["call_ms"] - base["call_ms"], 4)
        r["check_overhead_ms"] = round(r["check_case_ms"] - base["check_case_ms"], 4)
    t0 = time.perf_counter()
    for _ in range(5):
        subprocess.run([sys.executable, "-c", "import numpy"], check=True)
    start = round((time.perf_counter() - t0) / 5 * 1e3, 2)
    return {"case": "matmul m=k=n=16 fp32", "targets": rows,
            "python_start_with_numpy_ms": start}

def examples(libs: dict[str, Path], tmp: Path, n: int, only: str | None = None) -> dict:
    from c.check_matmul import target as c_target  # noqa: PLC0415
    from fortran.check_conv2d import target as f_target  # noqa: PLC0415
    from rust.check_linear import target as r_target  # noqa: PLC0415

    prog = str(EX / "command" / "linear_program.py")
    made = {}
    if "c" in libs:
        made["c matmul"] = (c_target(libs["c"], tmp), c_target(libs["c_bug"], tmp))
    if "fortran" in libs:
        made["fortran conv2d"] = (f_target(libs["fortran"], tmp),
                                  f_target(libs["fortran_bug"], tmp))
        made["fortran conv2d, weights read row-major"] = (
            None, f_target(libs["fortran_bug_read"], tmp))
    if "rust" in libs:
        made["rust linear"] = (r_target(libs["rust"], tmp), r_target(libs["rust_bug"], tmp))
    made["command linear (persistent)"] = (
        command_target([sys.executable, prog, "--persistent"], op="linear", persistent=True,
                       spec_dir=tmp, name="command-linear"),
        command_target([sys.executable, prog, "--persistent", "--bug"], op="linear",
                       persistent=True, spec_dir=tmp, name="command-linear-bug"))
    out = {}
    for label, (good, bad) in made.items():
        if only and only not in label:
            continue
        out[label] = {}
        if good is not None:
            rg = run(good, examples=n, store=None)
            out[label]["correct"] = {"verdict": rg.verdict, "cases": rg.cases,
                                     "worst_ratio": rg.worst_ratio,
                                     "seconds": round(rg.seconds, 1)}
        rb = run(bad, examples=n, store=tmp / "repros")
        out[label] |= {"planted_bug": {"verdict": rb.verdict, "cases_to_catch": rb.cases_to_catch,
                                      "shrunk_shape": rb.repro_shape,
                                      "diagnosis": rb.diagnosis,
                                      "seconds": round(rb.seconds, 1)}}
        print(label, json.dumps(out[label]), flush=True)
    return out


def main() -> None:
    if "--one" in sys.argv:  # python foreign_overhead.py --one LABEL LIB TMP --cases N
        i = sys.argv.index("--one")
        label, lib, tmp = sys.argv[i + 1:i + 4]
        n = int(sys.argv[sys.argv.index("--cases") + 1])
        print(json.dumps(measure_one(label, Path(lib), Path(tmp), n)))
        return
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--cases", type=int, default=200, help="cases per overhead measurement")
    p.add_argument("--examples", type=int, default=200, help="cases per worked example")
    p.add_argument("--skip-examples", action="store_true")
    p.add_argument("--skip-overhead", action="store_true")
    p.add_argument("--only", default=None, metavar="TEXT",
                   help="run only the examples whose label holds TEXT, merged into "
                        "OUT/examples.json")
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    machine = {"python": platform.python_version(), "cpu": platform.processor() or
               platform.machine(), "cores": __import__("os").cpu_count(),
               "command": " ".join(sys.argv)}
    with tempfile.TemporaryDirectory() as tmp:
        libs = build(Path(tmp))
        if not a.skip_overhead:
            ov = overhead(libs, Path(tmp), a.cases)
            print(json.dumps(ov, indent=2), flush=True)
            (a.out / "overhead.json").write_text(json.dumps({"machine": machine, **ov},
                                                            indent=2) + "\n")
        if not a.skip_examples:
            ex = examples(libs, Path(tmp), a.examples, a.only)
            path = a.out / "examples.json"
            if a.only and path.is_file():
                old = json.loads(path.read_text())
                machine = {**old["machine"], "then": machine}
                ex = {**old["examples"], **ex}
            path.write_text(json.dumps({"machine": machine, "examples": ex}, indent=2) + "\n")

if __name__ == "__main__":
    main()
