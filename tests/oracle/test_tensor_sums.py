"""Magnitude sums on a GPU's tensor cores (numoracle.oracle.tensor_sums): the TF32
rounding, the column-major GEMM plan, and the growth that makes a TF32 sum an upper
bound, against an emulation of tensor cores that truncate (on the host), and on the
device against the float64 sum."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numoracle.oracle import tensor_sums
from numoracle.oracle.formats import FP32, TF32
from numoracle.oracle.precision import gamma
from numoracle.oracle.tensor_sums import (
    TENSOR_CHUNK,
    chunked_sum,
    in_tf32_range,
    tf32_growth,
    tf32_up,
)

#: how far above the float64 sum a grown TF32 sum may lie (see the module): each
#: magnitude up by less than 2^-10, the growth, and float32's own rounding above
EXCESS = 2.0**-8


def _tf32_magnitudes(rng: np.random.Generator, shape: tuple[int, ...], family: str) -> np.ndarray:
    """Magnitudes in TF32's range: ``normal`` (a few binades), ``wide`` (the whole
    range), ``ends`` (float32's smallest normal and TF32's largest, zeros among them)."""
    x = np.abs(rng.standard_normal(shape)) * 2.0 ** rng.integers(-8, 8, shape)
    if family == "wide":
        x = np.abs(rng.standard_normal(shape)) * 2.0 ** rng.integers(-126, 120, shape)
    if family == "ends":
        x.flat[::3] = FP32.tiny
        x.flat[1::5] = TF32.max * rng.random(x.flat[1::5].shape) ** 8
        x.flat[2::7] = 0.0
    return np.clip(np.where((x != 0) & (x < FP32.tiny), FP32.tiny, x), 0.0, TF32.max)


def test_tf32_up_rounds_up_to_eleven_significant_bits() -> None:
    """``tf32_up``: never below the magnitude, less than 2^-10 of it above, 11
    significant bits (float32's low 13 bits clear), unchanged where TF32 holds it;
    C and Fortran order alike."""
    rng = np.random.default_rng(1)
    for family in ("normal", "wide", "ends"):
        m = _tf32_magnitudes(rng, (37, 23), family)
        for x in (m, np.asfortranarray(m), m.T):
            up = tf32_up(x)
            assert up.dtype == np.float32 and up.shape == x.shape
            up64 = up.astype(np.float64)
            assert np.all(up64 >= x) and np.all(up64 <= x * (1 + 2.0**-10))
            assert np.all(up.view(np.int32) & 0x1FFF == 0)
            np.testing.assert_array_equal(tf32_up(up64), up)
            assert in_tf32_range(x) and np.isfinite(up).all()
    assert not in_tf32_range(np.array([0.0, FP32.tiny / 2]))
    assert not in_tf32_range(np.array([np.nextafter(TF32.max, np.inf)]))
    assert in_tf32_range(np.array([0.0, FP32.tiny, TF32.max]))


def _column_major_gemm(ma: np.ndarray, mb: np.ndarray) -> Any:
    """What cuBLAS computes for :func:`chunked_sum`'s calls, reading the operands'
    memory column-major as the plan says (products exact, each element rounded once
    to float32: at least as accurate as the tensor cores)."""
    flat_a, flat_b = (x.ravel(order="K") for x in (ma, mb))

    def read(flat: np.ndarray, at: int, op: int, rows: int, cols: int, ld: int) -> np.ndarray:
        """``op`` of the column-major ``rows x cols`` (as ``op`` gives it) at ``at``."""
        r, c = (rows, cols) if op == 0 else (cols, rows)
        stored = np.lib.stride_tricks.as_strided(flat[at:], shape=(r, c),
                                                 strides=(flat.itemsize, flat.itemsize * ld))
        return stored if op == 0 else stored.T

    def gemm(plan: Any, c: int, a_at: int, b_at: int, out: np.ndarray) -> None:
        first = read(flat_b, b_at, plan.op_b, plan.n, c, plan.ld_b).astype(np.float64)
        second = read(flat_a, a_at, plan.op_a, c, plan.m, plan.ld_a).astype(np.float64)
        out[...] = (first @ second).T  # column-major n x m: row-major m x n
    return gemm


@pytest.mark.parametrize("held", [1 << 30, 2 * 4 * 3 * 5, 1])
@pytest.mark.parametrize("k", [1, 5, TENSOR_CHUNK, TENSOR_CHUNK + 3, 3 * TENSOR_CHUNK])
def test_the_gemm_plan_reads_c_and_fortran_operands_chunk_by_chunk(
        k: int, held: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """:func:`chunked_sum`'s column-major calls (operations, leading dimensions, each
    chunk's start) give ``a @ b`` for operands in C and Fortran order, the chunks'
    results held all at once, two or one at a time: integers, so exactly."""
    monkeypatch.setattr(tensor_sums, "CHUNK_BYTES", held)
    rng = np.random.default_rng(k)
    m, n = 3, 5
    a = rng.integers(0, 8, (m, k)).astype(np.float32)
    b = rng.integers(0, 8, (k, n)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    for ma in (a, np.asfortranarray(a)):
        for mb in (b, np.asfortranarray(b)):
            got = chunked_sum(ma, mb, np, _column_major_gemm(ma, mb))
            assert got.dtype == (np.float32 if k <= TENSOR_CHUNK else np.float64)
            np.testing.assert_array_equal(got, want)
    assert chunked_sum(a[:, :0], b[:0], np, None).shape == (m, n)


def _truncating_tensor_cores(p: np.ndarray, block: int) -> np.ndarray:
    """A tensor core that truncates: the accumulator and ``block`` exact products at
    a time aligned to the largest of them with 23 fraction bits kept (the rest cut
    off), added exactly, the sum cut to float32's 24 bits; products and sums below
    float32's normal range flushed to zero (``p``: products, the terms last)."""
    p = np.where(p < FP32.tiny, 0.0, p)
    acc = np.zeros(p.shape[:-1])
    for t0 in range(0, p.shape[-1], block):
        terms = np.concatenate([acc[..., None], p[..., t0:t0 + block]], axis=-1)
        top = np.max(terms, axis=-1, keepdims=True)
        q = np.ldexp(1.0, np.frexp(np.where(top > 0, top, 1.0))[1] - 24)  # 2^(e_max - 23)
        s = np.sum(np.floor(terms / q) * q, axis=-1)
        sq = np.ldexp(1.0, np.frexp(np.where(s > 0, s, 1.0))[1] - 24)  # float32's ulp of s
        acc = np.floor(s / sq) * sq
        acc = np.where(acc < FP32.tiny, 0.0, acc)
    return acc


def _swamped(m: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """One product 1, then products of TF32 values just below float32's ulp of 1
    (``2^-23 (1 - 2^-10)``): a truncating accumulator cuts off every one of them."""
    a, b = np.full((m, k), 2.0**-11 * (1 - 2.0**-10)), np.full((k, n), 2.0**-12)
    a[:, 0] = b[0] = 1.0
    return a, b


def _exact(a: np.ndarray, b: np.ndarray) -> list[list[Fraction]]:
    return [[sum((Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a[i], b[:, j],
                                                                          strict=True)),
                 Fraction(0)) for j in range(b.shape[1])] for i in range(a.shape[0])]


@settings(max_examples=40, deadline=None)
@given(k=st.sampled_from([1, 2, 7, 64, 500, TENSOR_CHUNK]),
       family=st.sampled_from(["normal", "wide", "ends", "swamped"]),
       block=st.sampled_from([1, 4, 8, 16]), seed=st.integers(0, 2**32 - 1))
def test_grown_tf32_sums_bound_the_exact_sum_under_truncation(k: int, family: str, block: int,
                                                              seed: int) -> None:
    """Magnitudes rounded up to TF32 and summed by tensor cores that truncate every
    alignment and every sum (the worst the growth assumes), grown by
    :func:`tf32_growth`: never below the exact sum of the magnitudes (in rationals),
    and above it by at most EXCESS (beside the underflow slack)."""
    rng = np.random.default_rng(seed)
    if family == "swamped":
        a, b = _swamped(2, k, 2)
    else:
        a, b = _tf32_magnitudes(rng, (2, k), family), _tf32_magnitudes(rng, (k, 2), family)
    ua, ub = tf32_up(a).astype(np.float64), tf32_up(b).astype(np.float64)
    raw = _truncating_tensor_cores(ua[:, None, :] * ub.T[None, :, :], block)
    grow, tiny = tf32_growth(k)
    S = raw * grow + tiny
    for i, row in enumerate(_exact(a, b)):
        for j, true in enumerate(row):
            assert Fraction(float(S[i, j])) >= true, (i, j, float(S[i, j]), float(true))
            assert float(S[i, j]) <= float(true) * (1 + EXCESS) + tiny
    if family == "swamped" and k > 1:  # the growth is needed: the raw sum falls short
        assert Fraction(float(raw[0, 0])) < _exact(a[:1], b[:, :1])[0][0]


def test_growth_covers_every_chunk_length() -> None:
    """``1 + gamma_{2c+2}(2^-23)`` (``c`` terms a GEMM, at most TENSOR_CHUNK) exceeds
    what ``2c - 2`` ulps lost of the exact sum, and the float64 sum of the chunks,
    require; the excess stays within EXCESS with the magnitudes rounded up."""
    for k in (1, 2, 100, TENSOR_CHUNK, TENSOR_CHUNK + 1, 1 << 20):
        grow, tiny = tf32_growth(k)
        c = min(k, TENSOR_CHUNK)
        needed = 1 / (1 - (2 * c - 2) * 2.0**-23) * (1 + float(gamma(np.asarray(k), 2.0**-53)))
        assert grow >= needed
        assert tiny == (k + 1) * 2.0**-125
        assert (1 + 2.0**-10) ** 2 * grow * (1 + float(gamma(np.asarray(c), 2.0**-24))) \
            < 1 + EXCESS


# ---- on the device -------------------------------------------------------------------

def _device_sums(cupy: Any, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The grown TF32 sum on the device (through :func:`tensor_sums.tensor_sum`) and
    the float64 sum, of host magnitudes ``a``, ``b`` (C or Fortran order kept)."""
    da, db = cupy.asarray(a, order="K"), cupy.asarray(b, order="K")
    S = tensor_sums.tensor_sum(tf32_up(da), tf32_up(db)).astype(cupy.float64)
    grow, tiny = tf32_growth(a.shape[1])
    return cupy.asnumpy(S * grow + tiny), cupy.asnumpy(da @ db)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(3, 1, 2), (65, 300, 33), (128, 1024, 1024),
                                   (17, 3 * TENSOR_CHUNK + 5, 9)])
@pytest.mark.parametrize("family", ["normal", "wide", "ends", "swamped"])
def test_device_tf32_sums_bound_the_float64_sums(cupy: Any, shape: tuple[int, int, int],
                                                 family: str) -> None:
    """On the tensor cores: the grown TF32 sum is at least the float64 sum (less its
    own rounding) and within EXCESS of it, for operands in C and Fortran order."""
    m, k, n = shape
    rng = np.random.default_rng(k)
    if family == "swamped":
        a, b = _swamped(m, k, n)
    else:
        a, b = _tf32_magnitudes(rng, (m, k), family), _tf32_magnitudes(rng, (k, n), family)
    for x in (a, np.asfortranarray(a)):
        for y in (b, np.asfortranarray(b)):
            _grown_bounds_float64(*_device_sums(cupy, x, y), k)


def _grown_bounds_float64(S: np.ndarray, S64: np.ndarray, k: int) -> None:
    """The grown TF32 sum ``S`` at least the float64 sum ``S64`` (less its own
    rounding) and within EXCESS above it; infinite only where float32 overflows."""
    low = 1 - 2 * float(gamma(np.asarray(k), 2.0**-53))
    tiny = tf32_growth(k)[1]
    over = ~np.isfinite(S)
    assert np.all(S64[over] >= FP32.max * (1 - EXCESS)), "an infinite sum below float32's range"
    S, S64 = S[~over], S64[~over]
    assert np.all(S >= S64 * low), float(np.min(S / S64))
    assert np.all(S <= S64 * (1 + EXCESS) + tiny), float(np.max(S / S64))


@pytest.mark.gpu
def test_device_tf32_sums_of_torch_tensors(torch_cuda: Any) -> None:
    """torch's tensors on the device go through CuPy without a copy, on torch's stream
    (the path :func:`tensor_sums.available` does not take yet: see there)."""
    pytest.importorskip("cupy")
    rng = np.random.default_rng(5)
    a, b = _tf32_magnitudes(rng, (40, 3000), "normal"), _tf32_magnitudes(rng, (3000, 24), "wide")
    ta, tb = (torch_cuda.as_tensor(x, device="cuda") for x in (a, b))
    S = tensor_sums.tensor_sum(tf32_up(ta), tf32_up(tb.T.contiguous().T))
    assert isinstance(S, torch_cuda.Tensor) and S.is_cuda
    grow, tiny = tf32_growth(3000)
    _grown_bounds_float64(S.double().cpu().numpy() * grow + tiny, a @ b, 3000)


def _inputs(name: str, raw: dict, seed: int) -> tuple[dict, dict]:
    """The op's parameters and float32-valued inputs over forty binades."""
    from numoracle.oracle.ops import get_op

    op = get_op(name)
    params = op.validate(raw)
    rng = np.random.default_rng(seed)
    inputs = {k: (rng.standard_normal(s) * 2.0 ** rng.integers(-20, 20, s))
              .astype(np.float32).astype(np.float64)
              for k, s in op.input_shapes(params).items()}
    return params, inputs


@pytest.mark.gpu
@pytest.mark.parametrize("namespace", ["cupy"])
@pytest.mark.parametrize("model_name", ["fp32", "tf32", "bf16"])
def test_device_linear_radii_with_tf32_sums_loosen_by_at_most_the_excess(
        namespace: str, model_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The linear backward's and a grouped convolution's references on the device with
    their magnitude sums on the tensor cores (``SINGLE_SUMS``) against float64 sums:
    every radius as large or larger, at most EXCESS of itself larger, no radius 0 that
    the float64 sums do not give; the values the same."""
    from numoracle.oracle import tracked
    from numoracle.oracle.ops import get_op
    from numoracle.oracle.precision import get_model
    from numoracle.oracle.xp import as_namespace, namespace_named

    xp = namespace_named(namespace)  # (skips below without the namespace's device)
    if namespace == "cupy":
        pytest.importorskip("cupy")
        device = None
    else:
        torch = pytest.importorskip("torch")
        pytest.importorskip("cupy")
        if not torch.cuda.is_available():
            pytest.skip("no CUDA device")
        device = torch.device("cuda", 0)
    worst = 0.0
    cases = [("linear", {"batch": b, "in_features": i, "out_features": o, "bias": True})
             for b, i, o in ((3, 17, 5), (40, 300, 70), (64, 5000, 33), (2100, 64, 48))]
    cases.append(("conv2d", {"batch": 4, "in_channels": 8, "out_channels": 6, "height": 9,
                             "width": 7, "kernel_size": 3, "padding": 1, "groups": 2,
                             "bias": True}))
    for name, raw in cases:
        op = get_op(name)
        params, inputs = _inputs(name, raw, 11)
        shape = tuple(raw.values())
        dev = {k: as_namespace(v, xp, device) for k, v in inputs.items()}
        refs = {}
        for single in (True, False):
            monkeypatch.setattr(tracked, "SINGLE_SUMS", single)
            assert tracked._single(get_model(model_name), dev["x"], dev["weight"]) == single
            refs[single] = {k: t.to_host() for k, t in
                            op.reference(dev, params, get_model(model_name)).items()}
        for out, t in refs[True].items():
            f = refs[False][out]
            np.testing.assert_array_equal(t.value, f.value)
            for radius in ("det", "prob"):
                r32, r64 = (np.broadcast_to(getattr(x, radius), x.shape) for x in (t, f))
                assert not np.any((r32 == 0) & (r64 != 0)), (shape, out, radius)
                judged = np.isfinite(r64) & (r64 > 0)
                ratio = r32[judged] / r64[judged]
                assert np.all(ratio >= 1.0), (shape, model_name, out, radius)
                worst = max(worst, float(ratio.max(initial=1.0)) - 1.0)
    assert 0.0 < worst <= EXCESS


@pytest.mark.gpu
def test_device_tf32_sums_keep_the_zoo_caught_and_the_kernel_passing(
        cupy: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """With the magnitude sums on the tensor cores, every reference on the device:
    each linear mutant of the zoo is caught, the correct kernel passes."""
    from numoracle.checking import check
    from numoracle.kernels import get_target
    from numoracle.oracle import tracked
    from numoracle.running.runner import run_target
    from numoracle.zoo import mutants as zoo_mutants

    monkeypatch.setattr(tracked, "SINGLE_SUMS", True)
    monkeypatch.setattr(check, "GPU_REFERENCE_WORK", 0)
    mutants = zoo_mutants(["linear"])
    assert mutants
    for t in mutants:
        r = run_target(t, examples=100, seed=0, store=tmp_path, shrink=False)
        assert r.verdict == "FAIL", f"{t.name}: {r.verdict} after {r.cases} cases"
    good = run_target(get_target("numpy-fp32", "linear"), examples=100, seed=0, store=tmp_path)
    assert good.verdict == "pass" and good.cases >= 50, (good.verdict, good.cases)


def test_the_range_of_several_arrays_is_every_arrays() -> None:
    inside, below = np.array([[0.0, FP32.tiny, 1.0]]), np.array([FP32.tiny / 4])
    assert in_tf32_range(inside, inside.T)
    assert not in_tf32_range(inside, below) and not in_tf32_range(below, inside)


_HOST_STUBS = r"""
#include <cmath>
#include <cstdio>
#include <cstring>
#include <algorithm>
using std::max;
static long long __double_as_longlong(double d) { long long b; memcpy(&b, &d, 8); return b; }
static double __longlong_as_double(long long b) { double d; memcpy(&d, &b, 8); return d; }
static int __ffsll(long long x) { return __builtin_ffsll(x); }
#define __device__ static
"""


def test_the_device_pass_writes_tf32_up_and_flags_the_range(tmp_path: Any) -> None:
    """The operand-facts pass of the TF32 sums (its C text, the loop body over one
    element, compiled with g++ on the host): the magnitude's bits are
    :func:`tf32_up`'s and OFF_SINGLE is set exactly where :func:`in_tf32_range`
    fails (NOT_FINITE for infinities and NaN)."""
    import shutil
    import subprocess

    from numoracle.oracle import fused

    if shutil.which("g++") is None:
        pytest.skip("no g++ on this machine")
    src = fused._FACTS_TF32
    body = src[src.index("double v = x[i];"):src.index("  /* the block's warps")].rstrip()
    assert body.endswith("}")
    program = _HOST_STUBS + fused._REPRESENTABLE + r"""
int main() {
  int n; if (scanf("%d", &n) != 1) return 1;
  int t = 23, emin = -126, none = 1 << 20, lowest = 0;
  double fmax = 3.4028234663852886e38, tiny = 1.1754943508222875e-38;
  for (int k = 0; k < n; ++k) {
    unsigned long long bits; if (scanf("%llx", &bits) != 1) return 1;
    double xv; memcpy(&xv, &bits, 8);
    const double* x = &xv; float mag = 0.0f; float* ax = &mag; int far = 0, flags = 0;
    for (int i = 0; i < 1; ++i) {
""" + body[:-1] + r"""
    }
    unsigned int out; memcpy(&out, &mag, 4); printf("%08x %d\n", out, flags);
    lowest = max(lowest, far);
  }
  return lowest < 0;
}
"""
    (tmp_path / "facts.cpp").write_text(program)
    subprocess.run(["g++", "-O1", "-o", str(tmp_path / "facts"), str(tmp_path / "facts.cpp")],
                   check=True, capture_output=True)
    rng = np.random.default_rng(9)
    x = np.concatenate([rng.standard_normal(4000) * 2.0 ** rng.integers(-140, 140, 4000),
                        [0.0, -0.0, FP32.tiny, -np.nextafter(FP32.tiny, 0), TF32.max,
                         -np.nextafter(TF32.max, np.inf), FP32.max, 1 + 2.0**-11, np.inf,
                         np.nan]])
    lines = subprocess.run([str(tmp_path / "facts")], check=True, capture_output=True,
                           text=True, input=f"{x.size}\n" + "\n".join(
                               f"{b:016x}" for b in x.view(np.uint64))).stdout.split()
    mags = np.array([int(v, 16) for v in lines[::2]], dtype=np.uint32)
    flags = np.array([int(v) for v in lines[1::2]])
    finite = np.isfinite(x)
    inside = np.array([in_tf32_range(np.abs(x[i:i + 1])) for i in range(x.size)]) & finite
    with np.errstate(all="ignore"):
        want = tf32_up(np.abs(x)).view(np.uint32)
    np.testing.assert_array_equal(mags[inside], want[inside])
    np.testing.assert_array_equal((flags[finite] & fused.OFF_SINGLE) != 0, ~inside[finite])
    assert np.all(flags[~finite] & fused.NOT_FINITE)


def test_torch_namespace_sums_through_the_tensor_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's namespace with its contractions' magnitude sums on the tensor path (on
    the CPU here: the device's GEMMs emulated by the column-major reading above, at
    least as accurate as the tensor cores): the linear backward's and a grouped
    convolution's (stacks of matrices) radii as large as with float64 sums on NumPy,
    and at most EXCESS of themselves larger."""
    torch = pytest.importorskip("torch")
    from numoracle.oracle import fused, tracked
    from numoracle.oracle.ops import get_op
    from numoracle.oracle.precision import get_model
    from numoracle.oracle.xp import as_namespace, namespace_named, on_device

    summed: list[int] = []

    def emulated(ma: Any, mb: Any) -> Any:
        assert ma.dtype == mb.dtype == torch.float32 and ma.ndim == mb.ndim == 2
        a, b = ma.numpy(), mb.numpy()
        summed.append(a.shape[1])
        return torch.as_tensor(np.asarray(chunked_sum(a, b, np, _column_major_gemm(a, b))))

    stacks: list[int] = []
    whole = tensor_sums.tensor_sum

    def stacked(ma: Any, mb: Any) -> Any:
        stacks.extend([ma.ndim] if ma.ndim > 2 else [])
        return whole(ma, mb)

    monkeypatch.setattr(tensor_sums, "available", lambda x: True)
    monkeypatch.setattr(tensor_sums, "_matrix_sum", emulated)
    monkeypatch.setattr(fused, "tensor_sum", stacked)
    xp = namespace_named("torch")
    worst = 0.0
    conv = {"batch": 2, "in_channels": 4, "out_channels": 6, "height": 5, "width": 6,
            "kernel_size": 3, "padding": 1, "groups": 2, "bias": True}
    for name, raw in [("linear", {"batch": b, "in_features": i, "out_features": o, "bias": True})
                      for b, i, o in ((3, 17, 5), (40, 300, 70), (5, TENSOR_CHUNK + 7, 3))] + [
            ("conv2d", conv)]:
        op = get_op(name)
        params, inputs = _inputs(name, raw, 7)
        model = get_model("fp32")
        monkeypatch.setattr(tracked, "SINGLE_SUMS", False)
        host = op.reference(inputs, params, model)
        monkeypatch.setattr(tracked, "SINGLE_SUMS", True)
        with on_device(xp, "cpu"):
            dev = {k: as_namespace(v, xp) for k, v in inputs.items()}
            out = {k: t.to_host() for k, t in op.reference(dev, params, model).items()}
        for name, h in host.items():
            o = out[name]
            assert np.all(np.abs(o.value - h.value) <= h.ref_err + o.ref_err)
            for radius in ("det", "prob"):
                r, r64 = (np.broadcast_to(getattr(t, radius), t.shape) for t in (o, h))
                judged = np.isfinite(r64) & (r64 > 0)
                assert not np.any((r == 0) & (r64 != 0))
                ratio = r[judged] / r64[judged]
                assert np.all(ratio >= 1.0) and np.all(ratio <= 1 + EXCESS), (raw, name)
                worst = max(worst, float(ratio.max(initial=1.0)) - 1.0)
    assert TENSOR_CHUNK + 7 in summed and worst > 0.0 and stacks


def test_torch_tensors_sum_in_float64() -> None:
    """torch's tensors are not routed to the tensor cores (see ``available``)."""
    torch = pytest.importorskip("torch")
    from numoracle.oracle.xp import namespace_named

    xp = namespace_named("torch")
    assert not tensor_sums.available(xp.from_tensor(torch.ones(2, 2, dtype=torch.float64)))


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(3, 7, 5), (128, 1024, 1024), (64, 1, 1), (5, 0, 3)])
def test_device_value_products_are_float64_gemms(cupy: Any, shape: tuple[int, int, int]) -> None:
    """:func:`tensor_sums.value_product` (one cuBLAS float64 call) takes the device's
    probe and gives ``a @ b`` for operands in C and Fortran order, C-ordered float64:
    integers exactly, random values within float64's own error bound of the sum
    (``gamma_k(2^-53) |a| @ |b|``), as CuPy's ``matmul`` (the path where the probe fails)."""
    m, k, n = shape
    rng = np.random.default_rng(m + k)
    assert tensor_sums._probe_values(int(cupy.cuda.runtime.getDevice()))
    ints = (rng.integers(-64, 64, (m, k)).astype(np.float64),
            rng.integers(-64, 64, (k, n)).astype(np.float64))
    reals = (rng.standard_normal((m, k)), rng.standard_normal((k, n)))
    g = float(gamma(np.asarray(max(k, 1)), 2.0**-53))
    for a, b in (ints, reals):
        want, S = a @ b, np.abs(a) @ np.abs(b)
        for x in (a, np.asfortranarray(a)):
            for y in (b, np.asfortranarray(b)):
                got = tensor_sums.value_product(cupy.asarray(x, order="K"),
                                                cupy.asarray(y, order="K"))
                assert got.dtype == cupy.float64 and got.flags.c_contiguous
                host = cupy.asnumpy(got)
                if a is ints[0]:
                    np.testing.assert_array_equal(host, want)
                else:
                    assert np.all(np.abs(host - want) <= 2 * g * S)
    # a transposed view (Fortran order) and a strided one (CuPy's matmul)
    a, b = (cupy.asarray(v) for v in reals)
    np.testing.assert_allclose(cupy.asnumpy(tensor_sums.value_product(b.T, a.T)),
                               cupy.asnumpy(b.T @ a.T), rtol=1e-12, atol=1e-12)
    if k > 1:
        np.testing.assert_array_equal(cupy.asnumpy(tensor_sums.value_product(a[:, ::2], b[::2])),
                                      cupy.asnumpy(a[:, ::2] @ b[::2]))
