"""The float64 reference on the GPU (CuPy) agrees with the host's."""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.cases.case import Case
from numoracle.checking.check import GPU_REFERENCE_WORK, _reference_inputs
from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import get_model


@pytest.mark.gpu
@pytest.mark.parametrize("model", ["fp32", "bf16", "tf32"])
def test_gpu_reference_matches_the_host(model: str) -> None:
    cupy = pytest.importorskip("cupy")
    storage = "bf16" if model == "bf16" else "fp32"
    case = Case("linear", {"batch": 128, "in_features": 1024, "out_features": 700, "bias": True},
                storage=storage, family="normal", seed=3)
    inputs = case.inputs()
    dev = _reference_inputs(case, inputs)
    assert isinstance(dev["x"], cupy.ndarray), f"work above {GPU_REFERENCE_WORK}: on the GPU"
    op, m = get_op("linear"), get_model(model)
    host = op.reference(inputs, case.params, m)
    gpu = {k: v.to_host() for k, v in op.reference(dev, case.params, m).items()}
    for name, h in host.items():
        g = gpu[name]
        tol = float(np.max(h.ref_err + g.ref_err))
        np.testing.assert_allclose(g.value, h.value, rtol=0, atol=tol)
        np.testing.assert_allclose(g.det, h.det, rtol=1e-12)
        np.testing.assert_array_equal(g.det == 0, h.det == 0)
