"""The loops' own ``exp`` and ``expm1`` (``numoracle/oracle/_numba_exp.py``) against
mpmath: within their proven errors over the whole float64 domain (drawn arguments and
the edges: subnormal results, the overflow and underflow thresholds, the infinities,
NaN, signed zeros, the reduction's switch points), and within the error the oracle's
radii allow for its reference's ``exp``."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numoracle.oracle import elementwise as ew
from numoracle.oracle.tracked import U64

nx = pytest.importorskip("numoracle.oracle._numba_exp")  # (numba is optional)

MAX = np.finfo(np.float64).max
#: the largest argument whose exp is finite, and the smallest whose exp is not 0
OVER = 709.782712893384
UNDER = -745.1332191019411
EDGES = np.array([0.0, -0.0, 1.0, -1.0, 5e-324, -5e-324, 1e-300, -1e-300, 0.3466, -0.3466,
                  0.34657359027997264, -0.34657359027997264, OVER, np.nextafter(OVER, np.inf),
                  709.78, 710.0, 746.0, 1e308, UNDER, np.nextafter(UNDER, -np.inf), -745.0,
                  -708.4, -708.39641853226408, -709.0, -720.0, -744.44007192138122, -746.0,
                  -1e308, np.inf, -np.inf, np.nan, 88.7, -103.97, 2.0**-30])


def _exp(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    nx.exp_into(np.ascontiguousarray(x, dtype=np.float64), out)
    return out


def _expm1_up(a: np.ndarray) -> np.ndarray:
    out = np.empty_like(a)
    nx.expm1_up_into(np.ascontiguousarray(a, dtype=np.float64), out)
    return out


def _check_exp(x: np.ndarray) -> None:
    """Each result within EXP_REL of e^x relative (2^-1075 more where subnormal): NaN for
    NaN, inf where e^x rounds past the largest float, 0 where it rounds to 0."""
    got = _exp(x)
    with mpmath.workprec(200):
        half_ulp_top = mpmath.mpf(MAX) * (1 + mpmath.mpf(2) ** -54)
        for xi, gi in zip(x.tolist(), got.tolist()):
            if xi != xi:
                assert gi != gi
                continue
            if xi == -np.inf:
                assert gi == 0.0
                continue
            if xi == np.inf:
                assert gi == np.inf
                continue
            truth = mpmath.exp(mpmath.mpf(xi))
            if truth >= half_ulp_top:
                assert gi == np.inf, xi
                continue
            assert gi < np.inf, xi
            err = abs(mpmath.mpf(gi) - truth)
            allowed = nx.EXP_REL * truth + (mpmath.mpf(2) ** -1075 if truth < 2.0**-1022 else 0)
            assert err <= allowed, (xi, gi, float(err / truth) / 2.0**-53)


def test_exp_at_the_edges() -> None:
    _check_exp(EDGES)
    got = _exp(EDGES)
    assert got[EDGES == OVER][0] < np.inf and got[EDGES == np.nextafter(OVER, np.inf)][0] == np.inf
    assert got[EDGES == UNDER][0] == 5e-324 and got[EDGES == -746.0][0] == 0.0
    assert np.all(got[(EDGES == 0.0)] == 1.0)


def test_exp_over_its_whole_range() -> None:
    """Evenly spread arguments over the range where the result is neither 0 nor inf,
    and through the subnormal results."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(UNDER - 1, OVER + 1, 1500),
                        rng.uniform(-745.2, -708.0, 500),
                        rng.standard_normal(500) * 3.0,
                        rng.standard_normal(200) * 1e-6,
                        # the reduction's switch points k ln 2 / 2, either side
                        (np.arange(-40, 40) + 0.5) * np.log(2.0) * (1 + 1e-15),
                        (np.arange(-40, 40) + 0.5) * np.log(2.0) * (1 - 1e-15)])
    _check_exp(x)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=20))
def test_exp_on_drawn_floats(xs: list[float]) -> None:
    _check_exp(np.array(xs, dtype=np.float64))


def _check_expm1_up(a: np.ndarray) -> None:
    """At least e^a - 1, and at most EXPM1_REL above it (inf past the overflow)."""
    got = _expm1_up(a)
    with mpmath.workprec(200):
        for ai, gi in zip(a.tolist(), got.tolist()):
            if ai != ai:
                assert gi != gi
                continue
            truth = mpmath.expm1(mpmath.mpf(ai))
            if truth > MAX:
                assert gi == np.inf
                continue
            assert mpmath.mpf(gi) >= truth, (ai, gi)
            assert mpmath.mpf(gi) <= truth * (1 + mpmath.mpf(nx.EXPM1_REL)), (ai, gi)


def test_expm1_up_is_an_upper_bound() -> None:
    rng = np.random.default_rng(1)
    a = np.concatenate([
        [0.0, 5e-324, 1e-300, 2.0**-60, 1e-8, 0.3465999, 0.3466, 0.3466001, 1.0, 20.0, 700.0,
         709.78, 709.8, 800.0, np.inf, np.nan],
        np.abs(rng.standard_normal(800)) * 10.0 ** rng.uniform(-15, 2.8, 800),
        rng.uniform(0.3, 0.4, 200)])
    _check_expm1_up(a)


def test_the_radii_allow_for_the_loops_exp() -> None:
    """The oracle's radius for its own ``exp`` (``_REF_ULPS`` float64 units of the
    result) covers the loops' proven error."""
    assert nx.EXP_REL <= ew._REF_ULPS * U64
