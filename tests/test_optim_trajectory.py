"""Optimizers and MLP training steps: correct kernels pass each step, defects fail at theirs."""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.cases.case import Case
from numoracle.targets.target import Target
from numoracle.checking.check import check_case
from numoracle.errors import InvalidArgument
from numoracle.kernels.optim_targets import numpy_mlp_step, torch_mlp_step, torch_optimizer_step
from numoracle.oracle.ops import get_op
from numoracle.oracle.optim_math import OptimConfig
from numoracle.oracle.precision import get_model
from numoracle.trajectory import check_mlp_trajectory, check_optimizer_trajectory
from numoracle.zoo.optim import STEP_MUTANTS
from numoracle.zoo.optim import TARGETS as ZOO_TARGETS

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


LOGIC_BUG = "exceeds the fp32 bound: a logic bug"


@pytest.mark.parametrize(("mutant", "case"), [
    ("bias_correction_off", Case("optim", {"optimizer": "adam", "lr": 0.01, "steps": 2,
                                           "numel": 3}, family="normal", seed=1)),
    ("grad_not_divided_by_batch", Case("mlp_train", {
        "optimizer": "sgd", "lr": 0.1, "steps": 1, "batch": 4, "in_features": 3,
        "hidden1": 2, "hidden2": 2, "classes": 3}, family="normal", seed=1))])
def test_composed_ops_diagnose_a_miss_as_a_logic_bug(mutant: str, case: Case) -> None:
    # a coarser accumulation format is no explanation for an optimizer or training step
    assert not get_op(case.op).precision_ladder
    v = check_case(case, next(t for t in ZOO_TARGETS if t.name == mutant))
    assert not v.passed
    assert LOGIC_BUG in v.diagnosis and "consistent with" not in v.diagnosis
    bad = next(o for o in v.outputs.values() if not o.passed)
    assert set(bad.per_model) == {"fp32", "fp32+flushed-subnormals"}


def test_contractions_keep_the_precision_ladder() -> None:
    def tf32_inputs(a: np.ndarray, b: np.ndarray) -> dict:
        def cut(t: np.ndarray) -> np.ndarray:  # keep 10 mantissa bits (TF32, truncated)
            bits = np.ascontiguousarray(t, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
            return bits.view(np.float32)
        return {"out": cut(a) @ cut(b)}

    case = Case("matmul", {"batch_shape": (), "m": 3, "k": 64, "n": 2}, family="normal", seed=1)
    target = Target(name="tf32", op="matmul", backend="numpy", precision=get_model("fp32"),
                    fn=tf32_inputs)
    assert get_op("matmul").precision_ladder
    v = check_case(case, target)
    assert not v.passed and "consistent with tf32" in v.diagnosis


def test_teacher_forced_diagnosis_names_a_logic_bug() -> None:
    cfg, bug, _ = STEP_MUTANTS["grad_not_divided_by_batch"]
    p0, xs, ls = _mlp_problem(seed=2, steps=1, batch=8)
    v = check_mlp_trajectory(numpy_mlp_step(cfg, (bug,)), cfg, p0, xs, ls, free_running=False)
    assert v.first_failure is not None and LOGIC_BUG in v.first_failure.diagnosis


@pytest.mark.parametrize(("cfg", "all_finite"), [
    (OptimConfig("sgd", lr=0.01), True), (OptimConfig("sgd", lr=0.1), False),
    (OptimConfig("adam", lr=0.01), False)], ids=["sgd-0.01", "sgd-0.1", "adam"])
def test_drift_report_names_how_far_the_composed_bound_reaches(cfg: OptimConfig,
                                                                all_finite: bool) -> None:
    p0, xs, ls = _mlp_problem(seed=0, steps=12, batch=32)
    v = check_mlp_trajectory(numpy_mlp_step(cfg), cfg, p0, xs, ls)
    assert v.passed, v.message()  # every step within its bound: the drift is rounding
    d = v.drift
    assert d is not None and 1 <= d.finite_steps <= 12
    if all_finite:
        assert d.finite_steps == 12 and d.explained
    else:
        assert d.finite_steps < 12 and not d.explained
        assert f"through step {d.finite_steps} only" in str(d) and "not judged" in str(d)
