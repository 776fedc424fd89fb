"""The verdict's ratio rule, on every kind of element: the shortcut taken when
every bound is positive and finite gives what the rule gives elementwise, and
the finite-sum shortcut of :func:`compare` agrees with its elementwise test."""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.checking.verdict import _ratios, compare
from numoracle.oracle.tracked import Tracked


def _rule(err: float, bound: float) -> float:
    if np.isnan(bound) or (np.isinf(bound) and np.isfinite(err)):
        return 0.0  # unjudged
    if bound == 0:
        return 0.0 if err == 0 else np.inf
    return err / bound


@pytest.mark.parametrize("seed", range(4))
def test_ratios_follow_the_rule(seed: int) -> None:
    rng = np.random.default_rng(seed)
    err = np.abs(rng.standard_normal(400)) * 10.0 ** rng.integers(-20, 5, 400)
    bound = np.abs(rng.standard_normal(400)) * 10.0 ** rng.integers(-20, 5, 400)
    special = [0.0, np.inf, np.nan, 1e-320]
    if seed:  # seed 0 keeps every bound positive and finite: the shortcut
        pick = rng.random(400) < 0.2
        bound[pick] = rng.choice(special, pick.sum())
        err[rng.random(400) < 0.1] = 0.0
        err[rng.random(400) < 0.05] = np.inf
    with np.errstate(all="ignore"):
        got = _ratios(err, bound)
        want = np.array([_rule(e, b) for e, b in zip(err, bound, strict=True)])
    np.testing.assert_array_equal(got, want)


def test_compare_places_nonfinite_values_after_a_finite_sum_check() -> None:
    value = np.array([1.0, 2.0, np.inf, 4.0])
    t = Tracked(value=value, ref_err=np.zeros(4), det=np.full(4, 0.5), prob=np.full(4, 0.5),
                mag=np.abs(value), n=1)
    ok = compare("y", value.copy(), t)
    assert ok.passed and ok.nonfinite is None
    bad = compare("y", np.array([1.0, 2.0, 3.0, 4.0]), t)
    assert not bad.passed and "not the reference's Inf" in (bad.nonfinite or "")
    huge = np.full(4, 1e308)  # finite, but its sum overflows: the elementwise test decides
    th = Tracked(value=huge, ref_err=np.zeros(4), det=np.full(4, 1e300),
                 prob=np.full(4, 1e300), mag=huge, n=1)
    v = compare("y", huge.copy(), th)
    assert v.passed and v.nonfinite is None and v.worst_ratio == 0.0
