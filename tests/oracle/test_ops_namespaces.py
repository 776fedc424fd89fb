"""The hand-written ops that compute in their inputs' namespace (linear, matmul, conv2d)
give in torch's namespace what they give in NumPy: drawn cases, values within the
oracle's own error, radii within the float32 magnitude sums' margin."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from numoracle.cases.case import Case
from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import get_model
from numoracle.oracle.xp import array_module, as_namespace, namespace_named, on_device
from numoracle.strategies.cases import cases

#: NumPy may sum a contraction's magnitudes in float32, torch sums them in float64: the
#: bound up to 2^-11 of itself sharper (numoracle.oracle.tracked.SINGLE_SUMS)
RADIUS_SHARE = 2.0**-10


def _agree(case: Case, model: str) -> None:
    torch_xp = namespace_named("torch")
    op, m = get_op(case.op), get_model(model)
    inputs = case.inputs()
    host = op.reference(inputs, case.params, m)
    with on_device(torch_xp, "cpu"):
        given_ = {k: as_namespace(v, torch_xp) if np.asarray(v).dtype.kind == "f" else v
                  for k, v in inputs.items()}
        other = op.reference(given_, case.params, m)
    assert set(host) == set(other)
    for name, h in host.items():
        o = other[name]
        assert array_module(o.value) is torch_xp, f"{case.op}.{name} left torch's namespace"
        o = o.to_host()
        shape = np.shape(h.value)
        hv, ov = (np.broadcast_to(t.value + (0.0 if t.lo is None else t.lo), shape)
                  for t in (h, o))
        slack = np.broadcast_to(h.ref_err + o.ref_err, shape)
        with np.errstate(invalid="ignore"):
            same = (hv == ov) | (np.isnan(hv) & np.isnan(ov)) | (np.abs(hv - ov) <= slack)
            assert same.all(), f"{case.op}.{name}: values differ beyond the oracle's error"
            for field in ("det", "prob"):
                a, b = (np.broadcast_to(getattr(t, field), shape) for t in (h, o))
                close = (a == b) | (np.isnan(a) & np.isnan(b)) | (
                    np.abs(a - b) <= RADIUS_SHARE * np.maximum(np.abs(a), np.abs(b)))
                assert close.all(), f"{case.op}.{name}: {field} differs"


@pytest.mark.parametrize("op", ["linear", "matmul", "conv2d"])
def test_a_hand_written_op_in_torch_agrees_with_numpy(op: str) -> None:
    @settings(max_examples=2, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(case=cases(op=op, storage=("fp32", "bf16"), max_elements=800))
    def check(case: Case) -> None:
        _agree(case, "bf16" if case.storage == "bf16" else "fp32")

    check()
