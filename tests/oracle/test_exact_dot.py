"""The exact context (slice GEMMs, :mod:`numoracle.oracle.exact_dot`) against mpmath:
the stated bound holds on random, cancelling, subnormal-adjacent and
wide-exponent-range inputs, and it is small enough that a float64 kernel off by
a little more than its claimed bound still fails."""

from __future__ import annotations

from typing import Any

import mpmath
import numpy as np
import pytest

from numoracle.checking.verdict import compare
from numoracle.oracle.exact_dot import exact_matmul, slice_bits
from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import get_model
from numoracle.oracle.tracked import exact, matmul, store

U = 2.0**-53


def _exact_sums(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None) -> list:
    """Every element of ``a @ b (+ bias)`` exactly (mpmath at 2,300 bits covers
    the whole float64 exponent range of a product)."""
    with mpmath.workprec(2300):
        out = []
        for i in range(a.shape[0]):
            row = []
            for j in range(b.shape[1]):
                s = mpmath.fsum(mpmath.mpf(float(a[i, k])) * mpmath.mpf(float(b[k, j]))
                                for k in range(a.shape[1]))
                if bias is not None:
                    s += mpmath.mpf(float(bias[j]))
                row.append(s)
            out.append(row)
        return out


def _check(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None,
           rel: float = 2.0**-60) -> np.ndarray:
    """Assert ``|hi + lo - exact| <= err`` everywhere and ``err <= rel S + tiny``;
    return ``err / S``."""
    hi, lo, err = exact_matmul(a, b, bias)
    ex = _exact_sums(a, b, bias)
    S = np.abs(a) @ np.abs(b) + (0 if bias is None else np.abs(bias))
    with mpmath.workprec(2300):
        for i in range(a.shape[0]):
            for j in range(b.shape[1]):
                d = abs(mpmath.mpf(float(hi[i, j])) + mpmath.mpf(float(lo[i, j])) - ex[i][j])
                assert d <= mpmath.mpf(float(err[i, j])), (i, j, d, err[i, j])
    assert np.all(err <= rel * S + 64 * a.shape[1] * 2.0**-1074)
    return err / np.where(S > 0, S, 1.0)


@pytest.mark.parametrize("seed", range(3))
def test_random_products_are_exact_to_the_stated_bound(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((4, 257)), rng.standard_normal((257, 3))
    bias = rng.standard_normal(3)
    _check(a, b, bias)


def test_cancelling_sums_keep_their_low_part() -> None:
    # the sum cancels to about 2^-80 of its terms: float64 gets no digit right
    rng = np.random.default_rng(1)
    x = rng.standard_normal(64)
    a = np.concatenate([x, -x, [2.0**-80, 3.0 * 2.0**-140]])[None, :]
    b = np.ones((a.shape[1], 2))
    b[-1, 1] = -1.0
    hi, _, _ = exact_matmul(a, b)
    assert float(hi[0, 0]) == 2.0**-80 + 3.0 * 2.0**-140
    assert float(hi[0, 1]) == 2.0**-80 - 3.0 * 2.0**-140
    _check(a, b)
    # ill-conditioned dot products (condition ~1e30) from the Ogita-Rump-Oishi generator
    n = 40
    half = n // 2
    e = np.rint(rng.uniform(0, 1, half) * 50)
    u = (2 * rng.uniform(size=half) - 1) * 2.0**e
    v = (2 * rng.uniform(size=half) - 1) * 2.0**e
    a2 = np.concatenate([u, u * (1 + 2.0**-40)])[None, :]
    b2 = np.concatenate([v, -v])[:, None]
    ratio = _check(a2, b2)
    assert ratio.max() < 2.0**-60


def test_subnormal_adjacent_and_underflowing_products() -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 30)) * 2.0**-520  # products far below the normal range
    a[0, :5] = 2.0**-1074 * np.arange(1, 6)  # subnormal operands
    a[1, 3] = 2.0**-1022
    b = rng.standard_normal((30, 2)) * 2.0**-540
    b[:, 1] = rng.standard_normal(30) * 2.0**500
    _check(a, b)


def test_wide_exponent_ranges_within_a_row() -> None:
    rng = np.random.default_rng(3)
    k = 50
    a = rng.standard_normal((3, k)) * 2.0 ** rng.integers(-600, 500, (3, k))
    b = rng.standard_normal((k, 2)) * 2.0 ** rng.integers(-400, 480, (k, 2))
    _check(a, b)
    # every element far below its row's largest: slices follow what is left
    a = np.full((1, 4), 1.0)
    a[0, 1:] = [2.0**-300 / 3, 2.0**-600 / 7, -(2.0**-900) / 11]
    _check(a, np.ones((4, 1)) / 3)


def test_elements_a_whole_exponent_range_below_their_rows_largest() -> None:
    # scaling the row to its largest element's slice grid underflows 3 * 2^-1000
    a = np.array([[2.0**1000, 3 * 2.0**-1000]])
    b = np.array([[2.0**-1000], [2.0**1000]])
    hi, lo, err = exact_matmul(a, b)
    assert float(hi[0, 0]) == 4.0 and float(lo[0, 0]) == 0.0 and float(err[0, 0]) < 2.0**-90
    _check(a, b)
    rng = np.random.default_rng(9)
    a = rng.standard_normal((3, 20)) * 2.0 ** rng.choice([-1000, 0, 500], (3, 20))
    b = rng.standard_normal((20, 3)) * 2.0 ** rng.choice([-500, 0, 500], (20, 3))
    _check(a, b)
    # a slice product beyond float64's range: the element is marked, not wrong
    hi, _, _ = exact_matmul(np.array([[2.0**1000, 1.0]]), np.array([[2.0**100], [1.0]]))
    assert not np.isfinite(hi[0, 0])


