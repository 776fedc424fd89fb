"""The hand-written ops' references on a GPU (CuPy, as a large case's reference is
computed there) give what they give in NumPy: drawn cases under every precision model a
target of the op claims, special values overlaid at times; values within the oracle's
own error, radii within the float32 magnitude sums' margin, and never a radius 0 on the
device where the host's is not (a zero radius the host does not give would judge a
kernel against an exact value it need not meet)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from numoracle.cases.case import Case
from numoracle.errors import UnsupportedCase
from numoracle.kernels import all_targets
from numoracle.oracle.ops import OPS, get_op
from numoracle.oracle.precision import PrecisionModel
from numoracle.strategies.cases import cases

#: NumPy may sum a contraction's magnitudes in float32, CuPy sums them in float64: the
#: bound up to 2^-11 of itself sharper (numoracle.oracle.tracked.SINGLE_SUMS)
RADIUS_SHARE = 2.0**-10


def _models(op: str) -> list[PrecisionModel]:
    """The distinct precision models the op's targets claim (at most four)."""
    seen: dict[str, PrecisionModel] = {}
    for t in all_targets(op):
        seen.setdefault(t.precision.name, t.precision)
    return list(seen.values())[:4]


def _agree(cupy: Any, case: Case, model: PrecisionModel) -> None:
    op = get_op(case.op)
    inputs = case.inputs()
    dev_inputs = {k: cupy.asarray(v) if np.asarray(v).dtype.kind == "f" else v
                  for k, v in inputs.items()}
    try:
        host = op.reference(inputs, case.params, model)
    except UnsupportedCase:  # not judged on the host: nor on the device
        with pytest.raises(UnsupportedCase):
            op.reference(dev_inputs, case.params, model)
        return
    dev = op.reference(dev_inputs, case.params, model)
    assert set(host) == set(dev)
    where = f"{case.op} {case.describe()} under {model.name}"
    for name, h in host.items():
        d = dev[name].to_host()
        shape = np.shape(h.value)
        hv, dv = (np.broadcast_to(t.value + (0.0 if t.lo is None else t.lo), shape)
                  for t in (h, d))
        slack = np.broadcast_to(h.ref_err + d.ref_err, shape)
        with np.errstate(invalid="ignore"):
            same = (hv == dv) | (np.isnan(hv) & np.isnan(dv)) | (np.abs(hv - dv) <= slack)
            assert same.all(), f"{where}: {name}'s values differ beyond the oracle's error"
            for field in ("det", "prob"):
                a, b = (np.broadcast_to(getattr(t, field), shape) for t in (h, d))
                zero_here_only = (b == 0) & (a != 0)
                assert not zero_here_only.any(), (
                    f"{where}: {name}'s {field} radius is 0 on the device at "
                    f"{int(zero_here_only.sum())} elements where the host's is not "
                    f"(e.g. {a[zero_here_only].flat[0]!r})")
                close = (a == b) | (np.isnan(a) & np.isnan(b)) | (
                    np.abs(a - b) <= RADIUS_SHARE * np.maximum(np.abs(a), np.abs(b)))
                assert close.all(), f"{where}: {name}'s {field} radius differs"


def _check(cupy: Any, op: str, model: PrecisionModel, examples: int) -> None:
    """``examples`` drawn cases of ``op`` (derandomized) compared under ``model``."""
    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(case=cases(op=op, storage=model.storage.name, max_elements=800, max_overlays=2))
    def check(case: Case) -> None:
        _agree(cupy, case, model)

    check()


@pytest.mark.gpu
@pytest.mark.parametrize("op", sorted(OPS))
def test_a_hand_written_op_on_cupy_gives_the_hosts_radii(op: str) -> None:
    cupy = pytest.importorskip("cupy")
    for model in _models(op):
        _check(cupy, op, model, 6)
