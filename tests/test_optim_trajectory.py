"""Optimizers and MLP training steps: correct kernels pass each step, defects fail at theirs."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from numoracle.errors import InvalidArgument
from numoracle.kernels.optim_targets import numpy_mlp_step, torch_mlp_step, torch_optimizer_step
from numoracle.oracle.optim_math import OptimConfig
from numoracle.trajectory import check_mlp_trajectory, check_optimizer_trajectory

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "zoo"))
from optim import STEP_MUTANTS

CONFIGS = [OptimConfig("sgd", lr=0.1), OptimConfig("sgd", lr=0.1, momentum=0.9, nesterov=True,
                                                     weight_decay=0.01),
           OptimConfig("sgd", lr=0.1, momentum=0.9, dampening=0.1),
           OptimConfig("adam", lr=0.01, amsgrad=True, weight_decay=0.01),
           OptimConfig("adamw", lr=0.01, weight_decay=0.01, eps=1e-3)]


def _mlp_problem(seed: int = 0, steps: int = 3, batch: int = 8) -> tuple:
    rng = np.random.default_rng(seed)
    f = np.float32
    p0 = {"w1": (rng.standard_normal((6, 8)) * 0.4).astype(f), "b1": np.full(6, 0.1, f),
          "w2": (rng.standard_normal((5, 6)) * 0.4).astype(f), "b2": np.full(5, 0.1, f),
          "w3": (rng.standard_normal((3, 5)) * 0.4).astype(f), "b3": np.zeros(3, f)}
    xs = [rng.standard_normal((batch, 8)).astype(f) for _ in range(steps)]
    ls = [rng.integers(0, 3, batch) for _ in range(steps)]
    return p0, xs, ls


@pytest.mark.parametrize("impl", ["for", "foreach", "fused"])
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.optimizer)
def test_torch_optimizers_pass_every_step(cfg: OptimConfig, impl: str) -> None:
    pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    p0 = rng.standard_normal(40).astype(np.float32)
    grads = rng.standard_normal((12, 40)).astype(np.float32)
    v = check_optimizer_trajectory(torch_optimizer_step(cfg, "cpu", impl), cfg, p0, grads)
    assert v.passed, v.message()
    assert len(v.steps) == 12 and v.drift is not None and v.drift.explained


@pytest.mark.parametrize("maker", ["torch", "numpy"])
@pytest.mark.parametrize("cfg", CONFIGS[::2], ids=lambda c: c.optimizer)
def test_mlp_steps_pass(cfg: OptimConfig, maker: str) -> None:
    pytest.importorskip("torch")
    step = torch_mlp_step(cfg) if maker == "torch" else numpy_mlp_step(cfg)
    p0, xs, ls = _mlp_problem()
    v = check_mlp_trajectory(step, cfg, p0, xs, ls)
    assert v.passed, v.message()


@pytest.mark.parametrize("name", sorted(STEP_MUTANTS))
def test_mutants_fail_at_their_step(name: str) -> None:
    cfg, bug, expected = STEP_MUTANTS[name]
    p0, xs, ls = _mlp_problem(seed=2, steps=3, batch=8)
    v = check_mlp_trajectory(numpy_mlp_step(cfg, (bug,)), cfg, p0, xs, ls,
                             diagnose_failure=False, free_running=False)
    assert v.first_failure is not None and v.first_failure.step == expected
    assert v.first_failure.ratio > 10


@pytest.mark.parametrize("kw", [
    {"optimizer": "rmsprop", "lr": 0.1}, {"optimizer": "sgd", "lr": -1.0},
    {"optimizer": "sgd", "lr": 0.1, "nesterov": True},
    {"optimizer": "sgd", "lr": 0.1, "amsgrad": True},
    {"optimizer": "adam", "lr": 0.1, "momentum": 0.9}])
def test_invalid_configs(kw: dict) -> None:
    with pytest.raises(InvalidArgument):
        OptimConfig(**kw)
