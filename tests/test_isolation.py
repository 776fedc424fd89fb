"""Hostile kernels cannot take the run down: the fault table.

Each misbehaviour gets a failing verdict that says what happened (and a repro),
and the run goes on: the next check in the same process passes. Crashes are
tried only isolated (in-process they would end pytest); hangs both ways.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import find

import numoracle
from numoracle import InvalidArgument, KernelMismatch, Target
from numoracle.cases.case import Case
from numoracle.checking import isolate
from numoracle.checking.check import Fault, run_kernel
from numoracle.cli import main
from numoracle.strategies import cases

pytest_plugins = ["pytester"]

TIMEOUT = 0.5
SMALL = {"max_elements": 64}


# -- kernels (module level, in the checkout's benchmarks package: the isolation benchmark
# checks the same ones, and the worker process imports them by name) -------------------------

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the package beside tests/, importable in spawned workers too
    sys.path.insert(0, str(ROOT))
hostile = importlib.import_module("benchmarks.hostile")
good, raises, noise, hangs, busy = (hostile.good, hostile.raises, hostile.noise,
                                    hostile.hangs, hostile.busy)
segfault, aborts, exits, killed = hostile.segfault, hostile.aborts, hostile.exits, hostile.killed
out_of_memory, writes_input, writes_read_only = (hostile.out_of_memory, hostile.writes_input,
                                                 hostile.writes_read_only)
nondeterministic, first_calls_only = hostile.nondeterministic, hostile.first_calls_only


def _check(fn: Any, tmp_path: Path, **kw: Any) -> str:
    """The failure message of check_kernel on ``fn`` (matmul), and that a repro exists."""
    kw.setdefault("timeout", TIMEOUT)
    with pytest.raises(KernelMismatch) as err:
        numoracle.check_kernel(fn, op="matmul", examples=kw.pop("examples", 20),
                               store=tmp_path, **SMALL, **kw)
    message = str(err.value)
    assert any(tmp_path.iterdir()), "no repro saved"
    return message


def _still_works(**kw: Any) -> None:
    """The run goes on: a correct kernel passes in the same process afterwards."""
    assert numoracle.check_kernel(good, op="matmul", examples=5, store=None, **SMALL,
                                  **kw).verdict == "pass"


# -- the fault table ---------------------------------------------------------------------------


@pytest.mark.parametrize(("fn", "isolated", "expected"), [
    (raises, False, "the kernel raised RuntimeError: boom"),
    (raises, True, "the kernel raised RuntimeError: boom"),
    (hostile.returns_list, False, "the kernel returned list; it must return a dict"),
    (noise, True, "out ("),
    (out_of_memory, False, "the kernel raised MemoryError: cannot allocate 1 TiB"),
    (out_of_memory, True, "the kernel raised MemoryError"),
    (writes_input, False, "the kernel wrote to its input 'a' at"),
    (writes_input, True, "the kernel wrote to its input 'a' at"),
    (writes_read_only, False, "the kernel wrote to one of its inputs, which are read-only"),
    (segfault, True, "the kernel's process died of SIGSEGV"),
    (aborts, True, "the kernel's process died of SIGABRT"),
    (exits, True, "the kernel's process exited with code 3"),
    (killed, True, "the kernel's process died of SIGKILL"),
    # found at an edge case (the timeout) or while Hypothesis shrinks (a quarter of it)
    (busy, True, "did not return within the timeout of"),
])
def test_fault_gets_a_verdict_and_the_run_goes_on(fn: Any, isolated: bool, expected: str,
                                                  tmp_path: Path) -> None:
    t0 = time.perf_counter()
    message = _check(fn, tmp_path, isolate=isolated)
    assert expected in message, message
    assert f"numoracle replay {tmp_path}" in message
    _still_works(isolate=isolated)
    assert time.perf_counter() - t0 < 60


def test_a_hang_costs_one_timeout_and_a_bounded_shrink(tmp_path: Path) -> None:
    calls: list[int] = []

    def counted(a: Any, b: Any) -> Any:
        calls.append(1)
        return hangs(a, b)

    message = _check(counted, tmp_path, isolate=False)
    # the first hang at 0.5 s, at most three more at a quarter of it while shrinking:
    # counted, not timed (a busy machine stretches the time, not the count)
    assert "did not return within the timeout of" in message
    assert 1 <= len(calls) <= 4, len(calls)
    _still_works()


def test_nondeterministic_and_stale_kernels_fail(tmp_path: Path) -> None:
    message = _check(nondeterministic, tmp_path / "nd", isolate=True)
    assert "out (" in message
    hostile.CALLS[0] = 0
    message = _check(first_calls_only, tmp_path / "first", isolate=False)
    assert "out (" in message


def test_a_crash_in_the_judged_case_keeps_the_cases_before(tmp_path: Path) -> None:
    from numoracle.running.runner import run_target

    target = Target(name="segfault", op="matmul", backend="numpy", precision="fp32",
                    fn=segfault)
    res = run_target(target, examples=10, store=tmp_path, isolate=True, timeout=TIMEOUT,
                     strategy=cases(op="matmul", storage="fp32", **SMALL))
    assert res.verdict == "FAIL" and res.fault == "crash" and res.unjudged >= 1
    row = res.row()
    assert row["fault"] == "crash" and row["unjudged"] == res.unjudged
    repro = json.loads((Path(res.repro) / "repro.json").read_text())  # type: ignore[arg-type]
    assert "SIGSEGV" in repro["verdict"]["error"]


def test_run_isolated_matches_run_kernel() -> None:
    case = find(cases(op="matmul", storage="fp32", **SMALL), lambda c: True)
    inputs = case.inputs()
    target = Target(name="good", op="matmul", backend="numpy", precision="fp32", fn=good)
    here, e1 = run_kernel(case, target, inputs)
    there, e2 = isolate.run_isolated(case, target, inputs, timeout=30)
    assert e1 is None and e2 is None and here is not None and there is not None
    np.testing.assert_array_equal(here["out"], there["out"])
    eye = np.eye(2, dtype=np.float32)
    result, fault = isolate.call_isolated(good, {"a": eye, "b": 2 * eye}, timeout=30)
    assert fault is None
    np.testing.assert_array_equal(result["out"], 2 * eye)
    _, fault = isolate.call_isolated(os._exit, {"status": 4}, timeout=30)
    assert isinstance(fault, Fault) and fault.kind == "crash" and "code 4" in fault


def test_a_kernel_that_cannot_be_sent_is_refused_at_once() -> None:
    with pytest.raises(InvalidArgument, match="define it at module level"):
        numoracle.check_kernel(lambda a, b: {"out": a @ b}, op="matmul", examples=5,
                               store=None, isolate=True)
    with pytest.raises(InvalidArgument, match="timeout=-1"):
        numoracle.check_kernel(good, op="matmul", examples=5, store=None, timeout=-1)


def test_in_process_hang_does_not_hold_up_exit() -> None:
    """The hung kernel's thread is a daemon: the interpreter exits at once."""
    script = textwrap.dedent("""
        import time, numoracle
        def hangs(a, b):
            time.sleep(3600)
        try:
            numoracle.check_kernel(hangs, op="matmul", examples=3, store=None, timeout=0.2,
                                   max_elements=16)
        except numoracle.KernelMismatch as exc:
            print("verdict:", exc)
    """)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    assert "did not return within the timeout" in done.stdout
    assert time.perf_counter() - t0 < 300  # not the hour the kernel sleeps


