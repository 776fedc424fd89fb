"""Optimizers and training steps on the GPU: torch CUDA and the CuPy two-phase
trainer pass every teacher-forced step; the CuPy trainer's defects fail at
their step, the real race between the phases in most runs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from numoracle.kernels.optim_targets import torch_mlp_step, torch_optimizer_step
from numoracle.oracle.optim_math import OptimConfig
from numoracle.trajectory import check_mlp_trajectory, check_optimizer_trajectory, mlp_problem
from numoracle.zoo.optim import STEP_MUTANTS

CONFIGS = [OptimConfig("sgd", lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
           OptimConfig("adam", lr=0.01, amsgrad=True, weight_decay=0.01),
           OptimConfig("adamw", lr=0.01, weight_decay=0.01, eps=1e-3)]
#: runs of the racing trainer, and how many of them must fail
RACE_RUNS, RACE_CAUGHT = 8, 6


def _problem(seed: int, steps: int, batch: int, sizes: tuple[int, int, int, int] = (8, 6, 5, 3)
             ) -> tuple[dict[str, np.ndarray], list[np.ndarray], list[np.ndarray]]:
    return mlp_problem(np.random.default_rng(seed), sizes, steps, batch)


@pytest.mark.gpu
@pytest.mark.parametrize("impl", ["for", "foreach"])
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.optimizer)
def test_torch_cuda_optimizers_pass_every_step(torch_cuda: Any, cfg: OptimConfig,
                                               impl: str) -> None:
    rng = np.random.default_rng(3)
    p0 = rng.standard_normal(300).astype(np.float32)
    grads = rng.standard_normal((10, 300)).astype(np.float32)
    v = check_optimizer_trajectory(torch_optimizer_step(cfg, "cuda", impl), cfg, p0, grads)
    assert v.passed, v.message()
    assert len(v.steps) == 10


@pytest.mark.gpu
@pytest.mark.parametrize("batch", [1, 37, 700])
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.optimizer)
def test_mlp_steps_pass_on_the_gpu(cupy: Any, torch_cuda: Any, cfg: OptimConfig,
                                   batch: int) -> None:
    from numoracle.kernels.cupy_mlp import cupy_mlp_step

    p0, xs, ls = _problem(batch, steps=3, batch=batch)
    for step in (cupy_mlp_step(cfg), torch_mlp_step(cfg, "cuda")):
        v = check_mlp_trajectory(step, cfg, p0, xs, ls)
        assert v.passed, v.message()


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(n for n in STEP_MUTANTS
                                        if n != "update_before_accumulation"))
def test_cupy_mutants_fail_at_their_step(cupy: Any, name: str) -> None:
    from numoracle.kernels.cupy_mlp import cupy_mlp_step

    cfg, bug, expected = STEP_MUTANTS[name]
    p0, xs, ls = _problem(5, steps=3, batch=16)
    v = check_mlp_trajectory(cupy_mlp_step(cfg, (bug,)), cfg, p0, xs, ls,
                             diagnose_failure=False, free_running=False)
    assert v.first_failure is not None and v.first_failure.step == expected


@pytest.mark.gpu
def test_the_race_between_the_phases_is_caught_in_most_runs(cupy: Any) -> None:
    """The update on a second stream, with no wait for the accumulation (seed 003's
    fixed design without its synchronisation), against the same slow accumulation
    with the phases ordered: the same problems, the same kernels."""
    from numoracle.kernels.cupy_mlp import RACE_SPIN_CYCLES, cupy_mlp_step

    cfg, bug, _ = STEP_MUTANTS["update_before_accumulation"]
    caught = 0
    for run, batch in enumerate([2, 16, 64, 128, 300, 1000, 2048, 5][:RACE_RUNS]):
        p0, xs, ls = _problem(100 + run, steps=2, batch=batch)
        ordered = check_mlp_trajectory(cupy_mlp_step(cfg, spin_cycles=RACE_SPIN_CYCLES), cfg,
                                       p0, xs, ls, free_running=False)
        assert ordered.passed, ordered.message()
        racing = check_mlp_trajectory(cupy_mlp_step(cfg, (bug,)), cfg, p0, xs, ls,
                                      diagnose_failure=False, free_running=False)
        caught += not racing.passed
    assert caught >= RACE_CAUGHT, f"the race showed in {caught} of {RACE_RUNS} runs"
