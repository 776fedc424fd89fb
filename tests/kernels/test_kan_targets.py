"""KAN targets against the oracle, and the seed-001 properties: zero upstream
gradient gives exactly zero, no accumulation across calls, a sample's result
does not depend on its batch, wide layers, batches 1-128, orders 1-5.

The torch CPU target runs here; the CUDA targets (torch CUDA, CuPy) carry the
``gpu`` marker and skip cleanly without a GPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from numoracle.cases.case import Case
from numoracle.checking.check import check_case, run_kernel
from numoracle.checking.rerun import check_reruns
from numoracle.kernels import get_target

GPU = pytest.mark.gpu
TARGETS = [pytest.param("torch-cpu-fp32"), pytest.param("torch-cpu-fp64"),
           pytest.param("torch-cuda-fp32", marks=GPU), pytest.param("torch-cuda-fp64", marks=GPU),
           pytest.param("cupy-fp32", marks=GPU)]


def _target(name: str) -> Any:
    t = get_target(name, "kan")
    reason = t.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    return t


def _case(name: str, **params: Any) -> Case:
    base = {"batch": 7, "in_features": 3, "out_features": 4, "grid_size": 5, "spline_order": 3}
    base.update(params)
    storage = "fp64" if name.endswith("fp64") else "fp32"
    return Case("kan", base, storage=storage, family=params.pop("family", "normal"), seed=3)


@pytest.mark.parametrize("name", TARGETS)
@pytest.mark.parametrize("order", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("batch", [1, 7, 16, 64, 128])
def test_correct_target_passes(name: str, order: int, batch: int) -> None:
    if not name.startswith("cupy") and name.endswith("fp64") and batch > 16:
        pytest.skip("float64 oracle: small batches suffice")
    verdict = check_case(_case(name, spline_order=order, batch=batch), _target(name))
    assert verdict.passed, verdict.message()


@pytest.mark.parametrize("name", [p for p in TARGETS if "fp64" not in p.values[0]])
def test_wide_layer(name: str) -> None:
    """The seed's wide layer: 32 -> 256, batch 64."""
    case = _case(name, batch=64, in_features=32, out_features=256, grid_size=5)
    verdict = check_case(case, _target(name))
    assert verdict.passed, verdict.message()


@pytest.mark.parametrize("name", TARGETS)
def test_zero_upstream_gradient_gives_exact_zeros(name: str) -> None:
    target = _target(name)
    case = _case(name, batch=16, spline_order=2)
    inputs = case.inputs()
    inputs["grad_output"] = np.zeros_like(inputs["grad_output"])
    got, error = run_kernel(case, target, inputs)
    assert got is not None, error
    for out in ("grad_input", "grad_coef", "grad_base_weight", "grad_spline_weight"):
        assert np.all(got[out] == 0), out


@pytest.mark.parametrize("name", TARGETS)
def test_no_accumulation_across_calls(name: str) -> None:
    verdict = check_reruns(_case(name, batch=16), _target(name), runs=3)
    assert verdict.passed, verdict.diagnosis


@pytest.mark.parametrize("name", [p for p in TARGETS if "fp64" not in p.values[0]])
def test_sample_result_does_not_depend_on_its_batch(name: str) -> None:
    """Row 0 of a batch of 128 and the same sample alone: ``y`` and ``grad_input``
    agree within the sum of their two oracle bounds (both runs also pass)."""
    target = _target(name)
    big = _case(name, batch=128)
    inputs = big.inputs()
    one = {k: (v[:1] if k in ("x", "grad_output") else v) for k, v in inputs.items()}
    got_big, e1 = run_kernel(big, target, inputs)
    small = _case(name, batch=1)
    got_one, e2 = run_kernel(small, target, one)
    assert got_big is not None and got_one is not None, (e1, e2)
    from numoracle.oracle.ops import get_op

    op = get_op("kan")
    ref_big = op.reference(inputs, big.params, target.precision, ("y", "grad_input"))
    ref_one = op.reference(one, small.params, target.precision, ("y", "grad_input"))
    for out in ("y", "grad_input"):
        slack = ref_big[out].bound()[:1] + ref_one[out].bound()
        assert np.all(np.abs(got_big[out][:1] - got_one[out]) <= slack), out