ZOO = '''
import ctypes
import numpy as np
from numoracle import Target

def segfault(a, b):
    ctypes.string_at(0)

def good(a, b):
    return {"out": np.matmul(a, b)}

TARGETS = [Target(name=f.__name__, op="matmul", backend="numpy", precision="fp32", fn=f,
                  source=__file__) for f in (segfault, good)]
'''


def test_cli_isolates_outside_kernels_by_default(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "zoo").mkdir()
    (tmp_path / "zoo" / "hostile.py").write_text(ZOO)
    status = main(["zoo", "--zoo", str(tmp_path / "zoo"), "--ops", "matmul", "--examples", "5",
                   "--timeout", "5", "--report", str(tmp_path / "rep"),
                   "--store", str(tmp_path / "store")])
    out = capsys.readouterr().out
    assert status == 1, out  # the good kernel is a mutant the zoo "missed"
    rows = {r["mutant"]: r for r in json.loads((tmp_path / "rep" / "zoo.json").read_text())}
    assert rows["segfault"]["caught"] and "SIGSEGV" in rows["segfault"]["diagnosis"]
    assert not rows["good"]["caught"]  # it ran after the crash, in a fresh worker
    progress = json.loads((tmp_path / "rep" / "progress.json").read_text())
    assert [r["target"] for r in progress] == ["segfault", "good"]


@pytest.mark.gpu
def test_cuda_illegal_address_is_a_verdict_and_the_next_case_runs(tmp_path: Path) -> None:
    cupy = pytest.importorskip("cupy")
    del cupy
    message = _check(_cupy_illegal_address, tmp_path, isolate=True, backend="cupy",
                     timeout=60)
    assert "CUDA error" in message, message
    _still_works(isolate=True)


