"""What a check hands back: the failing verdict on the exception, a message on a
pass, and kernels whose named-axis inputs and outputs are NHWC."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from numoracle import InvalidArgument, KernelMismatch, Verdict, check_kernel
from numoracle.api import op_inputs
from numoracle.kernels.numpy_conv2d import conv2d

FINITE: dict[str, Any] = {"families": ("normal", "exact"), "max_overlays": 0}
NHWC = {"x": ("NHWC",), "weight": ("HWIO",), "grad_output": ("NHWC",),
        "y": "NHWC", "grad_input": "NHWC", "grad_weight": "HWIO"}


def linear(x: Any, weight: Any, grad_output: Any, bias: Any = None) -> dict[str, Any]:
    y = x @ weight.T
    out = {"grad_input": grad_output @ weight, "grad_weight": grad_output.T @ x}
    if bias is not None:
        y = y + bias
        out["grad_bias"] = grad_output.sum(axis=0)
    out["y"] = y
    return out


def constant_grad_weight(x: Any, weight: Any, grad_output: Any, bias: Any = None) -> Any:
    out = linear(x, weight, grad_output, bias)
    out["grad_weight"] = np.full_like(out["grad_weight"], 7.0)
    return out


def test_a_mismatch_carries_its_verdict(tmp_path: Path) -> None:
    with pytest.raises(KernelMismatch) as info:
        check_kernel(constant_grad_weight, op="linear", examples=10, store=tmp_path, **FINITE)
    v = info.value.verdict
    assert isinstance(v, Verdict) and not v.passed
    assert not v.outputs["grad_weight"].passed and v.outputs["y"].passed
    assert v.diagnosis.startswith("grad_weight: ") and v.failure_class == "logic"


def test_a_pass_has_a_message(tmp_path: Path) -> None:
    res = check_kernel(linear, op="linear", examples=5, store=tmp_path, **FINITE)
    assert res.message.startswith("PASS: linear on linear, claiming fp32: 5 cases within")
    assert "worst ratio" in res.message


def test_nhwc_inputs_and_outputs_are_declared_through_layouts(tmp_path: Path) -> None:
    res = check_kernel(conv2d, op="conv2d", layouts=NHWC, examples=6, store=tmp_path,
                       name="nhwc", **FINITE)
    assert res.verdict == "pass" and res.cases == 6


def test_an_output_left_in_nchw_fails_when_nhwc_is_declared(tmp_path: Path) -> None:
    def nchw_y(**kw: Any) -> dict[str, Any]:
        out = conv2d(**kw)
        out["y"] = np.ascontiguousarray(out["y"].transpose(0, 3, 1, 2))  # NCHW, not NHWC
        return out

    with pytest.raises(KernelMismatch):
        check_kernel(nchw_y, op="conv2d", layouts=NHWC, examples=10, store=tmp_path,
                     name="nchw_y", **FINITE)


@pytest.mark.parametrize(("layouts", "match"), [
    ({"z": ("C",)}, "names 'z', which is neither an input of linear"),
    ({"y": "NHWC"}, r"only outputs with named axes"),
    ({"x": "Q"}, "must be a non-empty subset"),
])
def test_bad_layout_mappings_are_refused(layouts: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        check_kernel(linear, op="linear", layouts=layouts)


def test_op_inputs() -> None:
    assert op_inputs("linear") == ("x", "weight", "grad_output", "bias")
