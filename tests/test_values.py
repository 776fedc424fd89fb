"""Value families: representable, finite, deterministic; the exact family is exact."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from numoracle.cases.values import (
    ACC_BITS,
    EXACT_MARGIN_BITS,
    FAMILIES,
    SUM_LIMIT,
    exact_widths,
    generate_inputs,
    generate_integers,
    special_values,
)
from numoracle.errors import InvalidArgument
from numoracle.oracle.formats import FP32, TF32, get_format, representable
from numoracle.oracle.ops import get_op
from numoracle.oracle.ops.base import IntegerInput, Product
from numoracle.oracle.precision import get_model

STORAGES = ("fp32", "bf16", "fp16", "fp64")
CASES = (
    ("linear", {"batch": 3, "in_features": 17, "out_features": 8, "bias": True}),
    ("linear", {"batch": 1, "in_features": 1, "out_features": 1, "bias": False}),
    ("matmul", {"batch_shape": (2,), "m": 5, "k": 64, "n": 7}),
)


def _inputs(op_name: str, params: dict[str, Any], family: str, storage: str,
            seed: int = 0) -> dict[str, np.ndarray]:
    op = get_op(op_name)
    p = op.validate(params)
    return generate_inputs(family, op.input_shapes(p), op.products(p), storage,
                           np.random.default_rng(seed))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize(("op_name", "params"), CASES)
def test_values_are_representable_and_shaped(op_name: str, params: dict[str, Any],
                                             family: str, storage: str) -> None:
    op = get_op(op_name)
    xs = _inputs(op_name, params, family, storage)
    shapes = op.input_shapes(op.validate(params))
    assert list(xs) == list(shapes)
    for name, arr in xs.items():
        assert arr.dtype == np.float64
        assert arr.shape == shapes[name]
        assert representable(arr, storage).all(), name
        if family != "special":
            assert np.isfinite(arr).all(), name


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("storage", STORAGES)
def test_values_are_deterministic_for_a_seed(family: str, storage: str) -> None:
    op_name, params = CASES[0]
    first = _inputs(op_name, params, family, storage, seed=7)
    again = _inputs(op_name, params, family, storage, seed=7)
    other = _inputs(op_name, params, family, storage, seed=8)
    for name in first:
        np.testing.assert_array_equal(first[name], again[name])
    assert any(not np.array_equal(first[n], other[n], equal_nan=True) for n in first)


# -- exact ---------------------------------------------------------------------------
def _sequential_fp32(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None,
                     reverse: bool = False) -> np.ndarray:
    """``a @ b (+ bias)`` with float32 products summed one by one in float32."""
    terms = a.astype(np.float32)[:, :, None] * b.astype(np.float32)[None, :, :]
    if bias is not None:
        last = np.broadcast_to(bias.astype(np.float32), (a.shape[0], 1, b.shape[1]))
        terms = np.concatenate([terms, last], axis=1)
    if reverse:
        terms = terms[:, ::-1, :]
    return np.cumsum(terms, axis=1, dtype=np.float32)[:, -1, :].astype(np.float64)


def _linear_contractions(xs: dict[str, np.ndarray]) -> list[tuple[Any, ...]]:
    x, w, g, b = xs["x"], xs["weight"], xs["grad_output"], xs.get("bias")
    ones = np.ones((g.shape[0], 1))
    return [(x, w.T, b), (g, w, None), (g.T, x, None), (g.T, ones, None)]


@settings(max_examples=50, deadline=None)
@given(
    batch=st.integers(1, 128), in_features=st.integers(1, 300), out_features=st.integers(1, 300),
    bias=st.booleans(), storage=st.sampled_from(STORAGES), seed=st.integers(0, 2**32 - 1),
)
@example(batch=65536, in_features=1, out_features=1, bias=True, storage="fp32", seed=0)
@example(batch=1, in_features=65535, out_features=2, bias=True, storage="fp16", seed=0)
@example(batch=2, in_features=3, out_features=65536, bias=False, storage="bf16", seed=0)
def test_exact_family_is_exact_in_fp32_accumulation(batch: int, in_features: int,
                                                    out_features: int, bias: bool,
                                                    storage: str, seed: int) -> None:
    params = {"batch": batch, "in_features": in_features, "out_features": out_features,
              "bias": bias}
    xs = _inputs("linear", params, "exact", storage, seed)
    for a, b, c in _linear_contractions(xs):
        want = a @ b + (0.0 if c is None else c)
        np.testing.assert_array_equal(_sequential_fp32(a, b, c), want)
        np.testing.assert_array_equal(_sequential_fp32(a, b, c, reverse=True), want)


@pytest.mark.parametrize(("op_name", "params"), CASES)
def test_oracle_sees_the_exact_family_as_exact(op_name: str, params: dict[str, Any]) -> None:
    op = get_op(op_name)
    xs = _inputs(op_name, params, "exact", "fp32", seed=3)
    for name, t in op.reference(xs, op.validate(params), get_model("fp32")).items():
        assert t.is_exact, name


@pytest.mark.parametrize("seed", range(8))
def test_exact_family_has_an_input_too_wide_for_tf32(seed: int) -> None:
    xs = _inputs(*CASES[0], "exact", "fp32", seed=seed)  # type: ignore[misc]
    assert not all(representable(v, TF32).all() for v in xs.values())


@settings(max_examples=50, deadline=None)
@given(
    ns=st.lists(st.integers(1, 2**21), min_size=1, max_size=4),
    storage=st.sampled_from(STORAGES), data=st.data(),
)
def test_exact_widths_follow_the_rule(ns: list[int], storage: str, data: st.DataObject) -> None:
    names = ["a", "b", "c"]
    pairs = [data.draw(st.permutations(names)) for _ in ns]
    products = [Product(p[0], p[1], n) for p, n in zip(pairs, ns, strict=True)]
    shapes = dict.fromkeys(names + ["bias"], (2,))
    widths = exact_widths(products, shapes, storage)
    cap = min(get_format(storage).p, ACC_BITS)
    assert set(widths) == set(shapes)
    assert all(1 <= w <= cap for w in widths.values())
    for p in products:
        need = widths[p.a] + widths[p.b] + math.ceil(math.log2(p.n)) + EXACT_MARGIN_BITS
        assert need <= ACC_BITS, p
    assert widths["bias"] == min(widths[n] for n in names if any(n in (p.a, p.b)
                                                                 for p in products))


@pytest.mark.parametrize("n", [1, 2, 100, 256])
def test_exact_widths_make_one_input_wider_than_tf32(n: int) -> None:
    widths = exact_widths([Product("a", "b", n)], {"a": (n,), "b": (n,)}, FP32)
    assert max(widths.values()) > TF32.p


def test_exact_widths_narrow_the_most_shared_input() -> None:
    products = [Product("x", "w", 16), Product("g", "w", 16)]
    widths = exact_widths(products, {"x": (1,), "w": (1,), "g": (1,)}, "fp32")
    assert widths["w"] < min(widths["x"], widths["g"])


# -- the other families ------------------------------------------------------------------
@pytest.mark.parametrize("storage", STORAGES)
def test_positive_family_is_positive(storage: str) -> None:
    for arr in _inputs(*CASES[2], "positive", storage).values():  # type: ignore[misc]
        assert (arr > 0).all()
        assert (arr <= 1).all()


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("k", [1, 64, 65536])
def test_heavy_family_spans_decades_without_overflow(storage: str, k: int) -> None:
    xs = _inputs("matmul", {"m": 16, "k": k, "n": 16}, "heavy", storage)
    mags = np.abs(np.concatenate([v.ravel() for v in xs.values()]))
    assert mags.max() / mags.min() > 100
    assert k * mags.max() ** 2 <= SUM_LIMIT * 1.01
    assert np.isfinite(xs["a"] @ xs["b"]).all()


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize(
    ("op_name", "params"),
    [("linear", {"batch": 8, "in_features": 32, "out_features": 12, "bias": False}), CASES[2]],
)
def test_cancel_family_cancels_in_every_contraction(op_name: str, params: dict[str, Any],
                                                    storage: str) -> None:
    # reductions over whole blocks of 4 (linear) or 2 (matmul) cancel down to the
    # small part, 2**-(p // 2) of the large one
    xs = _inputs(op_name, params, "cancel", storage)
    small = 2.0 ** -(min(get_format(storage).p, ACC_BITS) // 2)
    if op_name == "matmul":
        pairs = [(xs["a"], xs["b"])]
    else:
        pairs = [(a, b) for a, b, _ in _linear_contractions(xs)]
    for a, b in pairs:
        ratio = np.abs(a @ b) / (np.abs(a) @ np.abs(b))
        assert np.median(ratio) < 2 * small


@pytest.mark.parametrize("storage", STORAGES)
def test_special_values_are_representable_specials(storage: str) -> None:
    vals = np.array(special_values(storage))
    assert representable(vals, storage).all()
    assert np.isnan(vals).sum() == 1
    assert {np.inf, -np.inf} <= set(vals[np.isinf(vals)])
    assert np.signbit(vals[vals == 0]).tolist() == [False, True]
    fmt = get_format(storage)
    sub = vals[(vals != 0) & (np.abs(vals) < fmt.tiny)]
    assert len(sub) == 2


@pytest.mark.parametrize("storage", STORAGES)
def test_special_family_has_specials_in_every_input(storage: str) -> None:
    specials = special_values(storage)
    for arr in _inputs(*CASES[0], "special", storage).values():  # type: ignore[misc]
        hits = np.isin(arr, specials) | np.isnan(arr)
        assert 1 <= hits.sum() < arr.size or arr.size == 1


# -- invalid arguments ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: generate_inputs("gaussian", {"a": (2,)}, (), "fp32",
                                 np.random.default_rng(0)), "family='gaussian'"),
        (lambda: generate_inputs("normal", {"a": (2,)}, (), "fp8",
                                 np.random.default_rng(0)), "fp8"),
        (lambda: generate_inputs("exact", {"a": (2,)}, (Product("a", "z", 2),), "fp32",
                                 np.random.default_rng(0)), "'z'"),
        (lambda: exact_widths([Product("a", "b", 2**22)], {"a": (1,), "b": (1,)}, "fp32"),
         "n=4194304"),
        (lambda: exact_widths([Product("a", "b", 2)], {"a": (1,), "b": (1,)}, "fp32",
                              wide="c"), "wide='c'"),
        (lambda: special_values("int8"), "int8"),
    ],
)
def test_invalid_arguments(call: Any, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        call()


def _row_kinds(rows: np.ndarray) -> set[str]:
    """What each row of the ``rows`` family is: plain, shifted up or down by a
    power of two, or plain with one massive entry."""
    kinds = set()
    for row in rows:
        med = float(np.median(row))
        if abs(med) > 32:
            shift = 2.0 ** round(math.log2(abs(med)))
            assert 2.0**6 <= shift <= 2.0**12 and abs(med - math.copysign(shift, med)) < 8
            kinds.add("up" if med > 0 else "down")
        elif float(np.max(np.abs(row))) > 32:
            assert np.sum(np.abs(row) > 32) == 1  # one massive entry: the sink
            kinds.add("sink")
        else:
            kinds.add("plain")
    return kinds


def test_rows_family_shifts_rows_and_plants_sinks() -> None:
    x = generate_inputs("rows", {"x": (400, 16)}, (), "fp32", np.random.default_rng(3))["x"]
    assert np.isfinite(x).all()
    assert _row_kinds(x) == {"plain", "up", "down", "sink"}


@pytest.mark.parametrize("storage", ["fp32", "bf16", "fp16"])
def test_large_family_overflows_naive_sums_but_normalises_to_order_one(storage: str) -> None:
    fmt = get_format(storage)
    x = generate_inputs("large", {"x": (50, 64)}, (), storage, np.random.default_rng(4))["x"]
    assert np.isfinite(x).all() and representable(x, fmt).all()
    mags = np.abs(x).max(axis=1)
    assert np.all(mags <= fmt.max) and np.all(mags >= fmt.max / 2.0**7)
    assert np.all(x * x > fmt.max)  # E[x^2] overflows the format
    z = (x - x.mean(axis=1, keepdims=True)) / x.std(axis=1, keepdims=True)
    assert np.isfinite(z).all() and np.abs(z).max() < 10  # layer norm's exact result


def test_masks_come_causal_padded_and_random_in_both_conventions() -> None:
    seen = set()
    for seed in range(60):
        m = generate_integers({"m": IntegerInput(0, 2, "bool")}, {"m": (2, 5, 5)},
                              np.random.default_rng(seed))["m"]
        assert m.dtype == np.bool_ and m.shape == (2, 5, 5)
        rows = m.reshape(-1, 5)
        tril = np.tril(np.ones((5, 5), dtype=bool))
        if all(np.array_equal(a, tril) for a in m):
            seen.add("causal")
        elif all(np.array_equal(a, ~tril) for a in m):
            seen.add("causal, inverted")
        elif all(np.all(r[:-1] >= r[1:]) for r in rows):  # True, then False
            seen.add("padding")
            if not rows.any(axis=1).all():
                seen.add("a fully masked row")
        elif all(np.all(r[:-1] <= r[1:]) for r in rows):
            seen.add("padding, inverted")
        else:
            seen.add("random")
    assert {"causal", "causal, inverted", "padding", "padding, inverted", "random",
            "a fully masked row"} <= seen
