"""The ``realistic`` size regime: real layer shapes, within the limits, shrinking
by the same plan machinery."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from numoracle.cli._common import regime_shares, resolve_regime
from numoracle.errors import InvalidArgument
from numoracle.kernels import get_target
from numoracle.oracle.ops import OPS, get_op
from numoracle.strategies import REALISTIC_MAX_ELEMENTS, cases

FAST = settings(max_examples=25, database=None, deadline=None,
                suppress_health_check=list(HealthCheck))


def _elements(op: str, params: dict[str, Any]) -> int:
    o = get_op(op)
    p = o.validate(params)
    return max(sum(math.prod(s) for s in shapes.values())
               for shapes in (o.input_shapes(p), o.output_shapes(p)))


@FAST
@given(cases(op="conv2d", regime="realistic", storage="fp32"))
def test_realistic_conv2d_cases_are_layers_of_real_networks(case: Any) -> None:
    p = case.params
    assert p["in_channels"] in (3, 16, 32, 64, 128, 256, 512)
    assert p["out_channels"] in (16, 32, 64, 128, 256, 512)
    assert p["height"] == p["width"] and p["height"] in (7, 14, 28, 56, 112, 224)
    k = p["kernel_size"][0]
    assert p["kernel_size"] == (k, k) and k in (1, 3, 5, 7)
    assert p["padding"] == (k // 2, k // 2) and p["stride"] in ((1, 1), (2, 2))
    assert _elements("conv2d", p) <= REALISTIC_MAX_ELEMENTS


@pytest.mark.parametrize("op", sorted(n for n, o in OPS.items() if o.realistic_plan))
def test_realistic_cases_are_valid_and_within_the_limits(op: str) -> None:
    @FAST
    @given(cases(op=op, regime="realistic", max_elements=1 << 22))
    def check(case: Any) -> None:
        assert _elements(op, case.params) <= 1 << 22

    check()


def test_realistic_plans_reach_beyond_the_small_ones() -> None:
    sizes = {s.name: s.max_value for s in get_op("linear").realistic_plan
             if hasattr(s, "max_value")}
    assert sizes["in_features"] == 8192 and sizes["batch"] == 1 << 20
    assert any(s.name == "numel" and s.max_value >= 10**7 for s in get_op("optim").realistic_plan)


def test_an_unknown_regime_is_rejected() -> None:
    with pytest.raises(InvalidArgument, match="regime='huge' is unknown"):
        cases(op="linear", regime="huge")


def test_mixed_runs_give_gpu_targets_a_realistic_share() -> None:
    gpu = get_target("torch-cuda-fp32", "linear")
    cpu = get_target("numpy-fp32", "linear")
    assert [r for r, _ in regime_shares(gpu, "mixed")] == ["small", "realistic"]
    assert sum(share for _, share in regime_shares(gpu, "mixed")) == pytest.approx(1.0)
    assert regime_shares(cpu, "mixed") == [("small", 1.0)]
    assert regime_shares(cpu, "realistic") == [("realistic", 1.0)]
    assert regime_shares(get_target("numpy-fp32", "mlp_train"), "realistic") == [("small", 1.0)]
    assert resolve_regime("auto", [cpu]) == "small"
    assert resolve_regime("realistic", [cpu]) == "realistic"
