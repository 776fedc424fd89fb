"""The store under pytest-xdist: two workers checking kernels of the same names
at once, one worker killed mid-run; every repro saved once and replayable, and
the later checks of a name replay its stored repro first.
(benchmarks/results/cpu/store/ records the same with 8 workers and two zoo runs.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from numoracle.checking.replay import replay
from numoracle.store.repro import load_repro
from numoracle.store.store import entries

pytest.importorskip("xdist")

TESTS = '''
import os
import signal

import numoracle


def _kernel(bug):
    def kernel(x, weight, grad_output, bias=None):
        y = x @ weight.T + (0 if bias is None else (2 if bug == "bias" else 1) * bias)
        gi = grad_output @ weight * (0.5 if bug == "half" else 1)
        out = {"y": y, "grad_input": gi, "grad_weight": grad_output.T @ x}
        if bias is not None:
            out["grad_bias"] = grad_output.sum(0)
        return out
    return kernel


def test_killed_worker():
    os.kill(os.getpid(), signal.SIGKILL)  # this worker dies; xdist starts another

'''


def _module() -> str:
    lines = [TESTS]
    for i in range(12):
        bug = ("bias", "half", "none")[i % 3]
        lines.append(f"test_{i:02d} = numoracle.validate(op='linear', name='k_{bug}', "
                     f"examples=10, seed={i})(_kernel({bug!r}))")
    return "\n".join(lines) + "\n"


def test_two_workers_one_killed(tmp_path: Path) -> None:
    (tmp_path / "test_gen.py").write_text(_module())
    env = {**os.environ, "COLUMNS": "100", "PYTHONPATH": str(Path(__file__).parents[2])}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-q", "-p", "no:randomly",
                           "-p", "no:cacheprovider", "test_gen.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    out = proc.stdout + proc.stderr
    assert "crashed while running 'test_gen.py::test_killed_worker'" in out, out[-3000:]
    assert "4 passed" in out, out[-3000:]  # the four k_none tests; eight caught, one killed
    store = tmp_path / ".numoracle" / "repros"
    found = entries(store)
    assert {e.target for e in found} == {"k_bias", "k_half"}
    sigs = [json.dumps(e.signature, sort_keys=True) for e in found]
    assert len(sigs) == len(set(sigs))
    for e in found:
        # local functions: found again only in their process; the recorded outputs fail
        assert load_repro(e.path).inputs and not replay(e.path, rerun=False).passed
    assert not list(store.glob(".tmp-*"))
    assert "stored repros replayed first:" in out  # later checks of a name replayed first
