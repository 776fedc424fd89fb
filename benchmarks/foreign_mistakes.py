"""Mistakes a new user makes with the CLI and foreign targets, each run in a
fresh process: what numoracle answers (exit status, the first line it prints
on stderr, else on stdout).

Usage: ``python benchmarks/foreign_mistakes.py OUT.json [TEXT]`` from a checkout
(the ``numoracle`` on ``PYTHONPATH`` is the one tried; ``TEXT``: only the mistakes
whose description holds it). Each answer is one row:
the mistake, the exit status, the answer's first line, its last line.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

KERNELS = '''
from numoracle.cases.target import Target
from numoracle.oracle.precision import get_model

CALLS = [0]

def bias_twice(x, weight, grad_output, bias=None):
    y = x @ weight.T + (0 if bias is None else 2 * bias)
    out = {"y": y, "grad_input": grad_output @ weight, "grad_weight": grad_output.T @ x}
    if bias is not None:
        out["grad_bias"] = grad_output.sum(0)
    return out

def stale_after_three(x, weight, grad_output, bias=None):
    """Correct for its first three calls, then y is off by one: a bug only earlier calls show."""
    CALLS[0] += 1
    y = x @ weight.T + (0 if bias is None else bias) + (1.0 if CALLS[0] > 3 else 0.0)
    out = {"y": y, "grad_input": grad_output @ weight, "grad_weight": grad_output.T @ x}
    if bias is not None:
        out["grad_bias"] = grad_output.sum(0)
    return out

def _t(name, fn):
    return Target(name=name, op="linear", backend="numpy", precision=get_model("fp32"), fn=fn,
                  available=lambda: None, source=__file__)

TARGETS = [_t(NAME, globals()[NAME])]
'''

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


def main(out: str, only: str = "") -> None:
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
        (root / name / "kern.py").write_text(f"NAME = {name!r}\n" + KERNELS)
    store = root / "store"
    # a stored repro to break in several ways
    _run([*nm, "zoo", "--zoo", "bias_twice", "--ops", "linear", "--store", str(store),
          "--examples", "20"], root)
    row("(setup) a run that stores repros", [*nm, "store", "list", "--store", str(store)])
    folders = sorted(p for p in store.iterdir() if (p / "repro.json").is_file()) \
        if store.is_dir() else []
    if folders:
        good = folders[0]
        bad_json = root / "bad_json"
        shutil.copytree(good, bad_json)
        (bad_json / "repro.json").write_text('{"case": {"op": "linear", ')
        row("replay a corrupt repro.json", [*nm, "replay", str(bad_json)])
        no_npz = root / "no_npz"
        shutil.copytree(good, no_npz)
        (no_npz / "arrays.npz").unlink()
        row("replay a repro whose arrays.npz is gone", [*nm, "replay", str(no_npz)])
        empty_json = root / "empty_json"
        shutil.copytree(good, empty_json)
        (empty_json / "repro.json").write_text("{}")
        row("replay a repro.json without its keys", [*nm, "replay", str(empty_json)])
        bad_npz = root / "bad_npz"
        shutil.copytree(good, bad_npz)
        (bad_npz / "arrays.npz").write_text("not a zip")
        row("replay a repro whose arrays.npz is corrupt", [*nm, "replay", str(bad_npz)])
        gone_src = root / "gone_src"
        shutil.copytree(good, gone_src)
        meta = json.loads((gone_src / "repro.json").read_text())
        meta["target"]["source"] = str(root / "deleted.py")
        (gone_src / "repro.json").write_text(json.dumps(meta))
        row("replay a repro whose kernel file was deleted", [*nm, "replay", str(gone_src)])
        both = root / "both_gone"
        shutil.copytree(gone_src, both)
        (both / "arrays.npz").unlink()
        row("replay a repro whose arrays.npz and kernel file are gone",
            [*nm, "replay", str(both)])
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
    row("shrink a file that is not an .npz", [*nm, "shrink", "not.npz", "--op", "linear",
                                              "--target", "bias_twice", "--source", "bias_twice/kern.py"])
    bad_npy = root / "bad_npy"
    bad_npy.mkdir()
    np.save(bad_npy / "x.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    np.save(bad_npy / "weight.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    row("shrink a folder of bad .npy files", [*nm, "shrink", "bad_npy", "--op", "linear",
                                              "--target", "bias_twice", "--source", "bias_twice/kern.py"])
    np.savez(root / "good.npz", x=np.ones((2, 3)), weight=np.ones((4, 3)),
             grad_output=np.ones((2, 4)))
    row("shrink --fn nomodule:f", [*nm, "shrink", "good.npz", "--op", "linear", "--fn",
                                   "nomodule:f"])
    row("shrink --fn FILE.py:nothing", [*nm, "shrink", "good.npz", "--op", "linear", "--fn",
                                        "bias_twice/kern.py:nothing"])
    row("shrink arrays that do not exist", [*nm, "shrink", "missing.npz", "--op", "linear",
                                            "--target", "bias_twice", "--source", "bias_twice/kern.py"])
    np.savez(root / "wrong_names.npz", a=np.ones((2, 3)))
    row("shrink an .npz whose names are not the op's inputs",
        [*nm, "shrink", "wrong_names.npz", "--op", "linear", "--target", "bias_twice",
         "--source", "bias_twice/kern.py"])
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
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps({"python": sys.version.split()[0], "rows": rows},
                                    indent=2) + "\n")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
