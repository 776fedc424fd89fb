"""The runner: time budgets, skipped targets, counts."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from numoracle.cases.target import Target
from numoracle.kernels import get_target
from numoracle.oracle.precision import get_model
from numoracle.running.runner import run_target


def test_a_time_budget_stops_drawing_cases(tmp_path: Path) -> None:
    t0 = time.perf_counter()
    res = run_target(get_target("numpy-fp32", "matmul"), examples=100_000, seed=0,
                     store=tmp_path, seconds=1.0)
    assert time.perf_counter() - t0 < 10
    assert res.verdict == "pass" and 0 < res.cases < 100_000


def test_an_unavailable_target_is_skipped_with_its_reason() -> None:
    t = Target(name="nowhere", op="matmul", backend="numpy", precision=get_model("fp32"),
               fn=lambda a, b: {"out": a @ b}, available=lambda: "no such device here")
    res = run_target(t, examples=5)
    assert res.verdict == "skipped" and res.diagnosis == "no such device here"


def test_a_hanging_kernel_fails_with_a_timeout(tmp_path: Path) -> None:
    def slow(a, b):
        time.sleep(1.0)
        return {"out": np.matmul(a, b)}

    t = Target(name="slow", op="matmul", backend="numpy", precision=get_model("fp32"), fn=slow)
    res = run_target(t, examples=3, store=tmp_path, shrink=False, timeout=0.2)
    assert res.verdict == "FAIL" and "did not return within" in res.diagnosis


def test_diagnosed_runs_name_the_precision_really_delivered(tmp_path: Path) -> None:
    from numoracle.oracle.formats import quantize
    from numoracle.running.runner import default_strategy

    def tf32_matmul(a, b):
        t = lambda v: quantize(np.asarray(v, np.float64), "tf32").astype(np.float32)  # noqa: E731
        return {"out": t(a) @ t(b)}

    plain = get_target("numpy-fp32", "matmul")
    tf32 = Target(name="rounds-to-tf32", op="matmul", backend="numpy",
                  precision=get_model("tf32"), fn=tf32_matmul)
    strat = default_strategy(plain, families="normal", max_overlays=0, max_elements=512)
    assert run_target(plain, examples=15, strategy=strat, store=tmp_path,
                      diagnose=True).effective() == {"out": "fp32"}
    res = run_target(tf32, examples=15, strategy=strat, store=tmp_path, diagnose=True)
    assert res.verdict == "pass" and res.effective() == {"out": "tf32"}
    assert "out: tf32" in res.row()["effective"]
