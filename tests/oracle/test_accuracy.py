"""Elementwise accuracy profiles and the one claims record: a kernel whose
division is the 2-ulp ``div.full.f32`` passes under ``triton``/``cuda-fast`` and
fails under ``ieee``; the formats' record answers every dtype table."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

from numoracle import check_kernel
from numoracle.api import _make_target
from numoracle.errors import InvalidArgument, KernelMismatch
from numoracle.oracle import elementwise as ew
from numoracle.oracle.accuracy import PROFILES, Profile, Ulps, get_profile, register
from numoracle.oracle.formats import BF16, FP16, FP32, TF32, format_of
from numoracle.oracle.precision import PrecisionModel, claims, get_model
from numoracle.oracle.tracked import exact
from numoracle.oracle.traced import Claims, RuleContext
from numoracle.oracle.traced.library.elementwise import erf_rule

FAST = {"examples": 25, "store": None, "backend": "torch-cpu"}


def _away(q32: np.ndarray, exact_q: np.ndarray, ulps: int) -> np.ndarray:
    """``q32`` moved ``ulps`` float32 ulps further from the exact quotient (on
    the side it was rounded to): within ``ulps + 1/2`` ulps of the truth. An exact
    zero, infinity or NaN stays (an approximate division gets those right)."""
    up = q32.astype(np.float64) >= exact_q
    out = q32
    for _ in range(ulps):
        out = np.where(up, np.nextafter(out, np.float32(np.inf)),
                       np.nextafter(out, np.float32(-np.inf)))
    return np.where((q32 == 0) | ~np.isfinite(q32), q32, out).astype(np.float32)


def approx_divide(x, y):
    """A division as ``div.full.f32`` may return it: 1.5 ulps from the exact quotient."""
    xn, yn = x.numpy(), y.numpy()
    q = (xn / yn).astype(np.float32)
    exact_q = xn.astype(np.float64) / yn.astype(np.float64)
    return {"out": torch.from_numpy(_away(q, exact_q, 1).astype(np.float32))}


def divide(x, y):
    return x / y


DIV_INPUTS = {"x": ("n",), "y": ("n",)}


@pytest.mark.parametrize("precision", ["triton", "cuda-fast", "bf16+triton"])
def test_an_approximate_division_passes_where_claimed(precision):
    backend = FAST["backend"]
    kw = {**FAST, "backend": backend}
    if precision.startswith("bf16"):
        def kernel(x, y):  # bf16 storage: the fp32 quotient rounded to bf16
            return {"out": approx_divide(x.float(), y.float())["out"].to(torch.bfloat16)}
    else:
        kernel = approx_divide
    r = check_kernel(kernel, reference=divide, inputs=DIV_INPUTS, op="acc_div_" + precision.replace("+", "_"),
                     precision=precision, **kw)
    assert r.verdict == "pass" and r.cases == FAST["examples"]


def test_an_approximate_division_fails_under_ieee():
    with pytest.raises(KernelMismatch, match="claiming fp32"):
        check_kernel(approx_divide, reference=divide, inputs=DIV_INPUTS, op="acc_div_ieee",
                     precision="fp32", **FAST)


def test_three_ulps_fail_even_under_triton():
    def three_ulps(x, y):
        xn, yn = x.numpy(), y.numpy()
        q = (xn / yn).astype(np.float32)
        return {"out": torch.from_numpy(_away(q, xn.astype(np.float64) / yn, 3))}

    with pytest.raises(KernelMismatch):
        check_kernel(three_ulps, reference=divide, inputs=DIV_INPUTS, op="acc_div_3ulp",
                     precision="triton", **FAST)


def test_a_fast_exp_is_charged_by_its_argument():
    x = exact(np.array([0.5, 10.0, -40.0]))
    ieee, fast = get_model("fp32"), get_model("fp32", accuracy="triton")
    r_ieee = ew.exp(x, ieee).det
    r_fast = ew.exp(x, fast).det
    assert np.all(r_fast > r_ieee)
    # __expf: 2 + 1.173 |x| ulps; the ieee expf: 2 ulps
    ratio = r_fast / r_ieee
    np.testing.assert_allclose(ratio, (2 + 1.173 * np.abs(x.value)) / 2, rtol=1e-6)


def test_a_fast_log_carries_an_absolute_error_near_one():
    x = exact(np.array([1.0 + 2.0**-20]))
    r = ew.log(x, get_model("cuda-fast")).det[0]
    assert r >= 3.02 * 2.0**-23  # 2^-21.41 absolute on [0.5, 2]
    assert ew.log(x, get_model("fp32")).det[0] < 2.0**-40


def test_profiles_are_a_table_entry():
    assert {"ieee", "cuda-fast", "triton"} <= set(PROFILES)
    p = Profile("test-crude", "every function 8 ulps", {"div": Ulps(8.0)}, extra=Ulps(8.0))
    try:
        register(p)
        m = get_model("fp32", accuracy="test-crude")
        assert m.div_rel() == 16.0 and m.name == "fp32+test-crude"
        assert m.error_of("tanh", 2.0) == Ulps(10.0)
        with pytest.raises(InvalidArgument, match="registered already"):
            register(Profile("test-crude", "another", {}))
    finally:
        PROFILES.pop("test-crude", None)
    with pytest.raises(InvalidArgument, match="accuracy='fastest'.*ieee"):
        get_model("fp32", accuracy="fastest")
    # tanh is made of exponentials and a division: relative errors; pow goes through a
    # logarithm and takes the fast logarithm's absolute error too
    assert get_profile("triton").error("tanh", 2.0) == Ulps(3.5, 1.173)
    assert get_profile("triton").error("pow", 4.0) == Ulps(5.5, 1.173, 3.02)


def test_a_per_function_claim_beats_the_profile():
    m = get_model("triton", ulps={"exp": 64.0})
    assert m.error_of("exp", 2.0) == 64.0
    assert m.error_of("log", 1.0) == get_profile("triton").ulps["log"]


def test_claims_are_changes_of_the_one_record():
    c = Claims(rounding="fused", accuracy="cuda-fast", ulps={"tanh": 4.0})
    assert Claims is claims
    ctx = RuleContext(get_model("bf16"), c)
    assert isinstance(ctx.model, PrecisionModel)
    assert (ctx.model.rounding, ctx.model.accuracy, ctx.model.error_of("tanh")) == (
        "fused", "cuda-fast", 4.0)
    assert ctx.model.flush_subnormal_inputs  # cuda-fast flushes subnormals
    assert PrecisionModel.from_dict(ctx.model.to_dict()) == ctx.model
    with pytest.raises(InvalidArgument, match="not claims"):
        Claims(ulp={"tanh": 1.0})
    with pytest.raises(InvalidArgument, match="variance='three-pass'"):
        Claims(variance="three-pass")


def test_a_triton_target_claims_the_triton_profile_and_says_so():
    t = _make_target(approx_divide, op="linear", precision="fp32", backend="triton")
    assert t.backend == "torch-cuda" and t.precision.accuracy == "triton"
    assert t.precision.name == "fp32+triton" and "Triton target" in t.description
    given = get_model("fp32")
    t2 = _make_target(approx_divide, op="linear", precision=given, backend="triton")
    assert t2.precision.accuracy == "ieee"  # a model given whole is kept as given


@pytest.mark.parametrize("dtype, fmt", [
    ("fp32", FP32), ("float32", FP32), (np.float32, FP32), (torch.float32, FP32),
    (torch.bfloat16, BF16), (ml_dtypes.bfloat16, BF16), ("bfloat16", BF16),
    (np.float16, FP16), (torch.float16, FP16)])
def test_every_dtype_maps_to_its_format(dtype, fmt):
    assert format_of(dtype) is fmt


def test_a_format_is_a_complete_record():
    assert FP32.smallest_subnormal == 2.0**-149 and FP16.smallest_subnormal == 2.0**-24
    assert FP16.largest == 65504.0 and BF16.smallest_normal == 2.0**-126
    assert BF16.numpy_dtype() == np.dtype(ml_dtypes.bfloat16)
    assert FP16.torch_dtype() is torch.float16
    with pytest.raises(InvalidArgument, match="compute format only"):
        TF32.numpy_dtype()
    with pytest.raises(InvalidArgument, match="int8"):
        format_of("int8")


def test_kernelbench_claims_are_models_and_the_cli_offers_them_all():
    from numoracle.cli.kernelbench import _PRECISIONS
    from numoracle.kernelbench.judge import PRECISIONS

    assert tuple(PRECISIONS) == _PRECISIONS
    assert all(isinstance(m, PrecisionModel) for m in PRECISIONS.values())
    assert PRECISIONS["triton"].accuracy == "triton" and PRECISIONS["bf16"].bias_after_store


def _fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """A float32 fused multiply-add: the product exact in float64, one rounding."""
    return (a.astype(np.float64) * b + c).astype(np.float32)


def _vectorised_erf(x: np.ndarray) -> np.ndarray:
    """erf as ATen's vectorised float kernels evaluate it (GELU and its backward):
    Abramowitz & Stegun 7.1.26 in float32 with fused multiply-adds."""
    f = np.float32
    p, p1, p2, p3, p4, p5 = (f(0.3275911), f(0.254829592), f(-0.284496736), f(1.421413741),
                             f(-1.453152027), f(1.061405429))
    a, one = np.abs(x), np.ones_like(x)
    t = one / _fma32(np.full_like(x, p), a, one)
    r = _fma32(_fma32(_fma32(_fma32(np.full_like(x, p5), t, np.full_like(x, p4)), t,
                             np.full_like(x, p3)), t, np.full_like(x, p2)), t,
               np.full_like(x, p1))
    q = -(np.exp(-(x * x)) * t)
    return np.copysign(_fma32(q, r, one), x)


def test_torchs_cpu_erf_is_within_the_torch_cpu_profile_and_beyond_ieee():
    x = np.concatenate([np.linspace(-4, 4, 100_001), np.linspace(-0.1, 0.1, 100_001)]
                       ).astype(np.float32)
    err = np.abs(_vectorised_erf(x).astype(np.float64) - torch.erf(
        torch.from_numpy(x).double()).numpy())
    ratios = {}
    for accuracy in ("ieee", "torch-cpu"):
        ctx = RuleContext(get_model("fp32", accuracy=accuracy))
        ratios[accuracy] = float(np.max(err / erf_rule(ctx, exact(x.astype(np.float64))).det))
    assert ratios["ieee"] > 1.5  # an absolute error: many ulps of a small erf
    assert ratios["torch-cpu"] < 0.75  # 8 ulp(1) claimed, under 5 reached
    assert get_profile("torch-cpu").error("erf", 2.0) == Ulps(2.0, of_one=8.0)
    assert get_model("bf16", accuracy="torch-cpu").name == "bf16+torch-cpu"
