"""The runner: time budgets, skipped targets, counts."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from numoracle.targets.target import Target
from numoracle.kernels import get_target
from numoracle.oracle.precision import get_model
from numoracle.running.runner import run_target
from numoracle.zoo.linear import bias_added_twice


def test_a_time_budget_stops_drawing_cases(tmp_path: Path) -> None:
    t0 = time.perf_counter()
    res = run_target(get_target("numpy-fp32", "matmul"), examples=100_000, seed=0,
                     store=tmp_path, seconds=5.0)
    assert time.perf_counter() - t0 < 300  # not the hours of 100,000 cases, on a busy machine
    assert res.verdict == "pass" and 0 < res.cases < 100_000


def test_an_unavailable_target_is_skipped_with_its_reason() -> None:
    t = Target(name="nowhere", op="matmul", backend="numpy", precision=get_model("fp32"),
               fn=lambda a, b: {"out": a @ b}, available=lambda: "no such device here")
    res = run_target(t, examples=5)
    assert res.verdict == "skipped" and res.diagnosis == "no such device here"


def test_a_hanging_kernel_fails_with_a_timeout(tmp_path: Path) -> None:
    def slow(a, b):
        time.sleep(10.0)  # 50 times the timeout: hung however busy the machine
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


def test_given_cases_are_judged_in_order_and_counted_as_drawn_ones() -> None:
    from numoracle.running.draws import case_digest, draw_cases

    t = get_target("numpy-fp32", "matmul")
    cases = draw_cases(t, 12, 5)
    seen: list[str] = []
    res = run_target(t, cases=cases, store=None, on_case=lambda v: seen.append(case_digest(v.case)))
    assert seen == [case_digest(c) for c in cases]
    assert (res.verdict, res.cases, res.asked, len(res.case_seconds)) == ("pass", 12, 12, 12)
    assert res.worst_ratio == max(run_target(t, cases=[c], store=None).worst_ratio for c in cases)



def test_a_failure_among_given_cases_is_shrunk_and_its_repro_replays(tmp_path: Path) -> None:
    from numoracle.checking.replay import replay_repro
    from numoracle.running.draws import draw_cases
    from numoracle.store.repro import load_repro

    t = Target(name="bias-twice", op="linear", backend="numpy", precision=get_model("fp32"),
               fn=bias_added_twice)
    cases = draw_cases(t, 40, 1, families="normal", max_overlays=0)
    seen: list[Any] = []
    res = run_target(t, cases=cases, store=tmp_path, on_case=seen.append)
    assert res.verdict == "FAIL" and res.repro and res.cases_to_catch is not None
    found = seen[-1].case  # the first failing case; nothing is judged after it
    assert found == cases[res.cases_to_catch - 1] and len(seen) == res.cases_to_catch
    r = load_repro(res.repro)
    assert r.stored_inputs and r.case.params["bias"]  # shrunk, still with the bias it needs
    assert r.case.size() < found.size()
    again = replay_repro(res.repro, target=t).verdict
    assert not again.passed and again.diagnosis == res.failure.diagnosis  # type: ignore[union-attr]


def test_a_given_failure_the_shrinker_cannot_take_is_saved_as_found(tmp_path: Path) -> None:
    from numoracle.running.draws import draw_cases
    from numoracle.store.repro import load_repro

    calls = []

    def wrong_once(a, b):  # fails on its first call only: the shrinker sees no failure
        calls.append(1)
        return {"out": np.matmul(a, b) + (1.0 if len(calls) == 1 else 0.0)}

    t = Target(name="wrong-once", op="matmul", backend="numpy", precision=get_model("fp32"),
               fn=wrong_once)
    cases = draw_cases(t, 5, 2)
    res = run_target(t, cases=cases, store=tmp_path)
    assert res.verdict == "FAIL" and res.cases_to_catch == 1
    assert "not shrunk (InvalidArgument: the case does not fail" in res.diagnosis
    r = load_repro(res.repro or "")
    assert r.case == cases[0] and not r.stored_inputs  # the case as found, its seed's inputs


def _tanh_linear(x, w):
    import torch

    return torch.tanh(x @ w.T)


def test_a_traced_op_failure_among_given_cases_is_shrunk_and_replays(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from numoracle.checking.replay import replay_repro
    from numoracle.oracle.traced.op import traced_op
    from numoracle.running.draws import draw_cases
    from numoracle.store.repro import load_repro

    op = traced_op(_tanh_linear, inputs={"x": ("batch", "i"), "w": ("o", "i")},
                   dims={"i": (1, 12), "o": (1, 12)}, name="traced_given_cases_tanh")

    def second_column_off(x, w):  # wrong wherever there are two outputs or more
        y = np.tanh(x @ w.T)
        y[:, 1:] += 0.5
        return {"out": y}

    t = Target(name="column-off", op=op.name, backend="numpy", precision=get_model("fp32"),
               fn=second_column_off)
    cases = draw_cases(t, 30, 0, families="normal", max_overlays=0)
    res = run_target(t, cases=cases, store=tmp_path, shrink_seconds=60)
    assert res.verdict == "FAIL" and res.repro and res.cases_to_catch is not None
    found = cases[res.cases_to_catch - 1]
    r = load_repro(res.repro)
    assert r.stored_inputs and r.case.params["o"] >= 2 and r.case.size() < found.size()
    assert not replay_repro(res.repro, target=t).verdict.passed


def test_an_error_that_does_not_reproduce_is_reported_with_its_cause(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A judging step that raised once (not a kernel's mismatch) and passed on
    replay ends the run in "error", naming what raised and where."""
    import numoracle.running.runner as runner

    real, calls = runner.check_case, []

    def once_broken(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("worker pipe lost")
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "check_case", once_broken)
    res = run_target(get_target("numpy-fp32", "matmul"), examples=10, seed=1, store=tmp_path)
    assert res.verdict == "error"
    assert "RuntimeError: worker pipe lost" in res.diagnosis
    assert "in once_broken" in res.diagnosis