def test_nonfinite_rows_and_columns_are_marked() -> None:
    a = np.array([[1.0, np.inf], [1.0, 2.0]])
    b = np.array([[1.0, np.nan], [1.0, 1.0]])
    hi, _, _ = exact_matmul(a, b)
    assert np.isnan(hi[0]).all() and np.isnan(hi[1, 1]) and hi[1, 0] == 3.0


def test_batched_operands_broadcast_like_matmul() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((2, 3, 5, 40)), rng.standard_normal((3, 40, 2))
    hi, lo, _ = exact_matmul(a, b)
    assert hi.shape == (2, 3, 5, 2)
    for ix in np.ndindex(2, 3):
        h2, l2, _ = exact_matmul(a[ix], b[ix[1]])
        np.testing.assert_array_equal(hi[ix], h2)
        np.testing.assert_array_equal(lo[ix], l2)


@pytest.mark.parametrize(("k", "beta"), [(1, 27), (1024, 22), (1025, 22), (2049, 21),
                                         (1 << 20, 17)])
def test_slices_keep_every_partial_sum_below_2_53(k: int, beta: int) -> None:
    assert slice_bits(k) == beta
    assert k * 2.0 ** (2 * beta - 2) <= 2.0**53 < k * 2.0 ** (2 * beta)


def test_a_float64_kernel_a_little_past_its_bound_fails() -> None:
    """The oracle's own error is far below the fp64 kernel bound, so a result
    off by 1.5 times the claimed bound (a few ulps) fails, and one at half of it passes."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((6, 200)), rng.standard_normal((200, 5))
    model = get_model("fp64", order="pairwise")
    ref = store(matmul(exact(a), exact(b), model), model)
    assert ref.escalated and np.all(ref.ref_err < 1e-3 * ref.det)
    assert np.all(ref.det < 16 * U * ref.mag)  # a few ulps of S: gamma_9(u) S
    for factor, fails in ((1.5, True), (0.5, False)):
        with mpmath.workprec(200):
            got = np.array([[float(mpmath.mpf(float(ref.value[i, j])) + float(ref.lo[i, j])
                                   + factor * float(ref.det[i, j])) for j in range(5)]
                            for i in range(6)])
        v = compare("out", got, ref)
        assert v.passed is (not fails), (factor, v)


def test_float64_linear_backward_is_judged_at_batch_128_with_1024_weights() -> None:
    """No UnsupportedCase: the exact context runs at a real layer size."""
    lin = get_op("linear")
    params = lin.validate({"batch": 128, "in_features": 1024, "out_features": 1024})
    rng = np.random.default_rng(6)
    inp = {k: rng.standard_normal(s) for k, s in lin.input_shapes(params).items()}
    refs = lin.reference(inp, params, get_model("fp64"))
    x, w, g = inp["x"], inp["weight"], inp["grad_output"]
    got = {"y": x @ w.T + inp["bias"], "grad_input": g @ w, "grad_weight": g.T @ x,
           "grad_bias": g.sum(0)}
    for name, ref in refs.items():
        assert ref.escalated
        assert np.all(ref.ref_err <= 1e-6 * ref.det)
        assert compare(name, got[name], ref).passed, name


@pytest.mark.gpu
def test_the_exact_context_on_the_gpu_is_the_hosts(cupy: Any) -> None:
    """Slice GEMMs are exact in any order: cuBLAS gives the host's double-double bit for bit."""
    cp = cupy
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((64, 3000)), rng.standard_normal((3000, 33))
    a[0] *= 2.0**-600
    bias = rng.standard_normal(33)
    hi, lo, err = exact_matmul(a, b, bias)
    ghi, glo, gerr = (cp.asnumpy(v) for v in exact_matmul(cp.asarray(a), cp.asarray(b),
                                                         cp.asarray(bias)))
    np.testing.assert_array_equal(ghi, hi)
    np.testing.assert_array_equal(glo, lo)
    np.testing.assert_allclose(gerr, err, rtol=1e-12)


@pytest.mark.gpu
def test_float64_linear_backward_on_the_gpu(cupy: Any) -> None:
    cp = cupy
    lin = get_op("linear")
    params = lin.validate({"batch": 128, "in_features": 1024, "out_features": 1024})
    rng = np.random.default_rng(8)
    inp = {k: rng.standard_normal(s) for k, s in lin.input_shapes(params).items()}
    dev = {k: cp.asarray(v) for k, v in inp.items()}
    refs = lin.reference(dev, params, get_model("fp64"))
    x, w, g = inp["x"], inp["weight"], inp["grad_output"]
    got = {"y": x @ w.T + inp["bias"], "grad_input": g @ w, "grad_weight": g.T @ x,
           "grad_bias": g.sum(0)}
    for name, ref in refs.items():
        host = ref.to_host()
        assert host.escalated and np.all(host.ref_err <= 1e-6 * host.det)
        assert compare(name, got[name], host).passed, name
