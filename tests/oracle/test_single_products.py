"""The float32 products of radii (numoracle.oracle.single_products): upper bounds of the
exact products (checked in exact rational arithmetic), never below the float64 GEMM
they replace, above it by less than 2^-11 of it; None where they may not run."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numoracle.oracle import fused_cpu, single_products, tracked
from numoracle.oracle.fused import single_magnitude
from numoracle.oracle.precision import get_model
from numoracle.oracle.tracked import Tracked, bounded, exact, matmul

pytestmark = pytest.mark.skipif(not fused_cpu.available(), reason="the loops need numba")


@pytest.fixture(autouse=True)
def _any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small products take the float32 GEMMs too."""
    monkeypatch.setattr(single_products, "PRODUCT_MIN", 0)
    monkeypatch.setattr(single_products, "SIDE_MIN", 1)


def _exact(x: np.ndarray, y: np.ndarray) -> list[list[Fraction]]:
    fx = [[Fraction(float(v)) for v in row] for row in x]
    fy = [[Fraction(float(v)) for v in row] for row in y]
    return [[sum((fx[i][l] * fy[l][j] for l in range(x.shape[1])), Fraction(0))
             for j in range(y.shape[1])] for i in range(x.shape[0])]


def _mags(values: np.ndarray) -> single_products.Magnitudes:
    return single_products.Magnitudes(single_magnitude(np.abs(values)))


def _check(m: np.ndarray, r: np.ndarray, mags_first: bool) -> np.ndarray:
    """The float32 product of magnitudes ``m`` and radius ``r``, checked: at least the
    exact product, at least the float64 GEMM, within 2^-11 of it."""
    mags = _mags(m)
    x, y = (mags.single.astype(np.float64), r) if mags_first else (
        r, mags.single.astype(np.float64))
    got = single_products.upper_product(mags, r, mags_first)
    assert got is not None and got.dtype == np.float64
    exact_ = _exact(x, y)
    for i in range(got.shape[0]):
        for j in range(got.shape[1]):
            assert Fraction(float(got[i, j])) >= exact_[i][j], (i, j)
    old = x @ y
    assert np.all(got >= old)
    assert np.all(got <= old * (1 + 2.0**-11))
    assert np.array_equal(got == 0, old == 0)  # a zero product stays zero, exactly
    return got


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 7), st.integers(1, 9), st.integers(1, 6), st.integers(-80, 80),
       st.integers(0, 40), st.booleans(), st.integers(0, 2**32 - 1))
def test_a_drawn_product_bounds_the_exact_one(m: int, k: int, n: int, e: int, spread: int,
                                              mags_first: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    mag = rng.standard_normal((m, k) if mags_first else (k, n)) * 2.0 ** rng.integers(
        -spread, spread + 1, (m, k) if mags_first else (k, n))
    shape = (k, n) if mags_first else (m, k)
    rad = np.abs(rng.standard_normal(shape)) * 2.0 ** (e + rng.integers(-spread, spread + 1,
                                                                          shape))
    rad.flat[1::3] = 0.0  # structural zeros (the first element kept: some nonzero)
    _check(mag.astype(np.float32).astype(np.float64), rad, mags_first)


def test_the_edges_of_float32s_range_are_scaled_into_it() -> None:
    # radii float32 cannot hold (far below its smallest normal, far above its largest)
    # beside magnitudes at the ends of float32's normal range
    for mag, rad in (
            (np.array([[1.0, 2.0**100, 3.0], [2.0**-20, 0.0, 1.0]]),
             np.array([[1e-280, 3e-275], [2e-270, 0.0], [1e-279, 5e-281]])),
            (np.array([[2.0**-126, 1.0, 3.0], [2.0, 2.0**-100, 0.0]]),
             np.array([[2.0**300, 1e90], [2.0**250, 7.0e95], [0.0, 1e100]])),
            (np.array([[2.0**-50, 1.0, 2.0**50], [3.0, 2.0**-40, 0.0]]),
             np.array([[1e-30, 3e-40], [0.1, 0.0], [1e-40, 1e-38]]))):
        _check(mag, rad, mags_first=True)
        _check(mag.T.copy(), rad.T.copy(), mags_first=False)


def test_products_below_float64s_normal_range_are_left_to_float64() -> None:
    # subnormal float64 radii: their products lie below float64's smallest normal
    # (scaling back would round them), as the float64 GEMM's do
    mag = np.array([[2.0**-126, 1.0, 2.0**100], [3.0, 2.0**-100, 0.0]])
    rad = np.array([[2.0**-1074, 2.0**-1060], [2.0**-1070, 0.0], [5e-324, 1e-320]])
    assert single_products.upper_product(_mags(mag), rad, True) is None


def test_a_long_contraction_is_summed_in_chunks() -> None:
    rng = np.random.default_rng(3)
    k = 2 * 2048 + 5
    mag = np.abs(rng.standard_normal((2, k))).astype(np.float32).astype(np.float64)
    rad = np.abs(rng.standard_normal((k, 3))) * 1e-9
    _check(mag, rad, mags_first=True)


def test_rounding_up_takes_the_float32_above() -> None:
    # radii just above float32 numbers: rounded to the nearest they would fall below
    f = np.float32(1.0 + 2.0**-23)
    rad = np.full((4, 4), float(f) * (1 + 2.0**-40))
    mag = np.ones((4, 4))
    got = _check(mag, rad, mags_first=True)
    assert np.all(got > 4 * float(f))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, -1.0, -0.0, -1e-320])
