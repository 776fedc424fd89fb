"""Parallel against sequential (seed 004's acceptance test) on the CPU: a NumPy
"parallel" backward that merges per-cell gradients in a shuffled order stays
within the two-order yardstick but is not bit-identical; one that loses updates
fails; a shuffled merge that claims the sequential order fails."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from numoracle.cases.case import Case
from numoracle.targets.target import Target
from numoracle.checking.equivalence import check_equivalence, claims_sequential, compare
from numoracle.kernels.numpy_logic import ca_numpy
from numoracle.oracle.precision import get_model
from numoracle.oracle.tracked import exact, matmul

PARAMS = {"height": 4, "width": 4, "channels": 2, "steps": 2, "kernels": 2, "hidden": 4,
          "periodic": True}
SEQUENTIAL = get_model("fp32", order="sequential", deterministic_runs=True)


def _target(name: str, merge: str, model=None, seed: int = 1) -> Target:
    fn = partial(ca_numpy, dtype=np.float32, merge=merge, seed=seed)
    return Target(name=name, op="logic_ca", backend="numpy",
                  precision=model or get_model("fp32"), fn=fn)


BASELINE = _target("sequential", "sequential", SEQUENTIAL)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shuffled_merge_is_within_the_yardstick_not_bit_identical(seed: int) -> None:
    case = Case(op="logic_ca", params=PARAMS, storage="fp32", family="normal", seed=seed)
    v = check_equivalence(case, _target("shuffled", "shuffled", seed=seed), BASELINE)
    assert v.passed, v.diagnosis
    assert not v.bit_identical  # the order changed the rounding somewhere
    assert 0 < max(v.ratios.values()) < 1


def test_sequential_merge_is_bit_identical() -> None:
    case = Case(op="logic_ca", params=PARAMS, storage="fp32", family="normal", seed=0)
    v = check_equivalence(case, _target("ordered", "sequential", SEQUENTIAL), BASELINE)
    assert v.passed and v.bit_identical and v.sequential


def test_lost_updates_fail_either_way() -> None:
    case = Case(op="logic_ca", params=PARAMS, storage="fp32", family="normal", seed=0)
    for model in (get_model("fp32"), SEQUENTIAL):
        v = check_equivalence(case, _target("racy", "racy", model), BASELINE)
        assert not v.passed
        assert "race or lost update" in v.diagnosis or "sequential merge" in v.diagnosis


def test_shuffled_merge_claiming_sequential_order_fails() -> None:
    case = Case(op="logic_ca", params=PARAMS, storage="fp32", family="normal", seed=0)
    v = check_equivalence(case, _target("shuffled", "shuffled", SEQUENTIAL), BASELINE)
    assert not v.passed and "claims the sequential merge order" in v.diagnosis


def test_claims() -> None:
    assert claims_sequential(SEQUENTIAL)
    assert not claims_sequential(get_model("fp32"))
    assert not claims_sequential(get_model("fp32", order="sequential"))


def test_compare_one_reduction_uses_twice_gamma_s() -> None:
    """For one reduction the yardstick is 2 gamma_{n-1}(u) S: a difference just inside
    passes, twice the bound fails."""
    x = np.array([[1.0, 2.0**-24, -1.0, 2.0**-25]])
    model = get_model("fp32")
    ref = {"y": matmul(exact(x), exact(np.ones((4, 1))), model)}
    bound = float(ref["y"].det[0, 0])
    base = {"y": np.array([[2.0**-24]])}
    inside = compare({"y": base["y"] + 1.9 * bound}, base, ref, model, sequential=False)
    outside = compare({"y": base["y"] + 2.1 * bound}, base, ref, model, sequential=False)
    assert inside.passed and not outside.passed
