"""A run's verdict and a row's outcome: enum members in the process, their
strings in what is saved, and saved strings read back as the members."""

from __future__ import annotations

import json

import pytest

from numoracle.checking.diagnosis import FaultKind
from numoracle.errors import InvalidArgument
from numoracle.outcome import Outcome, RunVerdict
from numoracle.running.runner import TargetResult


def _saved(r: TargetResult) -> dict[str, object]:
    """``r``'s report row as ``report.json`` holds it, read back."""
    return json.loads(json.dumps(r.row()))


@pytest.mark.parametrize("verdict", list(RunVerdict))
def test_a_saved_result_round_trips(verdict: RunVerdict) -> None:
    fault = FaultKind.CRASH if verdict is RunVerdict.FAIL else None
    r = TargetResult("k", "matmul", "fp32", cases=3, verdict=verdict, diagnosis="why",
                     fault=fault)
    row = _saved(r)
    assert type(row["verdict"]) is str and type(row["status"]) is str  # strings when saved
    assert row["fault"] == (None if fault is None else "crash")
    back = TargetResult("k", "matmul", "fp32", cases=3, verdict=row["verdict"], diagnosis="why",
                        fault=row["fault"])
    assert back.verdict is verdict and back.fault is fault
    assert back.status() == r.status() and Outcome.read(row["status"]) is r.status()[0]
    assert _saved(back) == row


@pytest.mark.parametrize(("text", "member"), [
    ("pass", RunVerdict.PASS), ("FAIL", RunVerdict.FAIL), ("skipped", RunVerdict.SKIPPED),
    ("error", RunVerdict.ERROR), ("unjudged", RunVerdict.UNJUDGED)])
def test_an_old_saved_verdict_reads_back_as_its_member(text: str, member: RunVerdict) -> None:
    # the strings reports have saved since the first version, unchanged
    assert member.value == text
    r = TargetResult("k", "matmul", "fp32", verdict=text)
    assert r.verdict is member
    r.verdict = RunVerdict.PASS
    r.verdict = text  # assigned later, read back too
    assert r.verdict is member


def test_a_verdict_outside_the_vocabulary_is_refused() -> None:
    with pytest.raises(InvalidArgument, match=r"verdict='fail'.*'FAIL'"):
        TargetResult("k", "matmul", "fp32", verdict="fail")
    r = TargetResult("k", "matmul", "fp32")
    with pytest.raises(InvalidArgument, match="verdict='passed'"):
        r.verdict = "passed"
    assert r.verdict is RunVerdict.PASS


def test_the_run_and_the_row_read_each_other() -> None:
    assert {v: Outcome.read(v) for v in RunVerdict} == {
        RunVerdict.PASS: Outcome.PASS, RunVerdict.FAIL: Outcome.FAIL,
        RunVerdict.SKIPPED: Outcome.SKIPPED, RunVerdict.ERROR: Outcome.UNJUDGED,
        RunVerdict.UNJUDGED: Outcome.UNJUDGED}
    assert all(Outcome.read(o.value) is o for o in Outcome)
