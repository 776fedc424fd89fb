"""The GPUs of the host: which ones a pool hands out, a worker pool per GPU
with distinct devices (a machine without GPUs stands in for one with two
through ``CUDA_VISIBLE_DEVICES``), GPU rows spread over the GPUs, and a run
that holds its budget when a case overruns."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from numoracle.targets.target import Target
from numoracle.errors import InvalidArgument
from numoracle.kernels import get_target
from numoracle.oracle.precision import get_model
from numoracle.running.devices import gpu_devices, map_on_devices, worker_devices
from numoracle.running.pool import _deal, run_pool
from numoracle.running.schedule import Row, RunSettings, judge_rows


@pytest.mark.parametrize(("env", "count", "devices"), [
    ({"CUDA_VISIBLE_DEVICES": "0,1"}, 0, ("0", "1")),
    ({"CUDA_VISIBLE_DEVICES": "3, 5"}, 8, ("3", "5")),
    ({"CUDA_VISIBLE_DEVICES": "1,-1,2"}, 4, ("1",)),  # CUDA stops at an invalid entry
    ({"CUDA_VISIBLE_DEVICES": ""}, 4, ()),
    ({}, 3, ("0", "1", "2")),
    ({}, 0, ()),
])
def test_gpu_devices_follow_the_visible_devices_else_the_driver(
        env: dict[str, str], count: int, devices: tuple[str, ...]) -> None:
    assert gpu_devices(env, count=lambda: count) == devices


def test_workers_are_spread_round_robin_and_one_gpu_needs_no_pinning() -> None:
    pins = worker_devices(7, ("0", "1", "2"))
    assert [pins.count(d) for d in ("0", "1", "2")] == [3, 2, 2]
    assert worker_devices(3, ("0",)) == [None] * 3
    with pytest.raises(InvalidArgument, match="workers=-1"):
        worker_devices(-1, ("0", "1"))


def _gpu_target(name: str) -> Target:
    return Target(name=name, op="matmul", backend="torch-cuda", precision=get_model("fp32"),
                  fn=lambda a, b: {"out": a @ b})


def test_gpu_rows_are_dealt_evenly_over_the_gpus() -> None:
    cpu = get_target("numpy-fp32", "matmul")
    # the GPU rows weigh less than the CPU ones: dealt by weight alone, they would
    # fill the lightest workers in turn, whatever their GPU
    rows = [Row(cpu, weight=1.0) for _ in range(4)] + \
        [Row(_gpu_target(f"g{i}"), weight=0.3) for i in range(4)]
    pins = worker_devices(4, ("0", "1"))
    hands = _deal(rows, 4, pins)
    assert sorted(k for h in hands for k in h) == list(range(8))
    per_gpu = {d: sum(rows[k].weight for w, h in enumerate(hands) if pins[w] == d for k in h
                      if rows[k].target.on_gpu) for d in ("0", "1")}
    assert per_gpu["0"] == pytest.approx(per_gpu["1"]) == pytest.approx(0.6)


@pytest.mark.slow
def test_a_pool_on_two_gpus_pins_its_workers_to_distinct_ones(tmp_path: Path) -> None:
    rows = [Row(get_target("numpy-fp32", "matmul"), asked=5),
            Row(get_target("numpy-fp32", "linear"), asked=5)]
    stats: dict[str, Any] = {}
    results, *_ = run_pool(rows, 20.0, RunSettings(min_cases=2, store=tmp_path), 2,
                           devices=("0", "1"), stats=stats)
    assert [r.cases for r in results] == [5, 5]
    assert sorted(stats["gpus"]) == ["0", "1"]  # as each worker saw its CUDA_VISIBLE_DEVICES
    assert stats["own_draws"] == 2 and len(stats["worker_wait_s"]) == 2


def _slow_from(call: int, seconds: float) -> Target:
    """numpy's matmul, ``seconds`` slower from its ``call``-th call on."""
    calls = [0]

    def fn(a: Any, b: Any) -> dict[str, Any]:
        calls[0] += 1
        if calls[0] >= call:
            time.sleep(seconds)
        return {"out": np.matmul(a, b)}

    return Target(name=f"slow-from-{call}", op="matmul", backend="numpy",
                  precision=get_model("fp32"), fn=fn)


def test_a_case_running_past_the_budget_and_its_grace_is_cut(tmp_path: Path) -> None:
    # the first cases take no time, so the schedule expects the next to take none;
    # the sixth sleeps 600 s: it is cut at the budget's end (15 s: the first five,
    # warm-up included, fit well within it) plus the grace,
    # far sooner than it would end (the margin is wide for a loaded machine)
    rows = [Row(_slow_from(6, 600.0), asked=200)]
    settings = RunSettings(min_cases=3, store=tmp_path, budget=4.0)  # a grace of 0.2 s
    assert settings.shrink_grace == pytest.approx(0.2)
    t0 = time.monotonic()
    [res] = judge_rows(rows, 15.0, settings)
    took = time.monotonic() - t0
    assert took < 150.0, took
    assert res.cases == 5 and res.status()[0] == "pass"  # the cut case is not counted


def test_map_on_devices_runs_one_process_per_gpu_in_order() -> None:
    # two items that each hold their process for 3 s: the second goes to the other GPU
    items = ["sleep 3; echo $CUDA_VISIBLE_DEVICES"] * 2
    seen: list[tuple[int, str | None]] = []
    got = map_on_devices(subprocess.getoutput, items, devices=("0", "1"),
                         on_result=lambda i, r, d: seen.append((i, d)))
    assert sorted(got) == ["0", "1"]
    assert sorted(i for i, _ in seen) == [0, 1] and {d for _, d in seen} == {"0", "1"}
    assert map_on_devices(str.upper, ["a", "b"], devices=("0",)) == ["A", "B"]  # here, in order
