"""The bug zoo is caught by the default strategies; the correct kernels pass."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from numoracle.checking.replay import replay
from numoracle.kernels import get_target
from numoracle.oracle.ops import OP_GROUPS, OPS
from numoracle.running.runner import run_target
from numoracle.zoo import mutants

MUTANTS = mutants(sorted(OPS))


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda t: f"{t.op}-{t.name}")
def test_default_strategies_catch_the_mutant(mutant, tmp_path: Path) -> None:
    if mutant.unavailable_reason():
        pytest.skip(mutant.unavailable_reason())  # a GPU mutant on a machine without one
    # KAN cases shrink slowly (every step recomputes the B-spline bounds): their
    # mutants are judged unshrunk here; tests/kernels/test_kan_chain_targets.py
    # shrinks the chain mutant, and `numoracle zoo --ops kan` shrinks them all
    shrink = mutant.op not in OP_GROUPS["kan"]
    res = run_target(mutant, examples=200, seed=0, store=tmp_path, shrink=shrink)
    assert res.verdict == "FAIL", f"{mutant.name} was not caught in {res.cases} cases"
    assert res.cases_to_catch is not None and res.cases_to_catch <= 200
    assert res.repro is not None and "numoracle replay" in res.message
    again = replay(res.repro)
    assert not again.passed, "the saved repro does not reproduce the failure"


CORRECT = [("numpy-fp32", "linear"), ("numpy-fp32", "matmul"), ("torch-cpu-fp32", "linear"),
           ("torch-cpu-fp32", "matmul"), ("torch-cpu-bf16", "linear"),
           ("torch-cpu-bf16", "matmul"), ("numpy-fp32", "conv2d"), ("torch-cpu-fp32", "conv2d")]


@pytest.mark.parametrize(("name", "op"), CORRECT)
def test_correct_targets_pass(name: str, op: str, tmp_path: Path) -> None:
    target = get_target(name, op)
    if target.unavailable_reason():
        pytest.skip(target.unavailable_reason())
    res = run_target(target, examples=150, seed=1, store=tmp_path)
    assert res.verdict == "pass", res.message
    assert res.cases == 150 and res.failures == 0
    assert 0 < res.worst_ratio < 1


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600, check=False)


def test_the_zoo_imports_only_the_modules_of_the_ops_asked_for() -> None:
    done = _python("import sys\n"
                   "from numoracle.zoo import mutants, zoo_modules\n"
                   "assert {t.op for t in mutants(['linear'])} == {'linear'}\n"
                   "loaded = sorted(m for m in sys.modules if m.startswith('numoracle.zoo.'))\n"
                   "print(loaded, 'torch' in sys.modules, len(zoo_modules()))")
    assert done.returncode == 0, done.stderr
    loaded, torch_loaded, modules = done.stdout.rsplit(" ", 2)
    assert loaded == "['numoracle.zoo.linear']" and torch_loaded == "False", done.stdout
    assert int(modules) >= 7


def test_numoracle_zoo_runs_where_torch_cannot_be_imported(tmp_path: Path) -> None:
    """torch blocked (as if not installed): the NumPy mutants run and are caught, the
    torch ones are skipped with the reason; nothing crashes."""
    done = _python(
        "import sys\nsys.modules['torch'] = None  # import torch now raises ImportError\n"
        "from numoracle.cli import main\n"
        f"status = main(['zoo', '--ops', 'linear,kan', '--examples', '20', '--store', "
        f"{str(tmp_path / 'store')!r}, '--report', {str(tmp_path / 'rep')!r}])\n"
        "assert 'torch' not in sys.modules or sys.modules['torch'] is None\n"
        "sys.exit(status)")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "skipped the zoo's kan mutants: torch is not installed" in done.stdout
    rows = json.loads((tmp_path / "rep" / "zoo.json").read_text())
    ran = [r for r in rows if r["status"] != "skipped"]
    assert {r["op"] for r in ran} == {"linear"} and all(r["caught"] for r in ran)
    assert {r["op"] for r in rows if r["status"] == "skipped"} == {"kan_chain"}
