"""The run's plan: every row judged within its share, no case started that
would outlast it, shrinking within its cap, the same per-row results in one
process and in several, and an honest ending on the command line."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from numoracle.targets.target import Target
from numoracle.cli import main
from numoracle.kernels import get_target
from numoracle.oracle.precision import get_model
from numoracle.running.draws import CHUNK, case_digest
from numoracle.running.pool import (
    OwnDraws,
    _deal,
    _driver_modules,
    _portable,
    default_jobs,
    run_pool,
)
from numoracle.running.runner import TargetResult, run_target
from numoracle.running.schedule import (
    Row,
    RunDraws,
    RunSettings,
    block_sizes,
    judge_rows,
    totals_line,
    warm_up,
)
from numoracle.zoo.linear import bias_added_twice


def sleepy(seconds: float) -> Target:
    """numpy's matmul, ``seconds`` slower a call."""
    def fn(a: Any, b: Any) -> dict[str, Any]:
        time.sleep(seconds)
        return {"out": np.matmul(a, b)}

    return Target(name=f"sleeps-{seconds:g}", op="matmul", backend="numpy",
                  precision=get_model("fp32"), fn=fn)


def test_a_case_that_would_outlast_the_share_is_not_started(tmp_path: Path) -> None:
    rows, settings = [Row(sleepy(0.6), asked=50)], RunSettings(min_cases=5, store=tmp_path)
    warm_up(rows, settings)
    t0 = time.monotonic()
    [res] = judge_rows(rows, 1.0, settings)
    took = time.monotonic() - t0
    # the first case always runs; the second would end past the second: not started
    assert res.cases == 1 and res.asked == 50 and res.status()[0] == "pass"
    assert took < 1.0 + 10 * 0.6, took  # far below the 30 s of every case, on a busy machine


def test_a_slow_row_does_not_starve_the_others(tmp_path: Path) -> None:
    rows = [Row(sleepy(0.3), asked=40), Row(get_target("numpy-fp32", "matmul"), asked=40)]
    settings = RunSettings(min_cases=3, store=tmp_path)
    warm_up(rows, settings)
    t0 = time.monotonic()
    slow, fast = judge_rows(rows, 2.0, settings)
    took = time.monotonic() - t0
    assert slow.cases >= 1 and fast.cases >= 3, (slow.cases, fast.cases)
    assert slow.cases < 40  # its share ran out long before its cases
    assert took < 2.0 + 10 * 0.3, took  # far below the 12 s of every slow case


def test_rows_left_without_time_are_unjudged_not_passed(tmp_path: Path) -> None:
    rows = [Row(sleepy(0.3), asked=5), Row(get_target("numpy-fp32", "matmul"), asked=5)]
    settings = RunSettings(min_cases=5, store=tmp_path)
    warm_up(rows, settings)
    first, second = judge_rows(rows, 0.1, settings)
    assert first.cases >= 1 and first.status()[0] == "pass"
    assert second.cases == 0 and second.status()[0] == "unjudged"
    line = totals_line([first, second])
    assert line.startswith("rows: 1 passed (1 STARVED: fewer than 20 cases each")
    assert "0 failed, 0 skipped, 1 unjudged" in line


def test_rows_below_the_floor_are_flagged_starved() -> None:
    thin = TargetResult("a", "matmul", "fp32", cases=13, asked=2000)
    full = TargetResult("b", "matmul", "fp32", cases=25, asked=2000)
    few_asked = TargetResult("c", "matmul", "fp32", cases=5, asked=5)
    failed = TargetResult("d", "matmul", "fp32", cases=2, asked=2000, verdict="FAIL")
    line = totals_line([thin, full, few_asked, failed], min_cases=20)
    assert line.startswith("rows: 3 passed (1 STARVED: fewer than 20 cases each")
    assert "STARVED" not in totals_line([full, few_asked, failed], min_cases=20)



def test_shrinking_stops_at_its_cap_and_says_so(tmp_path: Path) -> None:
    t = Target(name="bias-twice", op="linear", backend="numpy", precision=get_model("fp32"),
               fn=bias_added_twice)
    res = run_target(t, examples=50, store=tmp_path, shrink_seconds=0.0)
    assert res.verdict == "FAIL" and res.repro
    assert "shrinking stopped at its cap of 0 s" in res.diagnosis
    shrunk = run_target(t, examples=50, store=tmp_path)
    assert "cap" not in shrunk.diagnosis


def _same(rows: list[TargetResult]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.row().items() if k not in ("time_s", "repro")} for r in rows]


