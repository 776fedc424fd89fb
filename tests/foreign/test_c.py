"""The C example: a matmul symbol of a gcc-built .so, checked as a target."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from numoracle.cli import main
from numoracle.foreign import run, shared_library_target
from numoracle.store.repro import load_repro

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

SRC = str(EXAMPLES / "c" / "matmul.c")
ARGS = ["a", "b", "out", "prod(batch_shape)", "m", "k", "n"]


def _lib(build, bug: bool) -> Path:
    flags = ["-DPLANTED_BUG"] if bug else []
    return build("gcc", "-O2", "-shared", "-fPIC", *flags, SRC, "-o", "{out}",
                 out="libmatmul_bug.so" if bug else "libmatmul.so")


def test_correct_c_kernel_passes(build, tmp_path: Path) -> None:
    t = shared_library_target(_lib(build, False), "matmul_f32", op="matmul", args=ARGS,
                              spec_dir=tmp_path)
    res = run(t, examples=40, store=tmp_path / "repros")
    assert res.verdict == "pass", (res.message, res.diagnosis)
    assert res.cases == 40


def test_planted_c_bug_is_caught_shrunk_and_replays(build, tmp_path: Path, shapes_of) -> None:
    t = shared_library_target(_lib(build, True), "matmul_f32", op="matmul", args=ARGS,
                              spec_dir=tmp_path)
    res = run(t, examples=40, store=tmp_path / "repros")
    assert res.verdict == "FAIL"
    m, k = shapes_of(res.repro_shape)["a"]  # the bug needs k > 3: shrunk near (1, 4)
    assert 4 <= k <= 8 and m <= 2
    assert "logic bug" in res.diagnosis
    # the repro records how to rebuild the target, and replay calls the library again
    r = load_repro(res.repro)
    assert r.source is not None and Path(r.source).is_file()
    assert "matmul_f32" in Path(r.source).read_text()
    assert main(["replay", res.repro]) == 1


def test_replay_passes_once_the_library_is_fixed(build, tmp_path: Path) -> None:
    bug = _lib(build, True)
    lib = tmp_path / "libmine.so"
    lib.write_bytes(bug.read_bytes())
    t = shared_library_target(lib, "matmul_f32", op="matmul", args=ARGS, spec_dir=tmp_path)
    res = run(t, examples=40, store=tmp_path / "repros")
    assert res.verdict == "FAIL"
    # fixed and rebuilt in place (a new file: the loaded one stays mapped here);
    # replay in a fresh process, which loads the new library
    lib.unlink()
    lib.write_bytes(_lib(build, False).read_bytes())
    done = subprocess.run([sys.executable, "-m", "numoracle", "replay", res.repro],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("fixed"), done.stdout


@pytest.mark.parametrize("isolate", [False, True])
def test_isolated_call_matches(build, tmp_path: Path, isolate: bool, shapes_of) -> None:
    t = shared_library_target(_lib(build, True), "matmul_f32", op="matmul", args=ARGS,
                              spec_dir=tmp_path, isolate=isolate)
    res = run(t, examples=20, store=None)
    assert res.verdict == "FAIL" and 4 <= shapes_of(res.repro_shape)["a"][1] <= 8


def test_segfault_in_isolation_is_a_failing_verdict(build, tmp_path: Path) -> None:
    t = shared_library_target(_lib(build, False), "matmul_f32_segfault", op="matmul",
                              args=ARGS, spec_dir=tmp_path, isolate=True)
    res = run(t, examples=5, store=tmp_path / "repros")
    assert res.verdict == "FAIL"
    assert "matmul_f32_segfault: the kernel's process died of SIGSEGV" in res.diagnosis
    assert res.repro is not None


def test_whole_target_isolated_by_the_runner(build, tmp_path: Path) -> None:
    # run_target(isolate=True) finds the foreign target again in its worker
    # process through the spec file the target was made with
    t = shared_library_target(_lib(build, False), "matmul_f32_segfault", op="matmul",
                              args=ARGS, spec_dir=tmp_path)
    res = run(t, examples=5, store=None, isolate=True)
    assert res.verdict == "FAIL" and "SIGSEGV" in res.diagnosis


def test_a_c_kernel_against_a_pytorch_reference(build, tmp_path: Path) -> None:
    import torch

    inputs = {"a": ("batch", "m", "k"), "b": ("batch", "k", "n")}
    args = ["a", "b", "out", "batch", "m", "k", "n"]
    good = shared_library_target(_lib(build, False), "matmul_f32", args=args, spec_dir=tmp_path,
                                 reference=torch.matmul, inputs=inputs, op="traced_matmul_c")
    assert run(good, examples=30, store=None).verdict == "pass"
    bad = shared_library_target(_lib(build, True), "matmul_f32", args=args, spec_dir=tmp_path,
                                reference=torch.matmul, inputs=inputs, op="traced_matmul_c")
    assert run(bad, examples=40, store=None).verdict == "FAIL"