def test_a_radius_that_is_not_a_finite_nonnegative_number_is_left_to_float64(
        bad: float) -> None:
    rad = np.ones((3, 2))
    rad[1, 1] = bad
    assert single_products.upper_product(_mags(np.ones((2, 3))), rad, True) is None


def test_a_range_float32_cannot_scale_into_is_left_to_float64() -> None:
    rad = np.array([[1e-300, 1e10], [1.0, 1.0]])  # more than 2^240 apart
    assert single_products.upper_product(_mags(np.ones((2, 2))), rad, True) is None
    assert single_products.upper_product(_mags(np.ones((2, 2))), np.zeros((2, 2)),
                                         True) is None  # no nonzero: nothing to scale


def test_small_products_are_left_to_float64(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(single_products, "PRODUCT_MIN", 1 << 24)
    monkeypatch.setattr(single_products, "SIDE_MIN", 64)
    assert single_products.upper_product(_mags(np.ones((63, 64))), np.ones((64, 64)),
                                         True) is None
    assert single_products.upper_product(_mags(np.ones((64, 64))), np.ones((64, 64)),
                                         True) is None


def test_a_contraction_with_radii_bounds_above_its_float64_propagation(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """tracked.matmul with one operand's radii: values and magnitudes the same bits,
    each radius at least the float64 products' and within 2^-11 of it."""
    monkeypatch.setattr(fused_cpu, "LOOP_MIN", 1)
    rng = np.random.default_rng(5)
    av = rng.standard_normal((40, 30)).astype(np.float32).astype(np.float64)
    bv = rng.standard_normal((30, 50)).astype(np.float32).astype(np.float64)

    def radii(v: np.ndarray) -> Tracked:
        return bounded(v, np.abs(v) * 2.0**-24, np.abs(v) * 2.0**-26,
                       ref_err=np.abs(v) * 2.0**-60)

    model = get_model("fp32")
    outs = []
    for minimum in (1 << 62, 0):  # float64 products, then float32's
        monkeypatch.setattr(single_products, "PRODUCT_MIN", minimum)
        for x, y in ((radii(av), exact(bv)), (exact(bv.T.copy()), radii(av.T.copy()))):
            outs.append(matmul(x, y, model))
    for old, new in zip(outs[:2], outs[2:], strict=True):
        assert np.array_equal(old.value, new.value)
        for f in ("det", "prob", "ref_err"):
            o, g = getattr(old, f), getattr(new, f)
            assert np.all(g >= o) and np.all(g <= o * (1 + 2.0**-11)), f
        assert np.any(new.det != old.det)  # the float32 products did run


def test_tracked_uses_float32_products_only_with_single_sums(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fused_cpu, "LOOP_MIN", 1)
    calls: list[int] = []
    real = single_products.upper_product
    monkeypatch.setattr(single_products, "upper_product",
                        lambda *a: calls.append(1) or real(*a))
    av = np.ones((8, 8))
    a = bounded(av, np.full_like(av, 1e-7))
    monkeypatch.setattr(tracked, "SINGLE_SUMS", False)
    matmul(a, exact(av), get_model("fp32"))
    assert not calls
    monkeypatch.setattr(tracked, "SINGLE_SUMS", True)
    matmul(a, exact(av), get_model("fp32"))
    assert calls


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from([0.0, 5e-324, 1e-310, 2.0**-1022, 1e-30, 0.5, 1.0, 3e38,
                                 1e300, 1.7976931348623157e308]), min_size=1, max_size=40))
