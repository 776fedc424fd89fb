"""Elementwise tracked primitives (relu, relu_mask_mul, mul_scalar, sub): sound
against float32 simulations of kernels whose inputs carry radii, exact where
the kernel's result is exact."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numoracle.errors import InvalidArgument
from numoracle.oracle.formats import quantize
from numoracle.oracle.precision import get_model
from numoracle.oracle.tracked import (
    Tracked,
    exact,
    matmul,
    mul_scalar,
    relu,
    relu_mask_mul,
    store,
    sub,
)

FP32 = get_model("fp32")


def _fp32_kernel_matmul(a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A float32 kernel: products rounded, summed in a random order."""
    prods = a.astype(np.float32)[:, :, None] * b.astype(np.float32)[None, :, :]
    s = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for i in rng.permutation(a.shape[1]):
        s = (s + prods[:, i, :]).astype(np.float32)
    return s


def _tracked_pair(rng: np.random.Generator, shape: tuple[int, int], k: int,
                  cancel: bool) -> tuple[Tracked, np.ndarray]:
    """A tracked contraction result (with radii) and a kernel's float32 result of it;
    with ``cancel`` many elements lie near 0, where the kernel's sign is uncertain."""
    a = quantize(rng.standard_normal((shape[0], k)), "fp32")
    b = quantize(rng.standard_normal((k, shape[1])), "fp32")
    if cancel:  # the last column cancels the others up to a rounding
        b[-1] = quantize(-(a[:, :-1] @ b[:-1]).mean(axis=0) / np.where(
            a[:, -1].mean() == 0, 1.0, a[:, -1].mean()), "fp32")
        a[:, -1] = a[:, -1].mean()
    t = store(matmul(exact(a), exact(b), FP32), FP32)
    return t, _fp32_kernel_matmul(a, b, rng).astype(np.float64)


def _within(got: np.ndarray, t: Tracked) -> bool:
    err = np.abs(got - t.value)
    return bool(np.all(err <= t.bound()) and np.all(err <= t.bound(probabilistic=True)))


