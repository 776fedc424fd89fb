"""Foreign calls are crash-safe by default: a CPU shared-library target calls
its symbol in the isolation worker unless told otherwise, a crash is a
failing verdict with a repro, and a script that cannot start the worker (no
``__main__`` guard) is told what to add before any case, never given a
verdict on its kernel."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from numoracle.foreign import run, shared_library_target

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ARGS = ["a", "b", "out", "prod(batch_shape)", "m", "k", "n"]


def _lib(build) -> Path:
    return build("gcc", "-O2", "-shared", "-fPIC", str(EXAMPLES / "c" / "matmul.c"), "-o",
                 "{out}", out="libmatmul.so")


def test_a_cpu_library_is_isolated_unless_told_otherwise(build, tmp_path: Path) -> None:
    lib = _lib(build)
    assert shared_library_target(lib, "matmul_f32", op="matmul", args=ARGS,
                                 spec_dir=tmp_path).fn.isolate
    assert not shared_library_target(lib, "matmul_f32", op="matmul", args=ARGS,
                                     spec_dir=tmp_path, isolate=False).fn.isolate


def test_a_crash_by_default_is_a_failing_verdict_with_a_repro(build, tmp_path: Path) -> None:
    t = shared_library_target(_lib(build), "matmul_f32_segfault", op="matmul", args=ARGS,
                              spec_dir=tmp_path)
    res = run(t, examples=3, store=tmp_path / "repros")
    assert res.verdict == "FAIL" and res.repro is not None
    assert "died of SIGSEGV" in res.diagnosis
    assert "integer width of each dimension" in res.diagnosis  # what to look at in the spec


def test_size_t_dimensions_are_declared(build, tmp_path: Path) -> None:
    """A kernel taking size_t sizes, declared so: passes."""
    src = tmp_path / "k.c"
    src.write_text(textwrap.dedent("""
        #include <stddef.h>
        void mm(const float *a, const float *b, float *out, size_t batch, size_t m,
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
    """))
    lib = build("gcc", "-O2", "-shared", "-fPIC", str(src), "-o", "{out}", out="libsizet.so")
    t = shared_library_target(lib, "mm", op="matmul", spec_dir=tmp_path,
                              args=["a", "b", "out", "prod(batch_shape):size_t", "m:size_t",
                                    "k:size_t", "n:size_t"])
    res = run(t, examples=15, store=None)
    assert res.verdict == "pass", res.message


UNGUARDED = """
import sys
from numoracle.foreign import run, shared_library_target
t = shared_library_target(sys.argv[1], "matmul_f32", op="matmul",
                          args=["a", "b", "out", "prod(batch_shape)", "m", "k", "n"],
                          spec_dir=sys.argv[2])
res = run(t, examples=3, store=sys.argv[2] + "/repros")
print("VERDICT", res.verdict)
"""


def test_a_script_without_a_main_guard_works_for_a_library(build, tmp_path: Path) -> None:
    """The worker of a foreign call needs nothing of the script: it is not re-run."""
    script = tmp_path / "check_it.py"
    script.write_text(UNGUARDED)
    done = subprocess.run([sys.executable, str(script), str(_lib(build)), str(tmp_path)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("VERDICT pass") == 1, done.stdout  # run once, in this process


UNGUARDED_PYTHON = """
import numpy as np
import numoracle

def good(a, b):
    return {"out": np.matmul(a, b)}

res = numoracle.check_kernel(good, op="matmul", examples=3, store=None, isolate=True,
                             max_elements=16)
print("VERDICT", res.verdict)
"""


def test_a_script_without_a_main_guard_is_told_what_to_add(tmp_path: Path) -> None:
    """A kernel defined in the script needs the script in the worker: without
    the guard the worker would start checks of its own; the user is told so
    before any case, and no verdict is given."""
    script = tmp_path / "check_it.py"
    script.write_text(UNGUARDED_PYTHON)
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode != 0
    assert 'if __name__ == "__main__":' in done.stderr and "check_it.py" in done.stderr
    assert "VERDICT" not in done.stdout


def test_the_same_script_with_the_guard_passes(tmp_path: Path) -> None:
    script = tmp_path / "check_it.py"
    head, body = UNGUARDED_PYTHON.split("res = ", 1)
    script.write_text(head + "if __name__ == '__main__':\n" + textwrap.indent("res = " + body,
                                                                            "    "))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "VERDICT pass" in done.stdout
