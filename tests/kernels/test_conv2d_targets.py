"""The CPU conv2d targets pass the oracle, in the layouts they claim."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from numoracle.cases.case import Case
from numoracle.targets.target import Target
from numoracle.checking.check import check_case, run_kernel
from numoracle.kernels import get_target
from numoracle.running.runner import run_target


@pytest.mark.parametrize("name", ["numpy-fp32", "torch-cpu-fp32"])
def test_target_passes_300_cases(name: str, tmp_path: Path) -> None:
    target = get_target(name, "conv2d")
    if target.unavailable_reason():
        pytest.skip(target.unavailable_reason())
    res = run_target(target, examples=300, seed=3, store=tmp_path)
    assert res.verdict == "pass", res.message
    assert res.cases == 300 and res.failures == 0
    assert 0 < res.worst_ratio < 1


PARAMS = {"batch": 2, "in_channels": 4, "out_channels": 6, "height": 5, "width": 7,
          "kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 0), "dilation": (1, 2),
          "groups": 2, "bias": True}


def _recorder(seen: dict[str, Any], output_layouts: dict[str, str]) -> Any:
    correct = get_target("numpy-fp32", "conv2d").fn

    def fn(x, weight, grad_output, bias=None, *, params):
        seen.update(x=x, weight=weight, grad_output=grad_output, params=params)
        return correct(x, weight, grad_output, bias, params=params)
    return fn


@pytest.mark.parametrize(("case_layout", "handed"), [
    ({"x": "NHWC:F", "weight": "HWIO:F"}, {"x": "NHWC:F", "weight": "HWIO:F"}),
    ({"x": "NHWC", "weight": "HWIO"}, {"x": "NHWC", "weight": "HWIO"}),
    # layouts the target does not take arrive in its first accepted one
    ({"x": "NCHW", "weight": "OHWI:F"}, {"x": "NHWC", "weight": "HWIO"}),
    ({}, {"x": "NHWC", "weight": "HWIO"}),
])
def test_the_runner_hands_each_input_in_the_layout_the_target_takes(
        case_layout: dict[str, str], handed: dict[str, str]) -> None:
    seen: dict[str, Any] = {}
    layouts = {"x": ("NHWC", "NHWC:F"), "weight": ("HWIO", "HWIO:F"),
               "grad_output": ("NHWC",), "bias": ("C",)}
    outs = {"y": "NHWC", "grad_input": "NHWC", "grad_weight": "HWIO"}
    target = Target(name="rec", op="conv2d", backend="numpy", precision="fp32",
                    fn=_recorder(seen, outs), layouts=layouts, output_layouts=outs)
    case = Case(op="conv2d", params=PARAMS, family="exact", seed=5, layouts=case_layout)
    inputs = case.inputs()
    got, err = run_kernel(case, target, inputs)
    assert err is None and got is not None
    shapes = {"NHWC": lambda s: (s[0], s[2], s[3], s[1]),
              "HWIO": lambda s: (s[2], s[3], s[1], s[0])}
    for name, lay in handed.items():
        order, _, memory = lay.partition(":")
        arr = seen[name]
        assert arr.shape == shapes[order](inputs[name].shape)
        assert arr.flags.f_contiguous if memory == "F" else arr.flags.c_contiguous
    assert seen["params"]["stride"] == (2, 1)
    np.testing.assert_array_equal(seen["x"], inputs["x"].transpose(0, 2, 3, 1))
    np.testing.assert_array_equal(seen["weight"], inputs["weight"].transpose(2, 3, 1, 0))
    v = check_case(case, target)
    assert v.passed, v.message()
    assert all(o.exact and o.worst_ratio == 0 for o in v.outputs.values())


def test_outputs_in_an_undeclared_order_fail_with_their_shape() -> None:
    correct = get_target("numpy-fp32", "conv2d")
    target = Target(name="undeclared", op="conv2d", backend="numpy", precision="fp32",
                    fn=correct.fn, layouts=correct.layouts)  # NHWC outputs, not declared
    v = check_case(Case(op="conv2d", params=PARAMS, family="exact"), target)
    assert not v.passed and "output 'y'" in (v.error or "")
    assert "expected shape (2, 6, 3, 5), got (2, 3, 5, 6)" in (v.error or "")


def test_a_layout_misread_fails_as_a_logic_bug() -> None:

    from numoracle.zoo import conv2d as zoo

    mutant = {t.name: t for t in zoo.TARGETS}["weight_fortran_read_as_c"]
    v = check_case(Case(op="conv2d", params=PARAMS, family="exact", seed=2,
                        layouts={"weight": "OIHW:F"}), mutant)
    assert not v.passed
    assert "logic bug" in v.diagnosis
