"""The GPU SGD steps (torch CUDA on cuDNN, CuPy) pass the stepwise training
check under the model they claim; the cuDNN step mutants are named at their step."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest

from numoracle.kernels.sgd_steps import STEPS, cupy_sgd_step, step_model
from numoracle.oracle.ops.conv2d import Conv2d
from numoracle.trajectory import check_trajectory

ZOO = importlib.import_module("numoracle.zoo.training")

#: (batch, in, out, side, kernel, conv) of the problems
PROBLEMS = [
    (2, 2, 3, 7, 3, {}),
    (3, 1, 2, 6, 2, {"padding": 1, "stride": 2}),
    (1, 4, 4, 8, 3, {"padding": 1, "groups": 2}),
    (2, 3, 2, 9, 3, {"dilation": 2}),
    (4, 16, 16, 12, 3, {"padding": 1}),
]


def _problem(seed: int, n: int, c: int, o: int, side: int, k: int, conv: dict,
             bias: bool = True) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    f32 = lambda s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    params = Conv2d().validate({"batch": n, "in_channels": c, "out_channels": o,
                                "height": side, "width": side, "kernel_size": k, "bias": bias,
                                **conv})
    g = params["groups"]
    return (f32((n, c, side, side)), f32((o, c // g, k, k)), f32((o,)) if bias else None,
            f32((n, o, *Conv2d._out_hw(params))))


def _needs(name: str, request: pytest.FixtureRequest) -> None:
    request.getfixturevalue("cupy" if name.startswith("cupy") else "torch_cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("problem", range(len(PROBLEMS)))
@pytest.mark.parametrize("name", ["torch-cuda", "torch-cuda-tf32", "cupy", "cupy-det"])
def test_gpu_steps_pass_every_step(name: str, problem: int, bias: bool,
                                   request: pytest.FixtureRequest) -> None:
    _needs(name, request)
    x, w, b, t = _problem(problem, *PROBLEMS[problem], bias=bias)
    conv = PROBLEMS[problem][-1]
    v = check_trajectory(STEPS[name](x, t, 0.05, conv), w, b, x, t, 0.05, 4,
                         model=step_model(name), conv=conv)
    assert v.passed, v.message()
    assert len(v.steps) == 4 and 0 < v.worst_ratio < 1
    assert v.drift is not None and np.isfinite(v.drift.weight)


@pytest.mark.gpu
@pytest.mark.parametrize("deterministic", [False, True])
def test_cupy_step_in_nhwc(cupy: Any, deterministic: bool) -> None:
    x, w, b, t = _problem(7, *PROBLEMS[2])
    conv = PROBLEMS[2][-1]
    step = cupy_sgd_step(x, t, 0.1, conv, layout="NHWC", deterministic=deterministic)
    v = check_trajectory(step, w, b, x, t, 0.1, 3, model=step_model("cupy"), conv=conv)
    assert v.passed, v.message()


@pytest.mark.gpu
def test_cupy_deterministic_step_repeats_bit_for_bit(cupy: Any) -> None:
    x, w, b, t = _problem(3, *PROBLEMS[4])
    step = STEPS["cupy-det"](x, t, 0.1, PROBLEMS[4][-1])
    one, two = step(w, b), step(w, b)
    for k in one:
        np.testing.assert_array_equal(cupy.asnumpy(one[k]), cupy.asnumpy(two[k]), err_msg=k)


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("name", sorted(ZOO.GPU_STEP_MUTANTS))
def test_cudnn_step_mutants_are_named_at_their_step(torch_cuda: Any, name: str,
                                                    seed: int) -> None:
    factory, step, tensor = ZOO.GPU_STEP_MUTANTS[name]
    x, w, b, t = _problem(seed, 2, 2, 3, 7, 3, {})
    v = check_trajectory(factory(x, t, 0.1), w, b, x, t, 0.1, 4)
    f = v.first_failure
    assert f is not None and (f.step, f.tensor) == (step, tensor), v.message()
    assert all(s.passed for s in v.steps[:step - 1])
