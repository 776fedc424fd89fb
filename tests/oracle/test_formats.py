"""Bit-exact quantization against torch's and ml_dtypes' casts."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from numoracle.errors import InvalidArgument
from numoracle.oracle.formats import (
    BF16,
    FORMATS,
    FP16,
    FP32,
    TF32,
    _quantize_general,
    get_format,
    quantize,
    representable,
)
from numoracle.oracle.xp import namespace_named, to_numpy


def _wide(seed: int, n: int = 20000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * np.exp2(rng.integers(-150, 130, n))
    # exact ties of fp32 and of fp16, normal and subnormal
    odd = 2 * rng.integers(0, 1 << 24, n // 4) + 1
    ties = np.concatenate([odd * np.exp2(rng.integers(-175, 104, n // 4) - 1.0),
                           (odd % 4096) * np.exp2(rng.integers(-36, 5, n // 4) - 1.0)])
    return np.concatenate([x, ties, [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65520.0, 2.0**-24,
                               2.0**-25, 3 * 2.0**-26, 2.0**-149, 2.0**-150, 3.0 * 2**-151]])


@pytest.mark.parametrize("seed", range(3))
def test_fp32_matches_numpy_cast(seed: int) -> None:
    x = _wide(seed)
    with np.errstate(over="ignore"):
        want = x.astype(np.float32).astype(np.float64)
    np.testing.assert_array_equal(quantize(x, FP32), want)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("fmt", [FP32, FP16], ids=["fp32", "fp16"])
def test_general_path_matches_the_casts_bit_for_bit(seed: int, fmt) -> None:
    """The scaling path (what CuPy arrays and the other formats take) agrees with
    the IEEE casts the host uses for fp32 and fp16, sign of zero included."""
    x = _wide(seed)
    fast = quantize(x, fmt)
    general = _quantize_general(x, fmt, "rne", np)
    np.testing.assert_array_equal(general, fast)
    assert (np.signbit(general) == np.signbit(fast))[~np.isnan(x)].all()


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("rounding", ["rne", "rz"])
@pytest.mark.parametrize("name", [n for n in FORMATS if n != "fp64"])
def test_torchs_namespace_quantizes_as_the_general_path(seed: int, rounding: str,
                                                         name: str) -> None:
    """In torch's namespace (its quantum made from the exponent field) the same bits
    as NumPy's general path, sign of zero and NaN included, saturation and overflow."""
    fmt = get_format(name)
    x = np.concatenate([_wide(seed), fmt.max * np.array([1.0, -1.0, 1 + 2.0**-20, -2.0, 0.5]),
                        [2.0**-1074, -2.0**-1060, 2.0**-1022, 1.7e308, -1.7e308]])
    tx = namespace_named("torch")
    got = to_numpy(quantize(tx.asarray(torch.from_numpy(x)), fmt, rounding))
    want = _quantize_general(x, fmt, rounding, np)
    assert np.array_equal(got.view(np.int64)[~np.isnan(x)], want.view(np.int64)[~np.isnan(x)])
    assert np.array_equal(np.isnan(got), np.isnan(want))


@pytest.mark.parametrize("seed", range(3))
def test_fp16_matches_numpy_and_torch(seed: int) -> None:
    x = _wide(seed)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).astype(np.float64)
    np.testing.assert_array_equal(quantize(x, FP16), want)
    # torch converts float64 to half through float32 (twice rounded): compared on
    # float32 values, where that is exact
    xf = quantize(x, FP32)
    np.testing.assert_array_equal(quantize(xf, FP16), torch.tensor(xf).half().double().numpy())


@pytest.mark.parametrize("seed", range(3))
def test_bf16_matches_torch_and_ml_dtypes_from_fp32(seed: int) -> None:
    # both libraries convert float64 to bf16 through float32 (a double rounding);
    # from float32 values the conversion is a single rounding and must agree.
    with np.errstate(over="ignore"):
        x = _wide(seed).astype(np.float32).astype(np.float64)
    got = quantize(x, BF16)
    np.testing.assert_array_equal(
        got, torch.tensor(x, dtype=torch.float32).bfloat16().double().numpy())
    np.testing.assert_array_equal(got, x.astype(ml_dtypes.bfloat16).astype(np.float64))


@given(st.floats(allow_nan=False, width=32), st.sampled_from(["rne", "rz"]))
@example(1 + 2.0**-11, "rne")
@example(1 + 3 * 2.0**-12, "rz")
def test_tf32_is_fp32_with_ten_mantissa_bits(x: float, rounding: str) -> None:
    q = float(quantize(x, TF32, rounding))
    if not np.isfinite(q):
        assert np.isinf(x) or (rounding == "rne" and abs(x) > TF32.max)
        return
    assert representable(np.array([q]), TF32)[0]
    # the bit pattern of q in fp32 has its 13 low mantissa bits clear
    bits = np.array([q], dtype=np.float32).view(np.uint32)[0]
    assert bits & 0x1FFF == 0
    u = TF32.unit_roundoff(rounding)
    assert abs(q - x) <= u * abs(x) + 2.0 ** (TF32.emin - TF32.t)
    if rounding == "rz":
        assert abs(q) <= abs(x)


def test_rz_truncates_and_saturates() -> None:
    assert float(quantize(1 + 2**-8 + 2**-9, BF16, "rz")) == 1.0
    assert float(quantize(1e6, FP16, "rz")) == FP16.max
    assert float(quantize(1e6, FP16, "rne")) == np.inf


@pytest.mark.parametrize(("name", "t", "emin"), [("fp32", 23, -126), ("tf32", 10, -126),
                                                 ("bf16", 7, -126), ("fp16", 10, -14)])
def test_format_table(name: str, t: int, emin: int) -> None:
    f = FORMATS[name]
    assert (f.t, f.emin, f.u) == (t, emin, 2.0 ** -(t + 1))


@pytest.mark.parametrize(("args", "match"), [
    (("fp8",), "format 'fp8' is unknown"),
    ((None,), "is unknown"),
])
def test_get_format_rejects(args: tuple, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        get_format(*args)


def test_quantize_rejects_unknown_rounding() -> None:
    with pytest.raises(InvalidArgument, match="rounding='up'"):
        quantize(1.0, FP32, "up")