def _cupy_illegal_address(a: Any, b: Any) -> dict[str, Any]:
    import cupy

    kernel = cupy.RawKernel(r'''
    extern "C" __global__ void bad(float* p) { p[(long long)1 << 40] = 1.0f; }
    ''', "bad")
    out = cupy.matmul(a, b)
    kernel((1,), (1,), (out,))
    return {"out": out}


def test_replay_sanitize_without_the_binary_is_a_clear_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _check(raises, tmp_path / "store")
    repro = next(p for p in (tmp_path / "store").iterdir() if p.is_dir())
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "empty"))
    monkeypatch.setattr("numoracle.cli.replay.Path", _NoCuda)
    assert main(["replay", "--sanitize", "memcheck", str(repro)]) == 2
    assert "needs NVIDIA's compute-sanitizer" in capsys.readouterr().err


class _NoCuda(type(Path())):  # type: ignore[misc]
    """A Path for which /usr/local/cuda/bin/compute-sanitizer does not exist."""

    def is_file(self) -> bool:
        return "compute-sanitizer" not in str(self) and super().is_file()


FAKE_SANITIZER = """#!/bin/sh
# compute-sanitizer --tool T --log-file LOG --error-exitcode N COMMAND...
log=$4; shift 6
printf '========= COMPUTE-SANITIZER\\n========= ERROR SUMMARY: 0 errors\\n' > "$log"
exec "$@"
"""


def test_replay_sanitize_attaches_the_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    _check(raises, tmp_path / "store")
    repro = next(p for p in (tmp_path / "store").iterdir() if p.is_dir())
    fake = tmp_path / "bin" / "compute-sanitizer"
    fake.parent.mkdir()
    fake.write_text(FAKE_SANITIZER)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    assert main(["replay", "--sanitize", "racecheck", str(repro)]) == 1  # it still fails
    out = capsys.readouterr().out
    assert "ERROR SUMMARY: 0 errors" in out and "still fails" in out
    assert "ERROR SUMMARY" in (repro / "sanitizer-racecheck.txt").read_text()


def test_a_stored_crash_replays_isolated(tmp_path: Path) -> None:
    """A check replays its stored repros first: isolated, that replay survives the crash."""
    _check(segfault, tmp_path, isolate=True, examples=3)
    t0 = time.perf_counter()
    message = _check(segfault, tmp_path, isolate=True, examples=3)
    assert "SIGSEGV" in message and "stored repro" in message, message
    assert time.perf_counter() - t0 < 60


PLUGIN_RUN = """
import ctypes
import numpy as np
import numoracle

def segfault(a, b):
    ctypes.string_at(0)

def good(a, b):
    return {"out": np.matmul(a, b)}

def test_segfault():
    numoracle.check_kernel(segfault, op="matmul", examples=3, store=None, max_elements=16)

def test_after():
    numoracle.check_kernel(good, op="matmul", examples=3, store=None, max_elements=16)
"""


def test_plugin_isolates_a_session(pytester: pytest.Pytester) -> None:
    """--numoracle-isolate: the segfault fails its test, the next test runs and passes."""
    pytester.makepyfile(test_hostile=PLUGIN_RUN)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly",
                                           "--numoracle-isolate", "--numoracle-timeout", "20")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*the kernel's process died of SIGSEGV*"])


def spins(a: Any, b: Any) -> dict[str, Any]:
    while True:
        pass


def test_a_hung_in_process_call_is_stopped() -> None:
    """The abandoned thread of a kernel looping in Python stops, so it does not
    keep a core and the GIL busy under the checks that follow."""
    case = Case("matmul", {"batch_shape": (), "m": 2, "k": 2, "n": 2}, family="exact", seed=0)
    target = Target(name="spins", op="matmul", backend="numpy",
                    precision=numoracle.get_model("fp32"), fn=spins)
    # (threads other tests of this process left are not this call's)
    before = {t for t in threading.enumerate() if t.name == "numoracle-kernel"}
    _, fault = run_kernel(case, target, case.inputs(), timeout=TIMEOUT)
    assert isinstance(fault, Fault) and fault.kind == "hang"
    deadline = time.monotonic() + 120  # left at once when it stops
    while time.monotonic() < deadline:
        busy = [t for t in threading.enumerate()
                if t.name == "numoracle-kernel" and t not in before]
        if len(busy) <= 1:  # the fresh idle thread only
            break
        time.sleep(0.05)
    assert len(busy) <= 1, busy
