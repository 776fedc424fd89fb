"""After a parameter update the forward pass must reflect the new parameters: a
target that keeps stale weights fails on one case, in a fresh process too."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from numoracle.cases.case import Case
from numoracle.checking.check import check_case, earlier_parameters
from numoracle.kernels import get_target

pytest.importorskip("torch")

ZOO = importlib.import_module("numoracle.zoo.conv2d")
STALE = next(t for t in ZOO.TARGETS if t.name == "stale_weights")
PARAMS = {"batch": 2, "in_channels": 2, "out_channels": 3, "height": 5, "width": 4,
          "kernel_size": 2, "padding": 1, "bias": True}


@pytest.mark.parametrize("family", ["exact", "normal"])
def test_earlier_parameters_differ_everywhere_and_leave_the_data(family: str) -> None:
    case = Case("conv2d", PARAMS, family=family, seed=3)
    inputs = case.inputs()
    inputs["weight"][0, 0, 0, 0] = 0.0
    earlier = earlier_parameters(case, inputs)
    for name in ("weight", "bias"):
        assert np.all(earlier[name] != inputs[name]), name
        assert earlier[name].dtype == inputs[name].dtype
    for name in ("x", "grad_output"):
        assert earlier[name] is inputs[name]
    mm = Case("matmul", {"batch_shape": (1,), "m": 2, "k": 2, "n": 2})
    mm_inputs = mm.inputs()
    same = earlier_parameters(mm, mm_inputs)
    assert all(same[k] is v for k, v in mm_inputs.items()), "matmul has no parameters"


def test_stale_weights_fail_on_the_first_call_of_a_shape() -> None:
    case = Case("conv2d", {**PARAMS, "out_channels": 5}, family="exact", seed=1)
    ZOO._WEIGHT_CACHE.pop(tuple(case.shapes()["weight"]), None)  # as in a fresh process
    v = check_case(case, STALE)
    assert not v.passed and "logic bug" in v.diagnosis
    ZOO._WEIGHT_CACHE.pop(tuple(case.shapes()["weight"]), None)
    assert check_case(case, STALE, update_first=False).passed, \
        "without the earlier call the first call of a shape is right"


def test_correct_targets_pass_after_an_update() -> None:
    case = Case("conv2d", PARAMS, family="exact", seed=2)
    v = check_case(case, get_target("torch-cpu-fp32", "conv2d"))
    assert v.passed, v.message()
