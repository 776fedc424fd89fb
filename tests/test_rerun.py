"""Two runs: reduction-order nondeterminism passes, races and false determinism fail."""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.cases.case import Case
from numoracle.targets.target import Target
from numoracle.checking.rerun import check_reruns
from numoracle.oracle.precision import get_model

CASE = Case("linear", {"batch": 64, "in_features": 33, "out_features": 5, "bias": True},
            family="normal", seed=4)


def _linear(x, weight, grad_output, bias=None, *, order=None, drop=False):
    """A float32 linear whose grad_weight sums the batch in ``order`` (sequentially)."""
    rng = np.random.default_rng()
    idx = rng.permutation(x.shape[0]) if order == "random" else np.arange(x.shape[0])
    lost = int(rng.integers(x.shape[0])) if drop else -1  # another thread's write won
    gw = np.zeros((weight.shape[0], x.shape[1]), np.float32)
    for i in idx:
        if i == lost:
            continue
        gw = gw + np.outer(grad_output[i], x[i]).astype(np.float32)
    out = {"y": x @ weight.T + bias, "grad_input": grad_output @ weight, "grad_weight": gw,
           "grad_bias": grad_output.sum(0)}
    return out


def _target(deterministic: bool = False, **kw) -> Target:
    return Target(name="t", op="linear", backend="numpy",
                  precision=get_model("fp32", deterministic_runs=deterministic),
                  fn=lambda **a: _linear(**a, **kw))


def test_reduction_order_nondeterminism_is_legitimate() -> None:
    v = check_reruns(CASE, _target(order="random"), runs=4)
    assert v.passed, v.diagnosis
    assert "legitimate nondeterminism" in v.diagnosis and 0 < v.ratios["grad_weight"] < 1


def test_a_lost_update_is_a_race() -> None:
    v = check_reruns(CASE, _target(order="random", drop=True), runs=4)
    assert not v.passed and "race" in v.diagnosis and "grad_weight" in v.diagnosis


def test_deterministic_targets_must_be_bit_identical() -> None:
    assert check_reruns(CASE, _target(deterministic=True), runs=3).diagnosis == "bit-identical runs"
    v = check_reruns(CASE, _target(deterministic=True, order="random"), runs=4)
    assert not v.passed and "claims deterministic runs" in v.diagnosis


def test_a_kernel_that_raises_fails_the_rerun() -> None:
    def boom(**_):
        raise RuntimeError("device lost")

    t = Target(name="t", op="linear", backend="numpy", precision=get_model("fp32"), fn=boom)
    v = check_reruns(CASE, t)
    assert not v.passed and "device lost" in v.diagnosis


@pytest.mark.parametrize("runs", [2, 5])
def test_runs_are_counted(runs: int) -> None:
    assert check_reruns(CASE, _target(), runs=runs).runs == runs