@settings(max_examples=80, deadline=None)
@given(m=st.integers(1, 5), n=st.integers(1, 5), k=st.integers(1, 40), cancel=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_relu_and_its_mask_are_sound(m, n, k, cancel, seed) -> None:
    rng = np.random.default_rng(seed)
    x, xk = _tracked_pair(rng, (m, n), k, cancel)
    g, gk = _tracked_pair(rng, (m, n), k, False)
    r = relu(x)
    assert _within(np.maximum(xk.astype(np.float32), np.float32(0)), r)
    np.testing.assert_array_equal(r.det, x.det)  # 1-Lipschitz: the radius passes through
    masked = relu_mask_mul(g, x)
    got = (gk.astype(np.float32) * (xk > 0)).astype(np.float64)
    assert _within(got, masked)
    # the mask of the relu output is the mask of its input
    assert _within((gk.astype(np.float32) * (np.maximum(xk, 0) > 0)), relu_mask_mul(g, r))


def test_relu_mask_covers_a_kernel_whose_sign_differs() -> None:
    g = exact(np.array([3.0, -2.0, 5.0]))
    x = Tracked(value=np.array([1e-9, -1e-9, 1.0]), ref_err=np.zeros(3),
                det=np.array([1e-8, 1e-8, 1e-8]), prob=np.array([1e-8, 1e-8, 1e-8]),
                mag=np.ones(3))
    out = relu_mask_mul(g, x)
    np.testing.assert_array_equal(out.value, [3.0, 0.0, 5.0])
    # the kernel may have read x as -1e-9 (mask 0) or +1e-9 (mask 1): both pass
    for got in ([0.0, -2.0, 5.0], [3.0, 0.0, 5.0]):
        assert np.all(np.abs(np.array(got) - out.value) <= out.bound())
    assert out.det[2] == 0.0  # a certain sign keeps g exact
    bad = np.abs(np.array([3.0, 0.0, 0.0]) - out.value) <= out.bound()
    assert not bad[2]  # a wrongly masked certain element fails


def test_relu_and_mask_are_exact_on_exact_inputs() -> None:
    v = np.array([[-2.0, 0.0, 1.5], [3.0, -0.25, 7.0]])
    r = relu(exact(v))
    assert r.is_exact
    np.testing.assert_array_equal(r.value, np.maximum(v, 0))
    m = relu_mask_mul(exact(v * 3), exact(v))
    assert m.is_exact
    np.testing.assert_array_equal(m.value, v * 3 * (v > 0))
    nan = relu(exact(np.array([np.nan, -1.0])))
    assert np.isnan(nan.value[0]) and nan.value[1] == 0.0


@settings(max_examples=80, deadline=None)
@given(m=st.integers(1, 4), n=st.integers(1, 4), k=st.integers(1, 30),
       c=st.floats(1e-3, 1e3), divide=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_mul_scalar_is_sound_with_the_scalar_exact_or_rounded(m, n, k, c, divide, seed) -> None:
    rng = np.random.default_rng(seed)
    t, tk = _tracked_pair(rng, (m, n), k, False)
    t32 = tk.astype(np.float32)
    c32 = np.float32(c)
    exact_c = (t32.astype(np.float64) / c if divide else t32.astype(np.float64) * c)
    rounded_c = t32 / c32 if divide else t32 * c32
    # a kernel that uses c exactly (one rounding of the exact product)
    assert _within(quantize(exact_c, "fp32"), mul_scalar(t, c, FP32, divide=divide))
    # a kernel that rounds c to float32 first
    loose = mul_scalar(t, c, FP32, divide=divide, c_rel_err=FP32.storage.u)
    assert _within(rounded_c.astype(np.float64), loose)
    assert _within(quantize(exact_c, "fp32"), loose)


def test_mul_scalar_is_exact_where_the_product_is() -> None:
    v = np.array([1.0, -3.0, 6.0, 0.0, 2.0**20])
    assert mul_scalar(exact(v), 0.25, FP32).is_exact
    third = mul_scalar(exact(v * 3), 3.0, FP32, divide=True)
    assert third.is_exact
    np.testing.assert_array_equal(third.value, v)
    tenth = mul_scalar(exact(v), 0.1, FP32)
    assert not tenth.is_exact and tenth.det[3] == 0.0  # 0 * c stays exact
    assert np.all(tenth.det[:3] <= 2 * FP32.storage.u * np.abs(tenth.value[:3]))
    # a rounded scalar is never exact
    assert not mul_scalar(exact(v), 0.25, FP32, c_rel_err=1e-7).is_exact
    with pytest.raises(InvalidArgument, match="divides by zero"):
        mul_scalar(exact(v), 0.0, FP32, divide=True)
    with pytest.raises(InvalidArgument, match="c_rel_err"):
        mul_scalar(exact(v), 2.0, FP32, c_rel_err=-1.0)


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 4), n=st.integers(1, 4), k=st.integers(1, 30), cancel=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_sub_is_sound(m, n, k, cancel, seed) -> None:
    rng = np.random.default_rng(seed)
    a, ak = _tracked_pair(rng, (m, n), k, cancel)
    b, bk = _tracked_pair(rng, (m, n), k, cancel)
    got = (ak.astype(np.float32) - bk.astype(np.float32)).astype(np.float64)
    assert _within(got, sub(a, b, FP32))
    assert _within(quantize(ak - 0.5, "fp32"), sub(a, exact(np.full((m, n), 0.5)), FP32))


def test_sub_is_exact_for_representable_differences() -> None:
    a, b = np.array([5.0, 1.0, -3.0]), np.array([2.0, 1.0, 0.5])
    d = sub(exact(a), exact(b), FP32)
    assert d.is_exact
    np.testing.assert_array_equal(d.value, a - b)
    assert not sub(exact(np.array([1.0])), exact(np.array([2.0**-30])), FP32).is_exact


def test_escalated_operands_fold_their_low_part() -> None:
    t = Tracked(value=np.array([1.0]), ref_err=np.array([0.0]), det=np.array([0.0]),
                prob=np.array([0.0]), mag=np.array([1.0]), lo=np.array([2.0**-60]))
    assert relu(t).lo is None and relu(t).ref_err[0] == 2.0**-60
    assert mul_scalar(t, 2.0, FP32).ref_err[0] >= 2.0**-59