@pytest.mark.slow
def test_workers_judge_the_cases_and_give_the_results_of_one_process(tmp_path: Path) -> None:
    rows = [Row(get_target("numpy-fp32", "matmul"), asked=60),
            Row(get_target("numpy-fp32", "linear"), asked=7)]
    settings = RunSettings(seed=3, min_cases=3, store=tmp_path)
    judged_here: dict[int, list[str]] = {}
    here = judge_rows(rows, None, settings, on_case=lambda k, v: judged_here.setdefault(
        k, []).append(case_digest(v.case)))
    judged_there: dict[int, list[str]] = {}
    there, warm, _warm_s, _judge_s = run_pool(rows, None, settings, 2, judged=judged_there)
    assert set(warm) == {"numpy-fp32 matmul", "numpy-fp32 linear"}
    # blocks of 1, 2 and 57 cases (three chunks, drawn in each worker's own draw
    # process) and of 1, 2 and 4
    assert [r.cases for r in here] == [60, 7]
    assert judged_there == judged_here  # the same cases, in the same order, per row
    assert len(set(judged_here[0][3:])) == 57  # no case twice in a block of several chunks
    assert _same(there) == _same(here)
    assert [r.samples for r in there] == [r.samples for r in here]


def test_rows_are_dealt_by_weight_and_jobs_are_capped() -> None:
    t = get_target("numpy-fp32", "matmul")
    rows = [Row(t, weight=w) for w in (0.7, 0.3, 1.0, 1.0)]
    hands = _deal(rows, 2)
    assert sorted(k for h in hands for k in h) == [0, 1, 2, 3]
    loads = [sum(rows[k].weight for k in h) for h in hands]
    assert max(loads) - min(loads) <= 0.7
    assert default_jobs(1) == 1 and default_jobs(10_000) >= 1


def test_run_says_its_totals_and_exits_1_when_rows_are_unjudged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    status = main(["run", "--targets", "numpy-fp32", "--ops", "matmul,linear,conv2d",
                   "--budget", "0.01", "-j", "1", "--report", str(tmp_path / "rep"),
                   "--store", str(tmp_path / "store")])
    out = capsys.readouterr().out
    rows = json.loads((tmp_path / "rep" / "report.json").read_text())
    unjudged = [r for r in rows if r["status"] == "unjudged"]
    assert unjudged and status == 1, out
    assert "warm-up (before the clock" in out
    assert f"{len(unjudged)} unjudged" in out and "left unjudged" in out
    assert all(r["asked"] == 2000 for r in rows)
    assert f"0/{rows[-1]['asked']}" in out  # the table says cases got of cases asked


def test_chunks_drawn_ahead_hold_the_cases_drawn_when_asked() -> None:
    rows = [Row(get_target("numpy-fp32", "matmul"), asked=30)]
    settings = RunSettings(seed=4, min_cases=3)
    eager, lazy = RunDraws(rows, settings), RunDraws(rows, settings)
    drawn = 0
    while eager.ahead():  # what a driver does while its workers warm up
        drawn += 1
    assert drawn == 4  # block 0, block 1, and the two chunks of block 2's 27 cases
    for index, j in [(0, 0), (1, 0), (2, 0), (2, 1)]:
        assert eager.chunk(0, index, j) == lazy.chunk(0, index, j)
    assert not eager.ahead()  # nothing asked beyond the block's cases


@pytest.mark.slow
def test_workers_drawing_their_own_cases_judge_those_the_driver_would(tmp_path: Path) -> None:
    rows = [Row(get_target("numpy-fp32", "matmul"), asked=80),
            Row(get_target("numpy-fp32", "linear"), asked=30)]
    settings = RunSettings(seed=5, min_cases=3, store=tmp_path)
    judged_here: dict[int, list[str]] = {}
    judge_rows(rows, None, settings, on_case=lambda k, v: judged_here.setdefault(
        k, []).append(case_digest(v.case)))
    for own in (True, False):  # each worker's own draw process, or the driver
        judged_there: dict[int, list[str]] = {}
        stats: dict[str, Any] = {}
        run_pool(rows, None, settings, 2, judged=judged_there, stats=stats, own_draws=own)
        assert stats["own_draws"] == (2 if own else 0)
        assert (stats["draw_s"] == 0) == own  # the driver drew nothing, or every chunk
        assert judged_there == judged_here


@pytest.mark.slow
def test_chunks_from_a_draw_process_hold_the_cases_drawn_here() -> None:
    rows = [Row(get_target("numpy-fp32", "matmul"), asked=80),
            Row(get_target("numpy-fp32", "linear"), asked=40)]
    settings = RunSettings(seed=6, min_cases=3)
    probe = Row(get_target("numpy-fp32", "conv2d"), asked=30)
    drawer = OwnDraws(_driver_modules(), [_portable(r) for r in rows], _portable(probe),
                      settings)
    try:
        # the probe's chunk: what the driver compares
        assert [case_digest(c) for c in drawer.get(-1, 2, 0)] == [
            case_digest(c) for c in RunDraws([probe], settings).block(0, 2).raw(0)]
        own, alone = RunDraws(rows, settings, raw=drawer.get), RunDraws(rows, settings)
        keys = [(k, i, j) for k in range(2) for i in range(3) for j in range(3)
                if j * CHUNK < block_sizes(rows[k], settings)[i]]
        got = [[case_digest(c) for c in own.chunk(*key)] for key in keys]
        assert got == [[case_digest(c) for c in alone.chunk(*key)] for key in keys]
    finally:
        drawer.close()
    assert not drawer.process.is_alive()