def test_the_range_from_bits_is_the_range_of_the_numbers(values: list[float]) -> None:
    x = np.array(values)
    nonzero = x[x != 0]
    want = None if not nonzero.size else (float(nonzero.min()), float(x.max()))
    assert single_products._range(x) == want
    x32 = x[x <= 3e38].astype(np.float32)  # the magnitudes' float32 range, the same
    if x32.size:
        assert single_products._range(x32) == single_products._range(x32.astype(np.float64))


def test_equal_radii_are_multiplied_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Equal deterministic and probabilistic radii (distinct arrays): one product
    for both, the same bits as two."""
    monkeypatch.setattr(fused_cpu, "LOOP_MIN", 1)
    calls: list[int] = []
    real = single_products.upper_product
    monkeypatch.setattr(single_products, "upper_product",
                        lambda *a: calls.append(1) or real(*a))
    rng = np.random.default_rng(7)
    av = rng.standard_normal((20, 30))
    d = np.abs(av) * 2.0**-24
    shared = matmul(bounded(av, d, d.copy(), ref_err=d * 2.0**-30), exact(av.T.copy()),
                    get_model("fp32"))
    assert len(calls) == 2  # det (prob the same), ref_err
    monkeypatch.setattr(tracked, "_same_radii", lambda t: t.prob is t.det)
    apart = matmul(bounded(av, d, d.copy(), ref_err=d * 2.0**-30), exact(av.T.copy()),
                   get_model("fp32"))
    assert len(calls) == 5
    for f in ("value", "det", "prob", "ref_err", "mag"):
        assert np.array_equal(getattr(shared, f), getattr(apart, f)), f


@pytest.mark.parametrize("mags_first", [True, False])
@pytest.mark.parametrize("which", ["radius", "magnitudes", "both"])
def test_stacks_of_transposed_matrices_take_the_float32_products(
        mags_first: bool, which: str) -> None:
    """A permuted view (a stack of transposed matrices) of radius or magnitudes: the
    float32 products run, bound the exact ones (each matrix against the float64
    GEMM, within 2^-11) and give the bits of the same operands laid out in C order."""
    rng = np.random.default_rng(11)
    b, m, k, n = 3, 5, 7, 4
    mag = rng.standard_normal((b, m, k) if mags_first else (b, k, n))
    rad = np.abs(rng.standard_normal((b, k, n) if mags_first else (b, m, k))) * 2.0**-30
    rad[..., 1::3, :] = 0.0

    def permuted(x: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(x.swapaxes(-1, -2)).swapaxes(-1, -2)

    mag_in = permuted(mag) if which in ("magnitudes", "both") else mag
    rad_in = permuted(rad) if which in ("radius", "both") else rad
    assert not (mag_in.flags.c_contiguous and rad_in.flags.c_contiguous)
    mags = _mags(mag_in)
    assert mags.single.flags.c_contiguous == (which == "radius")  # (its layout kept)
    got = single_products.upper_product(mags, rad_in, mags_first)
    assert got is not None
    plain = single_products.upper_product(_mags(mag), rad, mags_first)
    assert plain is not None
    for i in range(b):
        m64 = mags.single[i].astype(np.float64)
        x, y = (m64, rad[i]) if mags_first else (rad[i], m64)
        exact_ = _exact(x, y)
        old = x @ y
        assert np.all(got[i] >= old) and np.all(got[i] <= old * (1 + 2.0**-11))
        for p in range(got.shape[1]):
            for q in range(got.shape[2]):
                assert Fraction(float(got[i, p, q])) >= exact_[p][q]
    # the same scaled radius and magnitudes: the float32 GEMM may add in another order
    assert np.allclose(got, plain, rtol=2.0**-20, atol=0.0)


def test_a_layout_no_permutation_makes_contiguous_is_left_to_float64() -> None:
    rad = np.ones((4, 6))[:, ::2]  # every other column: no memory order visits it alone
    assert single_products._flat(rad) is None
    assert single_products.upper_product(_mags(np.ones((3, 4))), rad, True) is None


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.integers(1, 8), st.integers(1, 6), st.integers(-60, 60),
       st.integers(0, 30), st.booleans(), st.integers(0, 2**32 - 1))
def test_a_product_of_two_radii_bounds_the_exact_one(m: int, k: int, n: int, e: int,
                                                     spread: int, transposed: bool,
                                                     seed: int) -> None:
    """radii_product: whichever operand is the smaller takes the magnitudes' place;
    at least the exact product and the float64 GEMM, within 2^-11 of it."""
    rng = np.random.default_rng(seed)

    def radius(shape: tuple[int, int]) -> np.ndarray:
        r = np.abs(rng.standard_normal(shape)) * 2.0 ** (e + rng.integers(-spread, spread + 1,
                                                                            shape))
        r.flat[2::4] = 0.0
        return r

    ra, rb = radius((m, k)), radius((k, n))
    if transposed:  # (laid out as the transposes of C arrays)
        ra, rb = ra.T.copy().T, rb.T.copy().T
    got = single_products.radii_product(ra, rb)
    assert got is not None
    exact_ = _exact(ra, rb)
    old = ra @ rb
    for i in range(m):
        for j in range(n):
            assert Fraction(float(got[i, j])) >= exact_[i][j], (i, j)
    assert np.all(got >= old) and np.all(got <= old * (1 + 2.0**-11))
    assert np.array_equal(got == 0, old == 0)


@pytest.mark.parametrize("bad", [np.nan, np.inf, 1e-300, 1e300])
def test_radii_float32_cannot_carry_are_left_to_float64(bad: float) -> None:
    """A NaN or an infinity in the smaller radius, or a nonzero one outside float32's
    normal range: None (the float64 GEMM, whose NaN and infinity rules apply)."""
    ra, rb = np.full((2, 3), 1e-8), np.full((3, 4), 1e-8)
    ra[1, 2] = bad
    assert single_products.radii_product(ra, rb) is None
    assert single_products.radii_product(np.zeros((2, 3)), rb) is None


def test_a_contraction_of_two_operands_with_radii_bounds_above_its_float64_propagation(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """tracked.matmul with radii on both operands (three products per radius, the
    radii's own among them): values the same bits, each radius and the magnitude
    (grown by the propagated radius) at least the float64 products' and within 2^-11
    of it; the radii's product runs in
    float32 (it is called and gives a result)."""
    monkeypatch.setattr(fused_cpu, "LOOP_MIN", 1)
    rng = np.random.default_rng(9)
    av = rng.standard_normal((4, 40, 30)).astype(np.float32).astype(np.float64)
    bv = rng.standard_normal((4, 50, 30)).astype(np.float32).astype(np.float64)

    def radii(v: np.ndarray) -> Tracked:
        return bounded(v, np.abs(v) * 2.0**-24 + 2.0**-40, np.abs(v) * 2.0**-26,
                       ref_err=np.abs(v) * 2.0**-60)

    ran: list[bool] = []
    real = single_products.radii_product
    monkeypatch.setattr(single_products, "radii_product",
                        lambda *a: ran.append(real(*a) is not None) or real(*a))
    model = get_model("fp32")
    outs = []
    for minimum in (1 << 62, 0):  # float64 products, then float32's
        monkeypatch.setattr(single_products, "PRODUCT_MIN", minimum)
        b = tracked.tmap(radii(bv), lambda x: x.swapaxes(-1, -2))  # (a transposed stack)
        outs.append(matmul(radii(av), b, model))
    assert ran == [False] * 3 + [True] * 3  # det, prob, ref_err
    old, new = outs
    assert np.array_equal(old.value, new.value)
    for f in ("det", "prob", "ref_err", "mag"):
        o, g = getattr(old, f), getattr(new, f)
        assert np.all(g >= o) and np.all(g <= o * (1 + 2.0**-11)), f
        assert np.any(g != o), f
