"""The conv2d reference on the GPU (CuPy, float64) agrees with the host's, value and bound."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from numoracle.cases.case import Case
from numoracle.checking.check import GPU_REFERENCE_WORK, _reference_inputs, judge
from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import get_model
from numoracle.oracle.tracked import Tracked

CONV = get_op("conv2d")

GEOMETRIES = {
    "seed000": {"batch": 2, "in_channels": 1, "out_channels": 16, "height": 128, "width": 128,
                "kernel_size": 3, "bias": True},
    "padded-strided": {"batch": 3, "in_channels": 4, "out_channels": 6, "height": 11,
                       "width": 9, "kernel_size": 3, "stride": 2, "padding": 1, "bias": True},
    "dilated-grouped": {"batch": 2, "in_channels": 6, "out_channels": 4, "height": 10,
                        "width": 12, "kernel_size": (3, 2), "dilation": 2, "padding": (2, 1),
                        "groups": 2, "bias": False},
    "depthwise": {"batch": 1, "in_channels": 5, "out_channels": 5, "height": 7, "width": 7,
                  "kernel_size": 3, "padding": 1, "groups": 5, "bias": True},
}


def _on_gpu(cupy: Any, inputs: dict[str, np.ndarray]) -> dict[str, Any]:
    return {k: cupy.asarray(v) for k, v in inputs.items()}


def _assert_same(host: dict[str, Tracked], gpu: dict[str, Tracked]) -> None:
    assert set(host) == set(gpu)
    for name, h in host.items():
        g = gpu[name].to_host()
        assert isinstance(g.value, np.ndarray)
        np.testing.assert_array_equal(np.isnan(g.det), np.isnan(h.det), err_msg=name)
        judged = ~np.isnan(h.det)
        tol = h.ref_err + g.ref_err
        with np.errstate(invalid="ignore"):  # inf - inf where both are infinite
            gap = np.abs(g.value - h.value)
        assert np.all((gap <= tol) | ~np.isfinite(h.value)), f"{name}: values differ"
        np.testing.assert_allclose(g.det[judged], h.det[judged], rtol=1e-12, err_msg=name)
        np.testing.assert_allclose(g.prob[judged], h.prob[judged], rtol=1e-12, err_msg=name)
        np.testing.assert_array_equal(g.det == 0, h.det == 0, err_msg=name)
        np.testing.assert_array_equal(np.broadcast_to(g.n, g.shape),
                                      np.broadcast_to(h.n, h.shape), err_msg=name)


@pytest.mark.gpu
@pytest.mark.parametrize("family", ["normal", "exact"])
@pytest.mark.parametrize("geometry", sorted(GEOMETRIES))
@pytest.mark.parametrize("model", ["fp32", "tf32", "fp32-acc16"])
def test_gpu_conv2d_reference_matches_the_host(cupy: Any, geometry: str, family: str,
                                               model: str) -> None:
    case = Case("conv2d", GEOMETRIES[geometry], family=family, seed=5)
    inputs = case.inputs()
    m = get_model(model)
    host = CONV.reference(inputs, case.params, m)
    gpu = CONV.reference(_on_gpu(cupy, inputs), case.params, m)
    assert all(isinstance(t.value, cupy.ndarray) for t in gpu.values()), "computed on the GPU"
    _assert_same(host, gpu)


@pytest.mark.gpu
def test_gpu_conv2d_reference_with_an_infinite_input(cupy: Any) -> None:
    """Padding and inserted zeros meeting an Inf are unjudged on both paths alike."""
    case = Case("conv2d", GEOMETRIES["padded-strided"], family="normal", seed=2)
    inputs = case.inputs()
    inputs["weight"][1, 2, 0, 0] = np.inf
    inputs["x"][0, 1, 0, 3] = -np.inf
    m = get_model("fp32")
    host = CONV.reference(inputs, case.params, m)
    assert any(np.isnan(t.det).any() for t in host.values()), "the case has unjudged elements"
    _assert_same(host, CONV.reference(_on_gpu(cupy, inputs), case.params, m))


@pytest.mark.gpu
def test_large_conv2d_cases_are_judged_on_the_gpu(cupy: Any) -> None:
    params = {"batch": 8, "in_channels": 32, "out_channels": 32, "height": 32, "width": 32,
              "kernel_size": 3, "padding": 1, "bias": True}
    case = Case("conv2d", params, family="normal", seed=1)
    inputs = case.inputs()
    work = sum(int(np.prod(CONV.output_shapes(case.params)[k])) * n
               for k, n in CONV.reductions(case.params).items())
    assert work >= GPU_REFERENCE_WORK
    assert isinstance(_reference_inputs(case, inputs)["x"], cupy.ndarray)
    m = get_model("fp32")
    refs = CONV.reference(inputs, case.params, m)
    got = {k: v.value.astype(np.float32) for k, v in refs.items()}
    verdicts = judge(case, m, inputs, got, with_diagnosis=False)
    assert set(verdicts) == set(got)
    assert all(v.passed for v in verdicts.values())
    bound = float(refs["grad_weight"].bound()[0, 0, 1, 1])
    got["grad_weight"][0, 0, 1, 1] += np.float32(4 * bound)  # outside that element's bound
    assert not judge(case, m, inputs, got, with_diagnosis=False)["grad_weight"].passed
