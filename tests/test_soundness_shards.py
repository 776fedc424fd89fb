"""The harness's soundness sweep (``python -m benchmarks sweep``) pools the shards
of a sweep cell honestly: counts add, the worst ratio and the ratios by reduction
length cover every shard, a failing shard's verdict is kept, and a cell is
sharded only while it lacks cases and time is left. The GPU sweeps' tables are
built from these rows."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sweep() -> Any:
    with pytest.MonkeyPatch.context() as mp:  # the harness is a package of the checkout
        if str(ROOT) not in sys.path:
            mp.syspath_prepend(str(ROOT))
        return importlib.import_module("benchmarks.commands.sweep")


def _row(cases: int, failures: int = 0, worst: float = 0.5, det: tuple = (0.1, 0.5),
         seconds: float = 10.0) -> dict[str, Any]:
    status = "fail" if failures else "pass"
    return {"target": "t", "op": "matmul", "status": status, "reason": "", "cases": cases,
            "failures": failures, "unjudged": 0, "worst_ratio": worst,
            "verdict": "FAIL" if failures else "pass", "repro": "r" if failures else None,
            "exact_regime_outputs": 2, "time_s": seconds, "seconds": seconds, "shards": 1,
            "alarms": [{"repro": "r"}] * failures,
            "_buckets": {"2-4": {"det": list(det), "prob": list(det)}}}


def test_pooled_rows_add_counts_and_keep_the_failure(sweep: Any) -> None:
    a, b = _row(300, det=(0.1, 0.2)), _row(200, failures=1, worst=3.0, det=(0.9,))
    pooled = sweep.pool_rows(a, b)
    assert (pooled["cases"], pooled["failures"], pooled["shards"]) == (500, 1, 2)
    assert pooled["worst_ratio"] == 3.0 and pooled["repro"] == "r"
    assert pooled["status"] == "fail" and len(pooled["alarms"]) == 1
    assert pooled["exact_regime_outputs"] == 4 and pooled["seconds"] == 20.0
    stats = sweep.summarise(pooled)["by_reduction"]["2-4"]
    assert stats["outputs"] == 3 and stats["max_det"] == 0.9 and stats["median_det"] == 0.2
    assert sweep.pool_rows(b, a)["repro"] == "r"  # whichever order the shards come in


def test_a_cell_is_sharded_only_while_short_and_in_time(sweep: Any) -> None:
    a = argparse.Namespace(seconds=60.0, deadline=470.0, jobs=12)
    slow = _row(100, seconds=60.0)  # 100 cases a minute: 1,900 more need 19 shards
    assert sweep._shards_needed(slow, slow, a, 2000, elapsed=70.0) == 12  # capped by jobs
    fast = _row(1500, seconds=60.0)
    assert sweep._shards_needed(fast, fast, a, 2000, elapsed=70.0) == 1
    assert sweep._shards_needed(fast, fast, a, 1500, elapsed=70.0) == 0  # goal reached
    assert sweep._shards_needed(slow, slow, a, 2000, elapsed=460.0) == 0  # no time left
    assert sweep._shards_needed(slow, _row(0), a, 2000, elapsed=70.0) == 0  # judged nothing
    no_cap = argparse.Namespace(seconds=None, deadline=None, jobs=12)
    assert sweep._shards_needed(slow, slow, no_cap, 2000, elapsed=70.0) == 0


def test_running_shards_count_towards_the_goal(sweep: Any) -> None:
    a = argparse.Namespace(seconds=60.0, deadline=470.0, jobs=12)
    done = _row(100, seconds=60.0)  # one shard in: 100 cases a minute
    assert sweep._next_shards(done, done, a, 500, pending=0, elapsed=70.0) == [100] * 4
    # four shards still run, asked for 100 each: nothing more is started
    assert sweep._next_shards(done, done, a, 500, pending=400, elapsed=70.0) == []
    assert sweep._next_shards(done, done, a, 500, pending=300, elapsed=70.0) == [100]


def test_workers_take_the_gpus_in_turn(sweep: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing as mp
    import os

    counter = mp.get_context("spawn").Value("i", 0)
    seen = []
    for _ in range(5):
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        sweep._pin_gpu(counter, 2)
        seen.append(os.environ["CUDA_VISIBLE_DEVICES"])
    assert seen == ["0", "1", "0", "1", "0"]


def test_workers_keep_to_the_visible_gpus(sweep: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing as mp
    import os

    counter = mp.get_context("spawn").Value("i", 0)
    seen = []
    for _ in range(3):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
        sweep._pin_gpu(counter, 2)
        seen.append(os.environ["CUDA_VISIBLE_DEVICES"])
    assert seen == ["2", "3", "2"]
