"""``mistakes``: mistakes a new user makes with the CLI and foreign targets, each
made in a fresh process, and what numoracle answers.

    python -m benchmarks mistakes [--only TEXT] [--out FILE.json]

Each mistake (a damaged repro replayed, shrink given bad arrays or a kernel that
cannot be loaded, a report into a file, a store that does not exist, a C kernel
with ``size_t`` dimensions, ``isolate=True`` in a script without a ``__main__``
guard, a hung in-process call) runs in a temporary folder with the ``numoracle``
on ``PYTHONPATH``. One row each: the mistake, the command, the exit status, the
answer's first line (stderr, else stdout), its last line, the seconds; written to
``--out`` (``--only``: the mistakes whose description holds the text). The
repros are damaged by :mod:`benchmarks.damaged`, as the clean-error tests damage
theirs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks.damaged import damage, kernels_source
from benchmarks.record import meta, write_json

C_SIZE_T = r'''
#include <stddef.h>
void matmul_size_t(const float *a, const float *b, float *out, size_t batch, size_t m,
                   size_t k, size_t n) {
    for (size_t t = 0; t < batch; t++)
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                float s = 0.0f;
                for (size_t p = 0; p < k; p++)
                    s += a[(t * m + i) * k + p] * b[(t * k + p) * n + j];
                out[(t * m + i) * n + j] = s;
            }
}
'''

UNGUARDED = '''
import sys
from numoracle.foreign import run, shared_library_target
t = shared_library_target(sys.argv[1], "matmul_size_t", op="matmul",
                          args=["a", "b", "out", "prod(batch_shape):int64", "m:int64",
                                "k:int64", "n:int64"],
                          precision="fp32", isolate=True, spec_dir=sys.argv[2])
res = run(t, examples=5, store=sys.argv[2] + "/repros")
print(res.verdict, res.diagnosis)
'''

SIZE_T_DEFAULT = '''
import sys
from numoracle.foreign import run, shared_library_target
if __name__ == "__main__":
    t = shared_library_target(sys.argv[1], "matmul_size_t", op="matmul",
                              args=["a", "b", "out", "prod(batch_shape)", "m", "k", "n"],
                              precision="fp32", spec_dir=sys.argv[2])
    res = run(t, examples=5, store=sys.argv[2] + "/repros")
    print(res.verdict, res.diagnosis)
'''

UNGUARDED_PYTHON = '''
import numpy as np
import numoracle

def good(a, b):
    return {"out": np.matmul(a, b)}

res = numoracle.check_kernel(good, op="matmul", examples=3, store=None, isolate=True,
                             max_elements=16)
print(res.verdict)
'''

HUNG = '''
import time
from numoracle import check_kernel

def spin(x, weight, grad_output, bias=None):
    while True:
        pass

def good(x, weight, grad_output, bias=None):
    y = x @ weight.T + (0 if bias is None else bias)
    out = {"y": y, "grad_input": grad_output @ weight, "grad_weight": grad_output.T @ x}
    if bias is not None:
        out["grad_bias"] = grad_output.sum(0)
    return out

if __name__ == "__main__":
    t0 = time.perf_counter()
    check_kernel(good, op="linear", examples=30, store=None, isolate=False)
    before = time.perf_counter() - t0
    try:
        check_kernel(spin, op="linear", examples=1, store=None, isolate=False, timeout=1.0)
    except AssertionError:
        pass
    t0 = time.perf_counter()
    check_kernel(good, op="linear", examples=30, store=None, isolate=False)
    after = time.perf_counter() - t0
    print(f"30 cases of a correct kernel: {before:.2f} s before a hung call, "
          f"{after:.2f} s after it ({after / before:.1f}x)")
'''


def _run(argv: list[str], cwd: Path, timeout: float = 300) -> dict[str, object]:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False, env={**os.environ, "COLUMNS": "200"})
    err = [ln for ln in done.stderr.splitlines() if ln.strip()]
    out = [ln for ln in done.stdout.splitlines() if ln.strip()]
    lines = err or out
    return {"exit": done.returncode, "first": lines[0][:300] if lines else "",
            "last": lines[-1][:300] if lines else "",
            "stdout_last": out[-1][:300] if out else "",
            "seconds": round(time.perf_counter() - t0, 2)}


def mistakes(out: Path, only: str, argv: Sequence[str]) -> int:
    """Make every mistake whose description holds ``only``; write the rows to ``out``."""
    root = Path(tempfile.mkdtemp(prefix="numoracle-mistakes-"))
    nm = ["-m", "numoracle"]
    rows: list[dict[str, object]] = []

    def row(mistake: str, argv: list[str], **kw: float) -> dict[str, object]:
        if only not in mistake:
            return {}
        r = {"mistake": mistake, "command": " ".join(argv), **_run(argv, root, **kw)}
        rows.append(r)
        print(json.dumps(r), flush=True)
        return r

    for name in ("bias_twice", "stale_after_three"):
        (root / name).mkdir()
        (root / name / "kern.py").write_text(kernels_source([name]))
    store = root / "store"
    # a stored repro to break in several ways
    _run([*nm, "zoo", "--zoo", "bias_twice", "--ops", "linear", "--store", str(store),
          "--examples", "20"], root)
    row("(setup) a run that stores repros", [*nm, "store", "list", "--store", str(store)])
    folders = sorted(p for p in store.iterdir() if (p / "repro.json").is_file()) \
        if store.is_dir() else []
    if folders:
        good = folders[0]
        for how, mistake in (
                ("corrupt_json", "replay a corrupt repro.json"),
                ("npz_gone", "replay a repro whose arrays.npz is gone"),
                ("empty_json", "replay a repro.json without its keys"),
                ("corrupt_npz", "replay a repro whose arrays.npz is corrupt"),
                ("source_gone", "replay a repro whose kernel file was deleted"),
                ("npz_and_source_gone",
                 "replay a repro whose arrays.npz and kernel file are gone")):
            if only in mistake:
                row(mistake, [*nm, "replay", str(damage(good, root / how, how))])
    row("replay a path that does not exist", [*nm, "replay", str(root / "nowhere")])
    # the stateful bug: stored by a run, replayed in a fresh process
    st_store = root / "stateful"
    _run([*nm, "zoo", "--zoo", "stale_after_three", "--ops", "linear", "--store",
          str(st_store), "--examples", "20"], root)
    st = sorted(p for p in st_store.iterdir() if (p / "repro.json").is_file()) \
        if st_store.is_dir() else []
    if st:
        row("replay a stateful bug's repro in a fresh process", [*nm, "replay", str(st[0])])
    row("replay --all of a store that does not exist",
        [*nm, "replay", "--all", "--store", str(root / "nostore")])
    # shrink
    (root / "not.npz").write_text("hello")
    kern = ["--target", "bias_twice", "--source", "bias_twice/kern.py"]
    row("shrink a file that is not an .npz", [*nm, "shrink", "not.npz", "--op", "linear", *kern])
    bad_npy = root / "bad_npy"
    bad_npy.mkdir()
    np.save(bad_npy / "x.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    np.save(bad_npy / "weight.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    row("shrink a folder of bad .npy files", [*nm, "shrink", "bad_npy", "--op", "linear", *kern])
    np.savez(root / "good.npz", x=np.ones((2, 3)), weight=np.ones((4, 3)),
             grad_output=np.ones((2, 4)))
    row("shrink --fn nomodule:f", [*nm, "shrink", "good.npz", "--op", "linear", "--fn",
                                   "nomodule:f"])
    row("shrink --fn FILE.py:nothing", [*nm, "shrink", "good.npz", "--op", "linear", "--fn",
                                        "bias_twice/kern.py:nothing"])
    row("shrink arrays that do not exist",
        [*nm, "shrink", "missing.npz", "--op", "linear", *kern])
    np.savez(root / "wrong_names.npz", a=np.ones((2, 3)))
    row("shrink an .npz whose names are not the op's inputs",
        [*nm, "shrink", "wrong_names.npz", "--op", "linear", *kern])
    row("shrink --spec of a file that does not exist",
        [*nm, "shrink", "good.npz", "--op", "linear", "--spec", "nospec.json"])
    row("shrink --source of a file that does not exist",
        [*nm, "shrink", "good.npz", "--op", "linear", "--target", "t", "--source", "nofile.py"])
    # run --report
    (root / "report.txt").write_text("a file")
    row("run --report FILE (an existing file)",
        [*nm, "run", "--targets", "numpy-fp32", "--ops", "conv2d", "--examples", "5",
         "--budget", "60", "--report", "report.txt"])
    # store
    row("store list --store /nonexistent", [*nm, "store", "list", "--store", "/nonexistent"])
    row("store prune --fixed --store /nonexistent",
        [*nm, "store", "prune", "--fixed", "--store", "/nonexistent"])
    (root / "afile").write_text("x")
    row("store list --store FILE", [*nm, "store", "list", "--store", "afile"])
    # foreign calls
    cc = shutil.which("gcc")
    if cc:
        (root / "k.c").write_text(C_SIZE_T)
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "k.c", "-o", "libk.so"], cwd=root,
                       check=True)
        (root / "unguarded.py").write_text(UNGUARDED)
        row("isolate=True in a script without a __main__ guard (correct kernel)",
            ["unguarded.py", str(root / "libk.so"), str(root / "u")])
        (root / "size_t.py").write_text(SIZE_T_DEFAULT)
        row("a C kernel with size_t dimensions, spec at the int32 default",
            ["size_t.py", str(root / "libk.so"), str(root / "s")])
    (root / "unguarded_python.py").write_text(UNGUARDED_PYTHON)
    row("isolate=True for a Python kernel in a script without a __main__ guard",
        ["unguarded_python.py"])
    (root / "hung.py").write_text(HUNG)
    row("a hung in-process call, then a correct kernel", ["hung.py"], timeout=600)
    write_json(out, {"meta": meta(argv), "python": sys.version.split()[0], "rows": rows})
    shutil.rmtree(root, ignore_errors=True)
    return 0


def _run_command(args: argparse.Namespace) -> int:
    return mistakes(Path(args.out), args.only, args.argv)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``mistakes`` to the harness's subcommands."""
    ap = sub.add_parser("mistakes", aliases=["foreign-mistakes"],
                        help="mistakes a new user makes with the CLI and foreign targets, each "
                             "in a fresh process: what numoracle answers")
    ap.add_argument("--only", default="", help="only the mistakes whose description holds this")
    ap.add_argument("--out", default="benchmarks/results/cpu/foreign/mistakes.json",
                    help="the JSON of rows (benchmarks/results/cpu/foreign/mistakes.json)")
    ap.set_defaults(func=_run_command)
