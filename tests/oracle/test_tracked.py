"""The error-tracking arithmetic: sound on simulated kernels in every order,
zero in the exact regime, sharp enough to catch the wrong precision."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numoracle.oracle.formats import quantize
from numoracle.oracle.precision import get_model
from numoracle.oracle.tracked import exact, lsb_exponent, matmul, store, sum_

DTYPES = {"fp32": np.float32, "fp16": np.float16, "fp64": np.float64}


def simulated_matmul(a: np.ndarray, b: np.ndarray, acc: str, order: str, rng: np.random.Generator,
                     bias: np.ndarray | None = None) -> np.ndarray:
    """A kernel in NumPy: products rounded to ``acc``, summed in ``acc`` in ``order``."""
    dt = DTYPES[acc]
    A, B = a.astype(dt), b.astype(dt)
    k = a.shape[-1]
    prods = A[:, :, None] * B[None, :, :]  # (m, k, n), each product rounded to acc
    if bias is not None:
        prods = np.concatenate([prods, bias.astype(dt)[None, None, :].repeat(a.shape[0], 0)], 1)
        k += 1
    if order == "pairwise":
        return np.add.reduce(np.ascontiguousarray(np.moveaxis(prods, 1, -1)), axis=-1, dtype=dt)
    idx = {"sequential": np.arange(k), "reverse": np.arange(k)[::-1],
           "random": rng.permutation(k)}[order]
    s = np.zeros((a.shape[0], b.shape[1]), dt)
    for i in idx:
        s = (s + prods[:, i, :]).astype(dt)
    return s


def _values(rng: np.random.Generator, family: str, shape: tuple[int, ...]) -> np.ndarray:
    if family == "normal":
        return rng.standard_normal(shape)
    if family == "positive":
        return rng.uniform(0, 1, shape)
    if family == "heavy":
        return rng.standard_t(1.5, shape)
    if family == "cancel":
        x = rng.standard_normal(shape) * 1e3
        x[..., 1::2] = -x[..., ::2][..., : x[..., 1::2].shape[-1]] + rng.standard_normal(
            x[..., 1::2].shape)
        return x
    return rng.integers(-7, 8, shape).astype(np.float64)


@settings(max_examples=150, deadline=None)
@given(m=st.integers(1, 6), k=st.integers(1, 300), n=st.integers(1, 6),
       family=st.sampled_from(["normal", "positive", "heavy", "cancel", "ints"]),
       order=st.sampled_from(["sequential", "reverse", "random", "pairwise"]),
       with_bias=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_fp32_bound_is_sound_in_every_order(m, k, n, family, order, with_bias, seed) -> None:
    rng = np.random.default_rng(seed)
    a = quantize(_values(rng, family, (m, k)), "fp32")
    b = quantize(_values(rng, family, (k, n)), "fp32")
    bias = quantize(_values(rng, family, (n,)), "fp32") if with_bias else None
    model = get_model("fp32")
    ref = store(matmul(exact(a), exact(b), model, bias=None if bias is None else exact(bias)),
                model)
    got = simulated_matmul(a, b, "fp32", order, rng, bias).astype(np.float64)
    err = np.abs(got - ref.value)
    assert np.all(err <= ref.bound()), "deterministic bound violated"
    assert np.all(err <= ref.bound(probabilistic=True)), "probabilistic bound violated"


@settings(max_examples=60, deadline=None)
@given(k=st.integers(1, 64), order=st.sampled_from(["sequential", "random", "pairwise"]),
       seed=st.integers(0, 2**32 - 1))
def test_fp16_accumulation_bound_is_sound(k, order, seed) -> None:
    rng = np.random.default_rng(seed)
    a = quantize(rng.standard_normal((3, k)), "fp16")
    b = quantize(rng.standard_normal((k, 4)), "fp16")
    model = get_model("fp16-acc16")
    ref = store(matmul(exact(a), exact(b), model), model)
    got = simulated_matmul(a, b, "fp16", order, rng).astype(np.float64)
    assert np.all(np.abs(got - ref.value) <= ref.bound())


@pytest.mark.parametrize("order", ["sequential", "reverse", "random", "pairwise"])
def test_exact_regime_bound_is_zero_and_holds(order: str) -> None:
    rng = np.random.default_rng(1)
    a = rng.integers(-2**10, 2**10, (8, 100)) * 2.0**-10
    b = rng.integers(-2**6, 2**6, (100, 8)) * 2.0**-6
    model = get_model("fp32")
    ref = store(matmul(exact(a), exact(b), model), model)
    assert ref.is_exact
    got = simulated_matmul(a, b, "fp32", order, rng).astype(np.float64)
    np.testing.assert_array_equal(got, ref.value)


def test_exact_regime_ends_where_sums_outgrow_the_accumulator() -> None:
    a = np.full((1, 3), 2.0**23 + 1)  # grid 2^0
    b = np.ones((3, 1))
    ref = matmul(exact(a), exact(b), get_model("fp32"))
    assert not ref.is_exact  # S > 2^24: 3 (2^23 + 1) needs 26 bits
    got = simulated_matmul(a, b, "fp32", "sequential", np.random.default_rng(0))
    assert got[0, 0] != ref.value[0, 0] and abs(got[0, 0] - ref.value[0, 0]) <= ref.bound()[0, 0]
    big_grid = matmul(exact(np.full((1, 3), 2.0**23)), exact(b), get_model("fp32"))
    assert big_grid.is_exact  # grid 2^23: S = 2^25 <= 2^(24 + 23)
    ref_ok = matmul(exact(a[:, :1]), exact(b[:1]), get_model("fp32"))
    assert ref_ok.is_exact


def test_tf32_inputs_are_caught_under_fp32_and_pass_under_tf32() -> None:
    rng = np.random.default_rng(2)
    a = rng.integers(-2**12, 2**12, (16, 32)) * 2.0**-12  # 13 significant bits: not tf32
    b = rng.integers(-4, 5, (32, 16)).astype(np.float64)
    got = simulated_matmul(quantize(a, "tf32", "rz"), b, "fp32", "random", rng).astype(float)
    fp32 = get_model("fp32")
    ref32 = store(matmul(exact(a), exact(b), fp32), fp32)
    assert ref32.is_exact and np.any(got != ref32.value)
    tf32 = get_model("tf32")  # rounding mode unknown: charges c_in
    ref_tf = store(matmul(exact(a), exact(b), tf32), tf32)
    assert np.all(np.abs(got - ref_tf.value) <= ref_tf.bound())


def test_known_input_rounding_is_applied_exactly() -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(-2**12, 2**12, (4, 8)) * 2.0**-12
    b = rng.integers(-4, 5, (8, 4)).astype(np.float64)
    model = get_model("tf32", input_rounding="rz")
    ref = store(matmul(exact(a), exact(b), model), model)
    assert ref.is_exact
    got = simulated_matmul(quantize(a, "tf32", "rz"), b, "fp32", "sequential",
                           np.random.default_rng(0))
    np.testing.assert_array_equal(got, ref.value)


def test_sum_is_a_contraction_with_ones() -> None:
    rng = np.random.default_rng(4)
    x = quantize(rng.standard_normal((50, 7)), "fp32")
    model = get_model("fp32")
    r = sum_(exact(x), axis=0, model=model)
    assert r.shape == (7,) and r.n == 50
    np.testing.assert_allclose(r.value, x.sum(0), rtol=1e-15)
    got = x.astype(np.float32).sum(0).astype(np.float64)
    assert np.all(np.abs(got - r.value) <= r.bound())


@pytest.mark.parametrize("model_name", ["fp32", "bf16", "fp16", "fp64", "tf32"])
@pytest.mark.parametrize("exact_regime", [False, True])
def test_a_stored_sum_is_the_sum_stored(model_name: str, exact_regime: bool) -> None:
    """``sum_(..., stored=True)`` (the rounding in the contraction's own pass) gives the
    bits of ``store(sum_(...))``, value and every radius, on exact inputs in and out of
    the exact regime and on an input with radii (the general path)."""
    rng = np.random.default_rng(6)
    x = quantize(rng.standard_normal((300, 9)), "bf16")
    if exact_regime:
        x = rng.integers(-8, 9, (300, 9)).astype(np.float64)
    model = get_model(model_name)
    with_radii = store(exact(x), get_model("bf16"))  # (radii: the general path)
    for t in (exact(x), with_radii):
        for axis in (0, 1):
            want = store(sum_(t, axis=axis, model=model), model)
            got = sum_(t, axis=axis, model=model, stored=True)
            assert got.shape == want.shape and got.n == want.n
            for field in ("value", "det", "prob", "ref_err", "mag"):
                np.testing.assert_array_equal(np.broadcast_to(getattr(got, field), got.shape),
                                              np.broadcast_to(getattr(want, field), want.shape))
            if exact_regime and model_name != "fp64" and t is not with_radii:
                assert got.is_exact


def test_store_rounds_to_bf16_and_keeps_representable_values_exact() -> None:
    model = get_model("bf16")
    t = exact(np.array([1.0, 1.0 + 2**-7, 1 + 2**-9]))
    s = store(t, model)
    assert s.det[0] == 0 and s.det[1] == 0 and s.det[2] > 0
    assert abs(quantize(t.value[2], "bf16") - t.value[2]) <= s.det[2]


def test_float64_targets_escalate_to_the_exact_context() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((3, 40)), rng.standard_normal((40, 2))
    model = get_model("fp64")
    ref = store(matmul(exact(a), exact(b), model), model)
    assert ref.escalated
    assert np.all(ref.ref_err < 0.01 * ref.det)
    assert np.all(np.abs(a @ b - ref.value - ref.lo) <= ref.bound())


def test_lsb_exponent() -> None:
    assert lsb_exponent(np.array([3.0, 0.5, 0.0])) == -1
    assert lsb_exponent(np.array([12.0])) == 2
    assert lsb_exponent(np.array([0.0, np.nan])) > 1000


def test_nonfinite_inputs_make_nonfinite_references() -> None:
    a = np.array([[1.0, np.inf]])
    b = np.array([[1.0], [1.0]])
    ref = matmul(exact(a), exact(b), get_model("fp32"))
    assert np.isinf(ref.value[0, 0])


def test_flushed_subnormal_inputs_are_covered_only_when_claimed() -> None:
    tiny_sub = 2.0**-130  # a subnormal in fp32 / bf16
    a = np.array([[tiny_sub, 1.0]])
    b = np.array([[2.0**126], [1.0]])  # product 2^-4: not negligible
    got = 1.0  # the kernel read the subnormal as zero
    plain = store(matmul(exact(a), exact(b), get_model("fp32")), get_model("fp32"))
    daz_model = get_model("fp32", flush_subnormal_inputs=True)
    daz = store(matmul(exact(a), exact(b), daz_model), daz_model)
    assert abs(got - plain.value[0, 0]) > plain.bound()[0, 0]
    assert abs(got - daz.value[0, 0]) <= daz.bound()[0, 0]


@pytest.mark.parametrize("seed", range(5))
def test_unfused_bias_epilogue_is_covered_by_bias_after_store(seed: int) -> None:
    from numoracle.oracle.ops import get_op

    rng = np.random.default_rng(seed)
    params = {"batch": 4, "in_features": 33, "out_features": 5, "bias": True}
    inp = {k: quantize(rng.standard_normal(s), "bf16") for k, s in
           get_op("linear").input_shapes(params).items()}
    # the product rounded to bf16, then the bias added in fp32 and rounded again
    prod = quantize(inp["x"].astype(np.float32) @ inp["weight"].astype(np.float32).T, "bf16")
    got = quantize((prod.astype(np.float32) + inp["bias"].astype(np.float32)), "bf16")
    model = get_model("bf16", bias_after_store=True)
    ref = get_op("linear").reference(inp, params, model, ("y",))["y"]
    assert np.all(np.abs(got - ref.value) <= ref.bound())


def test_add_is_exact_for_representable_sums() -> None:
    from numoracle.oracle.tracked import add

    model = get_model("fp32")
    r = add(exact(np.array([1.0, 2.0**24])), exact(np.array([2.0, 1.0])), model)
    assert r.det[0] == 0 and r.det[1] > 0
    assert abs(np.float32(2.0**24) + np.float32(1.0) - r.value[1]) <= r.bound()[1]


@pytest.mark.parametrize("rounded", [True, False])
def test_inputs_maybe_unrounded_covers_both_behaviours(rounded: bool) -> None:
    rng = np.random.default_rng(7)
    a = quantize(rng.standard_normal((6, 50)), "fp32")
    b = quantize(rng.standard_normal((50, 3)), "fp32")
    seen_a, seen_b = (quantize(a, "tf32"), quantize(b, "tf32")) if rounded else (a, b)
    got = simulated_matmul(seen_a, seen_b, "fp32", "random", rng).astype(np.float64)
    model = get_model("tf32", input_rounding="rne", inputs_maybe_unrounded=True)
    ref = store(matmul(exact(a), exact(b), model), model)
    assert np.all(np.abs(got - ref.value) <= ref.bound())
    strict = get_model("tf32", input_rounding="rne")
    ref_strict = store(matmul(exact(a), exact(b), strict), strict)
    # the strict model is sharper: it flags the unrounded kernel
    assert rounded == bool(np.all(np.abs(got - ref_strict.value) <= ref_strict.bound()))


def test_either_leaves_elements_unjudged_where_the_behaviours_disagree_on_nan() -> None:
    from numoracle.checking.verdict import compare
    from numoracle.oracle.tracked import either

    # inf times a value that tf32 rounds to 0: NaN on one path, inf on the other
    a = np.array([[np.inf], [2.0]])
    b = np.array([[2.0**-140]])
    model = get_model("tf32", input_rounding="rne", inputs_maybe_unrounded=True)
    ref = matmul(exact(a), exact(b), model)
    assert np.isnan(ref.det[0, 0]) and np.isfinite(ref.det[1, 0])
    for got in (np.array([[np.inf], [2.0**-139]]), np.array([[np.nan], [2.0**-139]])):
        assert compare("out", got, ref).passed
    assert not compare("out", np.array([[np.inf], [1.0]]), ref).passed
    t = either(exact(np.array([1.0])), exact(np.array([1.5])))
    assert t.det[0] >= 0.5


def test_an_unjudged_operand_leaves_the_sums_it_enters_unjudged() -> None:
    """An element left unjudged (NaN radius: say a softmax entry of a row holding
    +inf, 0 or NaN by formulation) times anything, 0 included, may be NaN in the
    kernel: the contraction's results it enters admit NaN, the others keep their
    bound (a softmax's NaN row through attention's ``grad_v = attn^T @ grad_out``)."""
    from numoracle.checking.verdict import compare
    from numoracle.oracle.tracked import unjudged

    a = unjudged(exact(np.array([[0.0], [0.5]])), np.array([[True], [False]]))
    ref = matmul(a, exact(np.array([[1.0, -2.0, 0.0]])), get_model("fp32"))
    got = np.array([[np.nan, np.nan, np.nan], [0.5, -1.0, 0.0]])
    assert compare("out", got, ref).passed
    assert not compare("out", np.array([[np.nan] * 3, [0.5, -1.0, 1.0]]), ref).passed
    x, y = np.array([[0.0, 0.5]]), np.array([1.0, 2.0])  # matrix @ vector: a vector
    out = matmul(unjudged(exact(x), np.array([[True, False]])), exact(y), get_model("fp32"))
    assert out.value.shape == (1,) and not np.isfinite(out.det).any()  # (no bound)


def test_unknown_rounding_may_take_subnormal_inputs_to_zero() -> None:
    # tf32 keeps fp32's exponent range but 10 mantissa bits: 2^-149 rounds to 0
    a = np.array([[np.inf, 1.0]])
    b = np.array([[2.0**-149], [1.0]])
    ref = matmul(exact(a), exact(b), get_model("tf32"))  # rounding mode unknown
    from numoracle.checking.verdict import compare

    assert compare("out", np.array([[np.nan]]), ref).passed  # inf * 0 on the tf32 path
    assert compare("out", np.array([[np.inf]]), ref).passed


@pytest.mark.parametrize(("ea", "eb"), [(600, 500), (1000, 30), (-600, -500)])
def test_matmul_on_grids_beyond_float64_range(ea: int, eb: int) -> None:
    """Inputs on grids whose product's exponent leaves float64's range: the
    exact-regime test must not overflow computing ``2^(p + e)``."""
    a, b = exact(np.array([[2.0**ea, 0.0]])), exact(np.array([[2.0**eb], [1.0]]))
    t = matmul(a, b, get_model("fp32"))
    assert t.value[0, 0] == 2.0**ea * 2.0**eb
    assert not np.isfinite(t.det[0, 0]) if ea + eb > 127 else t.det[0, 0] < 1e-37


@pytest.mark.parametrize("seed", range(12))
def test_finite_magnitude_of_the_affected_rows_and_columns_is_the_whole_ones(seed: int) -> None:
    """Where an operand holds Inf or NaN, the magnitude of the finite terms is
    recomputed only in the rows of ``a`` and columns of ``b`` (or the bias) that
    hold one: the same as recomputing every element (to float64 summation order)."""
    from numoracle.oracle.tracked import _finite_magnitude

    rng = np.random.default_rng(seed)
    m, k, n = rng.integers(3, 40, 3)
    av = rng.standard_normal((m, k)) * 10.0 ** rng.integers(-5, 38, (m, k))
    bv = rng.standard_normal((k, n)) * 10.0 ** rng.integers(-5, 38, (k, n))
    for arr in (av, bv):
        for _ in range(int(rng.integers(1, 3))):
            arr[tuple(rng.integers(0, s) for s in arr.shape)] = rng.choice([np.inf, -np.inf,
                                                                             np.nan])
    bias = exact(rng.standard_normal(n)) if seed % 2 else None
    if bias is not None and seed % 4 == 1:
        bias.value[int(rng.integers(0, n))] = np.inf
    a, b = exact(av), exact(bv)
    with np.errstate(invalid="ignore", over="ignore"):
        S = np.abs(av) @ np.abs(bv) + (0.0 if bias is None else np.abs(bias.value))
        fin = lambda v: np.where(np.isfinite(v), np.abs(v), 0.0)  # noqa: E731
        whole = fin(av) @ fin(bv) + (0.0 if bias is None else fin(bias.value))
        part = _finite_magnitude(S, a, b, bias)
    np.testing.assert_allclose(part, whole, rtol=1e-13)  # BLAS may block rows differently
