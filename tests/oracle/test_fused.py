"""The fused bound arithmetic: CuPy's one-kernel forms give NumPy's passes' bits."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from numoracle.oracle.fused import add_rounding, contraction_radii, rounding_screen
from numoracle.oracle.precision import gamma


def _magnitudes(shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    s = np.abs(rng.standard_normal(shape)) * 2.0 ** rng.integers(-60, 60, shape)
    s.flat[::7] = 0.0
    s.flat[3] = 2.0**-1074
    return s


def test_contraction_radii_are_affine_in_the_grown_sum() -> None:
    S = _magnitudes((5, 6), 0)
    before = S.copy()
    g64 = float(gamma(np.asarray(40), 2.0**-53))
    det, prob, ref = contraction_radii(S, 1 + 2 * g64, 40 * 2.0**-1074, 3e-6, 1e-7, 1e-300, g64)
    grown = before * (1 + 2 * g64) + 40 * 2.0**-1074
    np.testing.assert_array_equal(S, grown)  # in place
    np.testing.assert_array_equal(det, grown * 3e-6 + 1e-300)
    np.testing.assert_array_equal(prob, grown * 1e-7 + 1e-300)
    np.testing.assert_array_equal(ref, grown * g64 + 40 * 2.0**-1074)
    assert np.all(det >= 3e-6 * before)  # never below the unrounded bound


def test_add_rounding_leaves_a_shared_radius_alone() -> None:
    v = np.array([[1.0, -2.0], [0.0, 3.0]])
    shared = np.full(2, 0.5)
    det_view = np.broadcast_to(shared, v.shape)
    prob = np.array([[0.1, 0.2], [0.3, 0.4]])
    det, prob2 = add_rounding(v, np.zeros_like(v), det_view, prob, 2.0**-24, 2.0**-126)
    np.testing.assert_array_equal(shared, [0.5, 0.5])
    assert prob2 is prob  # its own array: rounded in place
    u = 2.0**-24
    np.testing.assert_array_equal(det, 0.5 * (1 + u) + (np.abs(v) * u + 2.0**-126))
    assert rounding_screen(v, v, v) is None  # NumPy: separate passes, no screen


@pytest.mark.gpu
@pytest.mark.parametrize("per_element", [False, True])
def test_gpu_contraction_radii_match_the_host_bitwise(cupy: Any, per_element: bool) -> None:
    shape = (33, 47)
    S = _magnitudes(shape, 1)
    n = np.random.default_rng(2).integers(1, 4096, shape) if per_element else np.asarray(512)
    g64 = gamma(n, 2.0**-53)
    coefs = (1 + 2 * g64, n * 2.0**-1074, 7 * g64 + 1e-7, 3 * g64, (n + 2) * 2.0**-126, g64)
    host_S = S.copy()
    host = contraction_radii(host_S, *(c if per_element else float(c) for c in coefs))
    dev_S = cupy.asarray(S)
    dev = contraction_radii(dev_S, *(cupy.asarray(c) if per_element else float(c)
                                     for c in coefs))
    np.testing.assert_array_equal(cupy.asnumpy(dev_S), host_S)
    for h, d in zip(host, dev, strict=True):
        np.testing.assert_array_equal(cupy.asnumpy(d), h)


@pytest.mark.gpu
def test_gpu_rounding_matches_the_host_bitwise_and_screens(cupy: Any) -> None:
    rng = np.random.default_rng(3)
    v = rng.standard_normal((64, 80)) * 2.0 ** rng.integers(-30, 30, (64, 80))
    ref = np.abs(v) * 2.0**-50
    det, prob = _magnitudes(v.shape, 4) + 1e-300, _magnitudes(v.shape, 5) + 1e-300
    u, tiny = 2.0**-24, 2.0**-126
    host = add_rounding(v, ref, det.copy(), prob.copy(), u, tiny)
    dv, dref = cupy.asarray(v), cupy.asarray(ref)
    dev = add_rounding(dv, dref, cupy.asarray(det), cupy.asarray(prob), u, tiny)
    for h, d in zip(host, dev, strict=True):
        np.testing.assert_array_equal(cupy.asnumpy(d), h)
    top = rounding_screen(dv, dref, cupy.asarray(det))
    assert top == float(np.max(np.abs(v) + ref + det))
    zero = det.copy()
    zero[5, 7] = 0.0
    assert rounding_screen(dv, dref, cupy.asarray(zero)) == np.inf
    nan = det.copy()
    nan[0, 0] = np.nan
    top_nan = rounding_screen(dv, dref, cupy.asarray(nan))
    assert top_nan is not None and np.isnan(top_nan)


@pytest.mark.gpu
def test_gpu_lowest_set_bit_matches_the_host(cupy: Any) -> None:
    from numoracle.oracle.tracked import _NO_GRID, lsb_exponent

    rng = np.random.default_rng(6)
    for k in range(40):
        x = rng.standard_normal(int(rng.integers(1, 300))) * 2.0 ** int(rng.integers(-1100, 1000))
        if k % 2:
            x = np.round(x * 2.0**20) / 2.0 ** int(rng.integers(0, 40))
        if k % 3 == 0:
            x[0] = 5e-324 * int(rng.integers(1, 1 << 20))  # subnormal
        if k % 5 == 0:
            x[-1] = [np.inf, -np.inf, np.nan][k % 3]
        if k % 7 == 0:
            x[:] = 0.0
        host = lsb_exponent(x)
        assert lsb_exponent(cupy.asarray(x)) == host
        assert lsb_exponent(cupy.asarray(x.reshape(1, -1)).T) == host  # any layout
    assert lsb_exponent(cupy.zeros(0)) == _NO_GRID
