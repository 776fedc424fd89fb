"""Clear statuses: report rows pass/fail/skipped/unjudged, zoo rows
caught/missed/skipped with the reason; the zoo table within 100 columns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from numoracle.cli import main
from numoracle.running.runner import TargetResult

MUTANTS = '''
from numoracle.targets.target import Target
from numoracle.oracle.precision import get_model

def caught_one(x, weight, grad_output, bias=None):
    """y has its bias added twice."""
    y = x @ weight.T + (0 if bias is None else 2 * bias)
    out = {"y": y, "grad_input": grad_output @ weight, "grad_weight": grad_output.T @ x}
    if bias is not None:
        out["grad_bias"] = grad_output.sum(0)
    return out

def missed_one(x, weight, grad_output, bias=None):
    """A correct layer: the zoo misses it."""
    y = x @ weight.T + (0 if bias is None else bias)
    out = {"y": y, "grad_input": grad_output @ weight, "grad_weight": grad_output.T @ x}
    if bias is not None:
        out["grad_bias"] = grad_output.sum(0)
    return out

def _t(name, fn, available=lambda: None):
    return Target(name=name, op="linear", backend="numpy", precision=get_model("fp32"), fn=fn,
                  available=available, source=__file__)

TARGETS = [_t("a_mutant_with_a_rather_long_name_caught", caught_one),
           _t("missed_one", missed_one),
           _t("gpu_only_mutant", caught_one, lambda: "cupy is not installed")]
'''


def test_report_statuses() -> None:
    r = TargetResult("t", "linear", "fp32", cases=5)
    assert (r.row()["status"], r.row()["reason"]) == ("pass", "")
    r.verdict, r.diagnosis = "FAIL", "y: a logic bug"
    assert (r.row()["status"], r.row()["reason"]) == ("fail", "y: a logic bug")
    r.verdict, r.diagnosis = "skipped", "no CUDA device"
    assert r.row()["status"] == "skipped" and r.row()["reason"] == "no CUDA device"
    empty = TargetResult("t", "linear", "fp32")  # ran, but no case within the budget
    assert empty.row()["status"] == "unjudged" and "time budget" in empty.row()["reason"]
    empty = TargetResult("t", "linear", "fp32", unjudged=3, unjudged_reason="the GPU ran out")
    assert empty.row()["status"] == "unjudged" and "no case was judged" in empty.row()["reason"]
    assert "3 drawn cases" in empty.row()["reason"] and "the GPU ran out" in empty.row()["reason"]
    r.verdict, r.diagnosis = "error", "FlakyFailure: ..."
    assert r.row()["status"] == "unjudged"


def test_zoo_rows_say_caught_missed_or_skipped(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    (zoo / "mutants.py").write_text(MUTANTS)
    status = main(["zoo", "--zoo", str(zoo), "--ops", "linear", "--examples", "30",
                   "--report", str(tmp_path / "rep"), "--store", str(tmp_path / "store")])
    out = capsys.readouterr().out
    assert status == 1  # one missed
    rows = {r["mutant"]: r for r in json.loads((tmp_path / "rep" / "zoo.json").read_text())}
    caught = rows["a_mutant_with_a_rather_long_name_caught"]
    assert caught["status"] == "caught" and "logic bug" in caught["reason"]
    assert rows["missed_one"]["status"] == "missed"
    assert rows["missed_one"]["reason"] == "30 cases passed"
    assert rows["gpu_only_mutant"]["status"] == "skipped"
    assert rows["gpu_only_mutant"]["reason"] == "cupy is not installed"
    table = [line for line in out.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and all(len(line) <= 100 for line in table)
    assert any("a_mutant_with_a_rather_long_name_caught" in line for line in table)  # not cut
    # the diagnosis is below the table, one line, not wrapped into the cells
    assert any(line.startswith("a_mutant_with_a_rather_long_name_caught (linear, caught): y:")
               for line in out.splitlines())
    assert "caught 1 of 2 mutants" in out
