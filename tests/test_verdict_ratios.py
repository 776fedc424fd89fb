"""The verdict's ratio rule, on every kind of element: the shortcut taken when
every bound is positive and finite gives what the rule gives elementwise, and
the finite-sum shortcut of :func:`compare` agrees with its elementwise test."""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.checking import ratios as ratio_module
from numoracle.checking import verdict
from numoracle.checking.ratios import kth_smallest, max_median
from numoracle.checking.ratios import ratios as _ratios
from numoracle.checking.verdict import compare
from numoracle.oracle.tracked import Tracked, bounded


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


def _sample(rng: np.random.Generator, n: int) -> np.ndarray:
    """Ratios as a verdict has them: many zeros, ties, a few infinities."""
    r = np.abs(rng.standard_normal(n)) * 10.0 ** rng.integers(-3, 2, n)
    r[rng.random(n) < 0.3] = 0.0
    r[rng.random(n) < 0.1] = 0.5
    r[rng.random(n) < 0.01] = np.inf
    return r


@pytest.mark.parametrize("n", [1, 2, 3, 10, 11, 1000, 1001])
def test_the_kth_smallest_by_bisection_is_the_sorted_arrays(n: int) -> None:
    r = _sample(np.random.default_rng(n), n)
    s = np.sort(r)
    for k in sorted({0, n // 2 - 1 if n > 1 else 0, n // 2, n - 1}):
        assert kth_smallest(np, r, k) == s[k]


@pytest.mark.parametrize("n", [9_999, 10_000])
def test_a_large_arrays_median_by_selection_is_numpys(monkeypatch: pytest.MonkeyPatch,
                                                      n: int) -> None:
    monkeypatch.setattr(ratio_module, "SELECT_LEAST", 100)
    for seed in range(3):
        r = _sample(np.random.default_rng(seed), n)
        assert max_median(np, r) == (float(np.max(r)), float(np.median(r)))
    r[17] = np.nan
    assert all(np.isnan(x) for x in max_median(np, r))


def _reference(rng: np.random.Generator, shape: tuple[int, ...], *, exact: bool = False,
               lo: bool = False) -> Tracked:
    value = rng.standard_normal(shape)
    det = np.zeros(shape) if exact else np.abs(value) * 2.0 ** -22 + 1e-9
    prob = det / 3
    ref = bounded(value, det, prob, ref_err=np.broadcast_to(np.float64(1e-30), shape),
                  n=rng.integers(1, 50, shape))
    if lo:
        from dataclasses import replace  # noqa: PLC0415

        ref = replace(ref, lo=rng.standard_normal(shape) * 1e-17)
    return ref


def _fields(v: verdict.OutputVerdict) -> tuple:
    worst = [(w.index, w.reference, w.got, w.error, w.bound, w.ratio, w.n, w.magnitude)
             for w in v.worst]
    return (v.shape, v.n, v.passed, v.mismatched, v.worst_ratio, v.median_ratio,
            v.worst_ratio_det, v.worst_ratio_prob, v.median_ratio_det, v.median_ratio_prob,
            v.exact, v.nonfinite, worst)


@pytest.mark.parametrize("case", ["within", "outside", "exact", "nonfinite", "lo",
                                  "probabilistic"])
def test_a_large_output_compared_in_pieces_gets_the_whole_comparisons_verdict(
        monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """Pieces of 3 rows (of 7) of a 20 x 7 output: every field of the verdict, the
    worst elements' reports included, as the comparison of the whole gives."""
    rng = np.random.default_rng(len(case))
    shape = (20, 7)
    ref = _reference(rng, shape, exact=case == "exact", lo=case == "lo")
    exact_value = ref.value + (0 if ref.lo is None else ref.lo)
    got = (exact_value + rng.uniform(-0.5, 0.5, shape) * ref.det).astype(np.float32)
    if case == "outside":
        got[[3, 11, 19], [0, 5, 6]] += np.float32(1e-3)
    if case == "exact":
        got = exact_value.astype(np.float32).astype(np.float64)
        got[7, 2] += 1.0
        ref = bounded(got.copy(), np.zeros(shape), n=1)
        got[7, 2] += 1.0
    if case == "nonfinite":
        got[2, 3], got[15, 0] = np.nan, np.inf
    probabilistic = case == "probabilistic"
    whole = compare("out", got, ref, probabilistic=probabilistic)
    monkeypatch.setattr(verdict, "COMPARE_PIECE", 21)
    pieces = compare("out", got, ref, probabilistic=probabilistic)
    assert repr(_fields(pieces)) == repr(_fields(whole))  # NaN alike
    assert whole.passed == (case in ("within", "lo"))
