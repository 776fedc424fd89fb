"""The fused bound arithmetic: CuPy's one-kernel forms and numba's loops give NumPy's
passes' bits."""

from __future__ import annotations

import os
from dataclasses import replace
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numoracle.oracle import fused_cpu
from numoracle.oracle import elementwise as ew
from numoracle.oracle.accuracy import Ulps
from numoracle.oracle.elementwise import mul as ew_mul
from numoracle.oracle.formats import FP16, FP32, TF32
from numoracle.oracle.fused import (
    NOT_FINITE,
    OFF_SINGLE,
    SUBNORMAL,
    UNREPRESENTABLE,
    add_rounding,
    contraction_radii,
    fused_single_sum,
    in_single_range,
    larger_counts,
    magnitude_sum,
    operand_facts,
    single_magnitude,
    store_rounding,
)
from numoracle.oracle.precision import gamma, get_model
from numoracle.oracle.traced.library import ieee
from numoracle.oracle.traced.library.ieee import special_points
from numoracle.oracle.tracked import (
    Tracked,
    add,
    bounded,
    either,
    exact,
    matmul,
    mul_scalar,
    store,
    sub,
)
from numoracle.oracle.xp import as_namespace, namespace_named, to_numpy


@contextmanager
def _numpy_passes() -> Iterator[None]:
    """The NumPy passes, numba's loops switched off (the definitions they match)."""
    saved = fused_cpu._loops
    fused_cpu._loops = lambda: None  # type: ignore[assignment]
    try:
        yield
    finally:
        fused_cpu._loops = saved  # type: ignore[assignment]


@pytest.fixture(autouse=True)
def _loops_at_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """The elementwise loops run on this module's small cases too (they compare them
    with the passes, which run below :data:`fused_cpu.LOOP_MIN` elements)."""
    monkeypatch.setattr(fused_cpu, "LOOP_MIN", 0)


@pytest.fixture(params=["numba", pytest.param("cupy", marks=pytest.mark.gpu)])
def fast_xp(request: pytest.FixtureRequest) -> Any:
    """The array module of a one-pass backend: NumPy with numba's loops (skipped
    without numba), or CuPy (skipped without a GPU)."""
    if request.param == "cupy":
        return request.getfixturevalue("cupy")
    if not fused_cpu.available():
        pytest.skip("numba is not installed (pip install 'numoracle[fast]')")
    return np


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
    det, prob, ref = contraction_radii(S, 1 + 2 * g64, 41 * 2.0**-125, 40 * 2.0**-1074, 3e-6,
                                       1e-7, 1e-300, g64)
    grown = before * (1 + 2 * g64) + 41 * 2.0**-125
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
    with _numpy_passes():  # NumPy without numba: separate passes, no one-pass forms
        assert store_rounding(v, v, v, v, FP32) is None
        assert operand_facts([v], FP32, 1 << 20) is None


@pytest.mark.gpu
@pytest.mark.parametrize("per_element", [False, True])
def test_gpu_contraction_radii_match_the_host_bitwise(cupy: Any, per_element: bool) -> None:
    shape = (33, 47)
    S = _magnitudes(shape, 1)
    n = np.random.default_rng(2).integers(1, 4096, shape) if per_element else np.asarray(512)
    g64 = gamma(n, 2.0**-53)
    coefs = (1 + 2 * g64, (n + 1) * 2.0**-125, n * 2.0**-1074, 7 * g64 + 1e-7, 3 * g64,
             (n + 2) * 2.0**-126, g64)
    host_S = S.copy()
    host = contraction_radii(host_S, *(c if per_element else float(c) for c in coefs))
    dev_S = cupy.asarray(S)
    dev = contraction_radii(dev_S, *(cupy.asarray(c) if per_element else float(c)
                                     for c in coefs))
    np.testing.assert_array_equal(cupy.asnumpy(dev_S), host_S)
    for h, d in zip(host, dev, strict=True):
        np.testing.assert_array_equal(cupy.asnumpy(d), h)


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
        with _numpy_passes():
            host = lsb_exponent(x)
        assert lsb_exponent(cupy.asarray(x)) == host
        assert lsb_exponent(cupy.asarray(x.reshape(1, -1)).T) == host  # any layout
    assert lsb_exponent(cupy.zeros(0)) == _NO_GRID


def _exact_sums(shape: tuple[int, ...], rng: np.random.Generator, family: str) -> np.ndarray:
    """Inputs whose products and sums of up to a few hundred terms are exact in
    float64 (any order of summation gives the same bits), in several regimes."""
    ints = rng.integers(-(1 << 12), 1 << 12, shape).astype(np.float64)
    if family == "small":  # many elements in fp32's exact regime
        return rng.integers(-8, 9, shape) * 2.0 ** rng.integers(-2, 3, shape)
    if family == "huge":  # past fp32's range, partly
        return ints * 2.0 ** rng.integers(56, 62, shape)
    if family == "tiny":  # subnormal in fp32
        return ints * 2.0 ** rng.integers(-150, -140, shape)
    return ints * 2.0 ** rng.integers(-4, 5, shape)  # "wide": 13-bit, off tf32's grid


_ARRAYS = ("value", "det", "prob", "ref_err", "mag")


def _snapshot(t: Tracked) -> dict[str, np.ndarray]:
    """Copies of ``t``'s arrays on the host (a store rounds radii in place)."""
    assert t.lo is None
    host = t.to_host()
    return {name: np.array(np.broadcast_to(getattr(host, name), t.shape)) for name in _ARRAYS}


def _same(host: dict[str, np.ndarray], dev: dict[str, np.ndarray], what: str) -> None:
    for name in _ARRAYS:
        np.testing.assert_array_equal(dev[name], host[name], err_msg=f"{what}: {name}")


@pytest.mark.parametrize("model_name", ["fp32", "tf32", "bf16", "fp16", "fp32-acc16",
                                        "fp32-flush"])
def test_exact_contraction_and_store_match_the_numpy_passes_bitwise(fast_xp: Any,
                                                                    model_name: str) -> None:
    """The one-pass contraction (facts, GEMMs, one pass after them) and store (apart,
    or in the contraction's pass), on the GPU and with numba's loops on the CPU,
    give the general NumPy path's bits,
    in and out of the exact regime, past the accumulator's range, with subnormals,
    biases, lengths per element, zeros and non-finite inputs (those three by the
    general path)."""
    model = (get_model("fp32", flush_subnormal_inputs=True) if model_name == "fp32-flush"
             else get_model(model_name))
    rng = np.random.default_rng(11)
    for k, family in enumerate(["small", "wide", "huge", "tiny", "small", "wide", "zero",
                                "nonfinite"] * 2):
        m, n, p = (int(v) for v in rng.integers(1, 40, 3))
        a = _exact_sums((m, n), rng, "small" if family in ("zero", "nonfinite") else family)
        w = _exact_sums((p, n), rng, family if family != "zero" else "small")
        if family == "zero":
            a[:] = 0.0
        if family == "nonfinite":
            w[0, 0] = [np.inf, np.nan][k % 2]
        bias = _exact_sums((p,), rng, "small") if k % 2 else None
        terms = rng.integers(0, n + (bias is not None) + 1, (m, p)) if k % 5 == 4 else None
        if terms is not None:
            bias = None
            terms = np.minimum(terms, n)
        results = []
        for xp in (None, fast_xp):  # None: NumPy's passes
            with _numpy_passes() if xp is None else nullcontext():
                xp = xp or np
                ta, tw = exact(xp.asarray(a)), exact(xp.asarray(w))
                tb = None if bias is None else exact(xp.asarray(bias))
                at_once = _snapshot(matmul(ta, tw.T, model, bias=tb, terms=terms, stored=True))
                out = matmul(ta, tw.T, model, bias=tb, terms=terms)
                results.append((_snapshot(out), _snapshot(store(out, model)), at_once))
        what = f"{model_name} case {k} {family} {(m, n, p)} bias={bias is not None}"
        _same(results[0][0], results[1][0], what)
        _same(results[0][1], results[1][1], what + " stored")
        _same(results[0][1], results[1][2], what + " stored in the contraction's pass")
        _same(results[0][1], results[0][2], what + " stored, NumPy's passes")


@pytest.mark.parametrize("fmt", [FP32, TF32, FP16])
def test_store_rounding_matches_the_numpy_passes_bitwise(fast_xp: Any, fmt: Any) -> None:
    """Stored radii: exact representable values (0), overflow (inf), NaN radii,
    shared radii and reference errors, as the NumPy passes give them."""
    rng = np.random.default_rng(12)
    shape = (37, 29)
    v = rng.standard_normal(shape) * 2.0 ** rng.integers(-20, 20, shape)
    v.flat[::5] = np.round(v.flat[::5])  # representable
    v.flat[1::9] = fmt.max * rng.uniform(0.5, 1.5, v.flat[1::9].shape)
    v.flat[2] = np.nan
    v.flat[3] = -np.inf
    det = _magnitudes(shape, 13) * 2.0**-40
    det.flat[::3] = 0.0
    det.flat[4] = np.nan
    ref = np.where(rng.random(shape) < 0.5, 0.0, np.abs(v) * 2.0**-60)
    for r, d in ((ref, det), (np.zeros(()), det), (ref, np.full((), 0.25))):
        model = get_model("fp64", storage=fmt, accumulate=fmt)
        with _numpy_passes():  # (radii rounded in place: copies)
            host = store(Tracked(value=v, ref_err=r, det=d.copy(), prob=d * 0.5,
                                 mag=np.abs(v)), model)
        dv, dr, dd = (fast_xp.asarray(x) for x in (v, r, d.copy()))
        dev = store(Tracked(value=dv, ref_err=dr, det=dd, prob=dd * 0.5,
                            mag=fast_xp.abs(dv)), model).to_host()
        for name in ("det", "prob"):
            np.testing.assert_array_equal(np.broadcast_to(getattr(dev, name), shape),
                                          np.broadcast_to(getattr(host, name), shape))


def test_operand_facts_match_the_numpy_definitions(fast_xp: Any) -> None:
    """Magnitudes, lowest set bits and flags of one pass, in any layout, against
    the NumPy definitions."""
    from numoracle.oracle.formats import representable
    from numoracle.oracle.tracked import _NO_GRID, lsb_exponent

    rng = np.random.default_rng(14)
    for k in range(30):
        x = rng.standard_normal((int(rng.integers(1, 40)), int(rng.integers(1, 40))))
        x *= 2.0 ** int(rng.integers(-140, 140))
        if k % 2:
            x = np.round(x * 2.0**10) / 2.0 ** int(rng.integers(0, 30))
        if k % 3 == 0:
            x.flat[0] = 5e-324 * int(rng.integers(1, 1 << 20))
        if k % 5 == 0:
            x.flat[-1] = [np.inf, -np.inf, np.nan][k % 3]
        if k % 7 == 0:
            x[:] = 0.0
        for fmt in (FP32, TF32):
            xp = fast_xp
            for arr in (xp.asarray(x), xp.asarray(x.T).T, xp.asarray(x)[:, ::2]):
                (f,) = operand_facts([arr], fmt, _NO_GRID).result()
                host = np.array(arr.get() if xp is not np else arr)
                fin = host[np.isfinite(host)]
                nz = fin[fin != 0]
                with _numpy_passes():
                    assert f.lsb == lsb_exponent(host)
                mag = f.magnitude.get() if xp is not np else f.magnitude
                np.testing.assert_array_equal(mag, np.abs(host))
                assert bool(f.flags & NOT_FINITE) == (fin.size < host.size)
                assert bool(f.flags & SUBNORMAL) == bool(np.any(np.abs(nz) < fmt.tiny))
                assert bool(f.flags & UNREPRESENTABLE) == (not representable(nz, fmt).all())
    assert operand_facts([fast_xp.zeros((0, 3))], FP32, _NO_GRID).result()[0].lsb == _NO_GRID


def test_single_operand_facts_round_magnitudes_up() -> None:
    """On the CPU with float32 magnitudes: rounded up (the nearest float32 where it
    holds ``|x|``), the same bits as NumPy's :func:`single_magnitude`, and OFF_SINGLE
    where a nonzero magnitude lies outside float32's normal range."""
    if not fused_cpu.available():
        pytest.skip("numba is not installed (pip install 'numoracle[fast]')")
    from numoracle.oracle.tracked import _NO_GRID

    rng = np.random.default_rng(15)
    for k in range(20):
        x = rng.standard_normal((int(rng.integers(1, 40)), int(rng.integers(1, 40))))
        x *= 2.0 ** int(rng.integers(-140, 140))
        if k % 2:
            x = x * 2.0**-40 if np.abs(x).max() > 2.0**120 else x
            x = x.astype(np.float32).astype(np.float64)  # held by float32 (where in range)
        if k % 3 == 0:
            x.flat[0] = 0.0
        for arr in (x, x.T, x[:, ::2]):
            (f,) = operand_facts([arr], FP32, _NO_GRID, single=True).result()
            mag = np.abs(arr)
            assert f.magnitude.dtype == np.float32
            if in_single_range(mag):
                assert np.all(f.magnitude >= mag)
                held = mag.astype(np.float32).astype(np.float64) == mag  # (in range)
                np.testing.assert_array_equal(f.magnitude[held], mag[held])
            with np.errstate(over="ignore"):
                np.testing.assert_array_equal(f.magnitude, single_magnitude(mag))
            assert bool(f.flags & OFF_SINGLE) == (not in_single_range(mag))


_SINGLE_MAGNITUDES = st.sampled_from(["held", "float64", "underflowing", "mixed"])


@settings(max_examples=60, deadline=None)
@given(k=st.integers(1, 200), family=_SINGLE_MAGNITUDES, seed=st.integers(0, 2**32 - 1),
       chunk=st.sampled_from([2048, 16]))
def test_single_magnitude_sums_grown_bound_the_exact_sum(k: int, family: str, seed: int,
                                                         chunk: int) -> None:
    """A magnitude sum in float32 (the CPU's, ``tracked._single``; in float32 GEMMs of
    ``chunk`` terms at most, summed in float64), grown, is never below the exact sum
    (in rationals), and above it by no more than its growth ``2 gamma_{c+1}(2^-24)``
    and underflow slack allow."""

    from numoracle.oracle import fused

    saved, fused.SINGLE_CHUNK = fused.SINGLE_CHUNK, chunk
    try:
        _single_sum_bounds(k, family, seed)
    finally:
        fused.SINGLE_CHUNK = saved


def _single_sum_bounds(k: int, family: str, seed: int) -> None:
    from fractions import Fraction

    from numoracle.oracle import fused

    rng = np.random.default_rng(seed)
    scale = {"held": 0, "float64": 0, "underflowing": -70, "mixed": 0}[family]
    a = np.abs(rng.standard_normal((3, k))) * 2.0 ** (scale + rng.integers(-8, 8, (3, k)))
    b = np.abs(rng.standard_normal((k, 2))) * 2.0 ** (scale + rng.integers(-8, 8, (k, 2)))
    if family == "held":
        a, b = (x.astype(np.float32).astype(np.float64) for x in (a, b))
    if family == "mixed":  # zeros, float32's extremes, products under its range
        a.flat[::5] = 0.0
        a.flat[1::7] = 2.0**-126
        b.flat[2::6] = 2.0**-20
        a.flat[3::11] = 2.0**100
    a, b = (np.clip(x, 0.0, 2.0**120) for x in (a, b))
    a[(a != 0) & (a < 2.0**-126)] = 2.0**-126
    b[(b != 0) & (b < 2.0**-126)] = 2.0**-126
    assert in_single_range(a) and in_single_range(b)
    grow, tiny_mag = fused.single_growth(k)
    S = magnitude_sum(a, b, True) * grow + tiny_mag
    for i in range(3):
        for j in range(2):
            true = sum(Fraction(float(a[i, t])) * Fraction(float(b[t, j])) for t in range(k))
            assert Fraction(float(S[i, j])) >= true
            # above: each magnitude rounded up (2 ulps), float32's rounding, the growth
            c = min(k, fused.SINGLE_CHUNK)
            up = (1 + 2.0**-21) * (1 + float(gamma(np.asarray(c), 2.0**-24))) * grow
            assert float(S[i, j]) <= float(true) * up * (1 + 2.0**-50) + 2 * tiny_mag


def test_numba_loops_switch_off_by_environment() -> None:
    """``NUMORACLE_NUMBA=0``: the NumPy passes run, numba or not, the softmax family's
    exponentials NumPy's (not the loops' own ``exp``) at a size the loops would take."""
    import subprocess
    import sys

    code = ("import numpy as np\n"
            "from numoracle.oracle import fused_cpu\n"
            "from numoracle.oracle.precision import get_model\n"
            "from numoracle.oracle.tracked import exact\n"
            "from numoracle.oracle.traced.rules import RuleContext\n"
            "from numoracle.oracle.traced.library import softmax as sm\n"
            "x = np.random.default_rng(0).standard_normal((64, 1024)) * 3\n"
            "d, e, m = sm.shifted_exp(RuleContext(get_model('fp32')), exact(x), -1)\n"
            "print(fused_cpu.available(), fused_cpu.rows_available(),"
            " np.array_equal(e.value, np.exp(d.value)))")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "NUMORACLE_NUMBA": "0"},
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False True"


def test_an_exact_inputs_operand_facts_are_kept_for_its_next_contraction(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On the CPU a weight entering two contractions (``x @ w.T``, ``g @ w``) is
    passed over once; the references are those computed without keeping anything."""
    if not fused_cpu.available():
        pytest.skip("numba is not installed (pip install 'numoracle[fast]')")
    import numoracle.oracle.tracked as tracked
    from numoracle.oracle.ops import get_op

    rng = np.random.default_rng(16)
    params = get_op("linear").validate({"batch": 16, "in_features": 256,
                                        "out_features": 160, "bias": True})
    inputs = {k: rng.standard_normal(s).astype(np.float32).astype(np.float64)
              for k, s in get_op("linear").input_shapes(params).items()}
    model = get_model("fp32")
    passes: list[int] = []
    counted = fused_cpu.operand_facts

    def counting(arrays: list[np.ndarray], *args: Any) -> np.ndarray:
        passes.extend(a.size for a in arrays)
        return counted(arrays, *args)

    monkeypatch.setattr(fused_cpu, "operand_facts", counting)
    kept = get_op("linear").reference(inputs, params, model)
    assert passes.count(256 * 160) == 1  # the weight, for y and grad_input
    monkeypatch.setattr(tracked, "_MEMO_MIN", 1 << 40)
    passes.clear()
    fresh = get_op("linear").reference(inputs, params, model)
    assert passes.count(256 * 160) == 2
    for name, t in fresh.items():
        _same(_snapshot(t), _snapshot(kept[name]), name)
    w = exact(inputs["weight"])
    moved = Tracked(value=w.value.copy(), ref_err=w.ref_err, det=w.det, prob=w.prob,
                    mag=w.mag)
    assert tracked._memo(moved, moved.value) is None  # a Tracked made otherwise keeps none


@pytest.mark.gpu
def test_on_the_gpu_a_linear_backward_waits_once_for_its_operands_facts(
        cupy: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """On CuPy a linear backward passes over x, the weight, grad_output and the bias
    once each, all before its GEMMs, and waits for their facts once (the sum over the
    batch knows its vector of ones' facts); without keeping anything it passes over
    each input once per contraction and waits in every one. The references are bitwise
    the same."""
    import numoracle.oracle.tracked as tracked
    from numoracle.oracle import fused
    from numoracle.oracle.ops import get_op

    rng = np.random.default_rng(17)
    op = get_op("linear")
    params = op.validate({"batch": 128, "in_features": 256, "out_features": 160,
                          "bias": True})
    inputs = {k: cupy.asarray(rng.standard_normal(s).astype(np.float32).astype(np.float64))
              for k, s in op.input_shapes(params).items()}
    model = get_model("fp32")
    passes: list[int] = []
    waits: list[bool] = []
    counted, result = fused.operand_facts, fused.PendingFacts.result

    def counting(arrays: list[Any], *args: Any, **kw: Any) -> Any:
        known = kw.get("known") or [None] * len(arrays)
        passes.extend(a.size for a, f in zip(arrays, known, strict=True) if f is None)
        return counted(arrays, *args, **kw)

    def waiting(self: Any) -> Any:
        waits.append(self._ready is not None)
        return result(self)

    monkeypatch.setattr(fused, "operand_facts", counting)
    monkeypatch.setattr(tracked, "operand_facts", counting)
    monkeypatch.setattr(fused.PendingFacts, "result", waiting)
    kept = {k: _snapshot(t) for k, t in op.reference(inputs, params, model).items()}
    assert sorted(passes) == sorted([128 * 256, 256 * 160, 128 * 160, 160]), passes
    assert sum(waits) == 1, waits
    monkeypatch.setattr(tracked, "_memo", lambda t, v: None)
    passes.clear()
    waits.clear()
    fresh = op.reference(inputs, params, model)
    assert passes.count(256 * 160) == 2 and passes.count(128 * 256) == 2
    assert sum(waits) == 4  # y, grad_input, grad_weight and grad_bias's sum
    for name, t in fresh.items():
        _same(_snapshot(t), kept[name], name)


@pytest.mark.parametrize("bias", [False, True])
def test_chunked_single_sums_match_the_numpy_passes(fast_xp: Any, bias: bool,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Contractions longer than a float32 GEMM's chunk (here 7 terms): numba's loops
    give NumPy's passes' bits, stored or not."""
    from numoracle.oracle import fused

    if fast_xp is not np:
        pytest.skip("the device sums S in float64")
    monkeypatch.setattr(fused, "SINGLE_CHUNK", 7)
    rng = np.random.default_rng(17)
    model = get_model("fp32")
    for family in ("small", "wide", "tiny"):
        a, w = _exact_sums((9, 30), rng, family), _exact_sums((11, 30), rng, family)
        b = _exact_sums((11,), rng, "small") if bias else None
        results = []
        for passes in (_numpy_passes(), nullcontext()):
            with passes:
                tb = None if b is None else exact(b)
                out = matmul(exact(a), exact(w).T, model, bias=tb)
                results.append((_snapshot(out), _snapshot(
                    matmul(exact(a), exact(w).T, model, bias=tb, stored=True))))
        _same(results[0][0], results[1][0], family)
        _same(results[0][1], results[1][1], family + " stored")


@pytest.mark.parametrize("layout", ["C", "F", "transposed", "strided", "long"])
def test_fused_single_sums_give_the_passes_bits(layout: str) -> None:
    """The magnitudes rounded up to float32 in one loop from the values give the
    NumPy passes' sum bit for bit, in every layout those passes keep; an operand with
    a magnitude outside float32's normal range leaves the sum to float64 (None)."""
    if not fused_cpu.available():
        pytest.skip("numba is not installed (pip install 'numoracle[fast]')")
    rng = np.random.default_rng(3)
    k = 3000 if layout == "long" else 300
    a = rng.standard_normal((3, 40, k)) * 3.0
    b = rng.standard_normal((k, 20))
    if layout == "F":
        a, b = np.asfortranarray(a), np.asfortranarray(b)
    elif layout == "transposed":
        a = np.swapaxes(rng.standard_normal((3, k, 40)), -1, -2)
    elif layout == "strided":
        a = a[:, ::2]
    want = magnitude_sum(np.abs(a), np.abs(b), True)
    got = fused_single_sum(a, b)
    assert got is not None and got.dtype == np.float64
    assert np.array_equal(got.view(np.int64), want.view(np.int64))
    a = a.copy()
    a[0, 0, 0] = 1e-40  # (a float32 subnormal)
    assert fused_single_sum(a, b) is None
    assert not in_single_range(np.abs(a))


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 5), cols=st.integers(1, 9), seed=st.integers(0, 2**32 - 1),
       broadcast=st.booleans())
def test_escalation_test_loop_matches_the_numpy_passes(rows: int, cols: int, seed: int,
                                                      broadcast: bool) -> None:
    """The one-loop test for elements the reference must escalate decides as the NumPy
    passes of ``_escalate`` (NaN and infinite radii and values included)."""
    if not fused_cpu.available():
        pytest.skip("numba is not installed (pip install 'numoracle[fast]')")
    rng = np.random.default_rng(seed)
    pick = [0.0, 1e-300, 1.0, 50.0, 1e300, np.inf, np.nan]
    v, d, p, r = (rng.choice(pick, size=(rows, cols)) * rng.choice([-1.0, 1.0], (rows, cols))
                  for _ in range(4))
    d, p, r = np.abs(d), np.abs(p), np.abs(r)
    if broadcast:
        p = p[:1]
    for share in (0.01, 1.0):
        with np.errstate(invalid="ignore", over="ignore"):
            want = bool(np.any((r > share * np.minimum(d, p)) & np.isfinite(v)))
        assert fused_cpu.any_imprecise(v, d, p, r, share) == want


def test_single_sums_loosen_the_bounds_by_at_most_2_to_the_minus_11(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU's float32 magnitude sums against float64 ones, on linear backward
    references: every radius as large or larger (never sharper than the float64
    sum's upper bound allows), and at most 2^-11 of itself larger; switched off by
    ``NUMORACLE_SINGLE_SUMS=0``."""
    import subprocess
    import sys

    import numoracle.oracle.tracked as tracked
    from numoracle.oracle.ops import get_op

    op = get_op("linear")
    rng = np.random.default_rng(18)
    worst = 0.0
    for model_name in ("fp32", "tf32", "bf16", "fp16"):
        for batch, i, o in ((3, 17, 5), (40, 300, 70), (2, 5000, 3)):
            params = op.validate({"batch": batch, "in_features": i, "out_features": o,
                                  "bias": True})
            inputs = {k: (rng.standard_normal(s) * 2.0 ** rng.integers(-20, 20, s))
                      .astype(np.float32).astype(np.float64)
                      for k, s in op.input_shapes(params).items()}
            refs = {}
            for single in (True, False):
                monkeypatch.setattr(tracked, "SINGLE_SUMS", single)
                refs[single] = op.reference(inputs, params, get_model(model_name))
            for name, t in refs[True].items():
                f = refs[False][name]
                for radius in ("det", "prob"):
                    r32, r64 = (np.broadcast_to(getattr(x, radius), x.shape) for x in (t, f))
                    judged = np.isfinite(r64) & (r64 > 0)
                    np.testing.assert_array_equal(r32 == 0, r64 == 0)
                    ratio = r32[judged] / r64[judged]
                    assert np.all(ratio >= 1.0), (model_name, name, radius)
                    worst = max(worst, float(ratio.max(initial=1.0)) - 1.0)
    assert 0.0 < worst <= 2.0**-11
    code = "from numoracle.oracle import tracked; print(tracked.SINGLE_SUMS)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "NUMORACLE_SINGLE_SUMS": "0"}, check=True)
    assert out.stdout.strip() == "False"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from([-np.inf, -2.0, -0.0, 0.0, 0.5, 1.0, 3.0, np.inf]),
                         min_size=1, max_size=9), min_size=1, max_size=4).filter(
           lambda rows: len({len(r) for r in rows}) == 1),
       st.integers(0, 2**32 - 1))
def test_larger_counts_agree_with_a_direct_count_on_every_path(rows: list[list[float]],
                                                              seed: int) -> None:
    """How many ``hi`` of a lane exceed each ``lo`` (ties not): numba's merge, the
    stable-sort fallback and torch's batched search all give the direct count."""
    lo = np.array(rows)
    reach = np.random.default_rng(seed).choice([0.0, 0.5, 2.0, np.inf], size=lo.shape)
    with np.errstate(invalid="ignore"):
        hi = np.where(np.isnan(lo + reach), -np.inf, lo + reach)
    direct = (hi[..., None, :] > lo[..., :, None]).sum(-1)
    assert np.array_equal(larger_counts(lo, hi), direct)
    with _numpy_passes():
        assert np.array_equal(larger_counts(lo, hi), direct)
    tx = namespace_named("torch")
    assert np.array_equal(to_numpy(larger_counts(as_namespace(lo, tx), as_namespace(hi, tx))),
                          direct)


def _operand(shape: tuple[int, ...], kind: str, rng: np.random.Generator) -> Tracked:
    """Float32 values in float64 at a few scales: exact, or with radii (some 0, and
    with ``wild`` infinite radii and NaN values)."""
    v = (rng.standard_normal(shape) * 2.0 ** rng.integers(-3, 3, shape)).astype(
        np.float32).astype(np.float64)
    if kind == "exact":
        return exact(v)
    d = np.abs(rng.standard_normal(shape)) * 1e-7 * (rng.random(shape) < 0.5)
    if kind == "wild":
        d = np.where(rng.random(shape) < 0.2, np.inf, d)
        v = np.where(rng.random(shape) < 0.2, np.nan, v)
    return bounded(v, d, d * 0.5 if kind == "two" else None, ref_err=d * 1e-9)


@pytest.mark.parametrize("shapes", [((5, 7), (5, 7)), ((5, 7), (5, 1)), ((3,), (2, 3)),
                                    ((), ()), ((4, 1, 3), (2, 3))])
@pytest.mark.parametrize("kind", ["exact", "one", "two", "wild"])
def test_add_and_mul_loops_match_the_numpy_passes_bitwise(fast_xp: Any, shapes: Any,
                                                           kind: str) -> None:
    """:func:`add`, :func:`sub` and :func:`~numoracle.oracle.elementwise.mul` in
    numba's one loop: the NumPy passes' bits, the exact elements (exact operands, an
    exact result the format holds) zeroed alike."""
    if fast_xp is not np:
        pytest.skip("the loop is the CPU's")
    rng = np.random.default_rng(len(kind) + len(shapes[0]))
    a, b = _operand(shapes[0], kind, rng), _operand(shapes[1], kind, rng)
    for model in (get_model("fp32"), get_model("bf16"), get_model("fp64")):
        for f in (add, sub, ew_mul):
            loop = f(a, b, model)
            with _numpy_passes():
                passes = f(a, b, model)
            for name in ("value", "ref_err", "det", "prob", "mag"):
                got, want = getattr(loop, name), getattr(passes, name)
                assert np.array_equal(np.broadcast_to(got, loop.shape),
                                      np.broadcast_to(want, passes.shape), equal_nan=True), name
            if kind == "exact" and model.accumulate.t >= 52:  # float32 values' sums and
                assert bool((loop.det == 0).any())  # products: some exact in float64


@pytest.mark.parametrize("shapes", [((4, 5), (4, 5)), ((4, 5), (4, 1)), ((3,), (2, 3))])
@pytest.mark.parametrize("seed", range(4))
def test_either_and_special_point_loops_match_the_numpy_passes(fast_xp: Any, shapes: Any,
                                                               seed: int) -> None:
    """:func:`either` in numba's loop gives the NumPy passes' radii (NaN where the two
    disagree about NaN or an infinity), and the one-pass test for special points
    agrees with their mask, on values and radii full of zeros, infinities and NaN."""
    if fast_xp is not np:
        pytest.skip("the loops are the CPU's")
    rng = np.random.default_rng(seed)

    def draw(shape: tuple[int, ...]) -> Tracked:
        v = rng.choice([0.0, -0.0, 1.0, 2.5, np.inf, -np.inf, np.nan, 1e-300], size=shape)
        d = rng.choice([0.0, 1e-7, np.inf, np.nan], size=shape)
        return bounded(v, d, d * rng.choice([1.0, 0.5], size=shape),
                       ref_err=rng.choice([0.0, 1e-20], size=shape))
    for _ in range(10):
        a, b = draw(shapes[0]), draw(shapes[1])
        loop = either(a, b)
        with _numpy_passes():
            passes = either(a, b)
        for name in ("det", "prob", "mag"):
            assert np.array_equal(*np.broadcast_arrays(getattr(loop, name),
                                                       getattr(passes, name)), equal_nan=True)
        for t in (a, b):
            assert fused_cpu.any_special(t.value, t.det, t.ref_err) == bool(
                special_points(t).any())


@pytest.mark.parametrize("kind", ["exact", "one", "two", "wild"])
@pytest.mark.parametrize("shape", [(5, 7), (3,), ()])
def test_scalar_product_loop_matches_the_numpy_passes_bitwise(fast_xp: Any, kind: str,
                                                              shape: tuple[int, ...]) -> None:
    """:func:`~numoracle.oracle.tracked.mul_scalar` in numba's one loop: the NumPy
    passes' bits (products, quotients, rounded factors, the exact elements zeroed
    alike)."""
    if fast_xp is not np:
        pytest.skip("the loop is the CPU's")
    rng = np.random.default_rng(len(kind) + len(shape))
    t = _operand(shape, kind, rng)
    for model in (get_model("fp32"), get_model("bf16"), get_model("fp64")):
        for c, divide, rel in ((0.5, False, 0.0), (3.0, True, 0.0), (0.7071067811865476,
                                                                     False, 2.0**-24)):
            loop = mul_scalar(t, c, model, divide=divide, c_rel_err=rel)
            with _numpy_passes():
                passes = mul_scalar(t, c, model, divide=divide, c_rel_err=rel)
            for name in ("value", "ref_err", "det", "prob", "mag"):
                assert np.array_equal(np.broadcast_to(getattr(loop, name), loop.shape),
                                      np.broadcast_to(getattr(passes, name), passes.shape),
                                      equal_nan=True), (str(model), c, name)


@pytest.mark.parametrize("kinds", [("one", "exact"), ("exact", "two"), ("two", "one"),
                                   ("wild", "exact"), ("exact", "wild")])
@pytest.mark.parametrize("bias", [None, "exact", "radius"])
def test_contraction_with_radii_loop_matches_the_numpy_passes_bitwise(
        fast_xp: Any, kinds: tuple[str, str], bias: str | None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A contraction whose operands carry radii: ``S + prop`` grown and the radii with
    the propagated products in numba's one loop (``fused_cpu.propagated_radii``) give
    the NumPy passes' bits (values overflowing the accumulator, infinite radii and NaN
    values included)."""
    if fast_xp is not np:
        pytest.skip("the loop is the CPU's")
    ran: list[int] = []
    real = fused_cpu.propagated_radii
    monkeypatch.setattr(fused_cpu, "propagated_radii", lambda *a: ran.append(1) or real(*a))
    rng = np.random.default_rng(len(kinds[0]) + 3 * len(kinds[1]))
    for model in (get_model("fp32"), get_model("bf16"), get_model("fp64")):
        a, w = _operand((6, 9), kinds[0], rng), _operand((9, 5), kinds[1], rng)
        a = replace(a, value=np.where(rng.random((6, 9)) < 0.1, 3e38, a.value))
        tb = None if bias is None else (exact(rng.standard_normal(5)) if bias == "exact"
                                        else _operand((5,), "one", rng))
        for stored in (False, True):
            loop = matmul(a, w, model, bias=tb, stored=stored)
            with _numpy_passes():
                passes = matmul(a, w, model, bias=tb, stored=stored)
            for name in ("value", "ref_err", "det", "prob", "mag"):
                assert np.array_equal(np.broadcast_to(getattr(loop, name), loop.shape),
                                      np.broadcast_to(getattr(passes, name), passes.shape),
                                      equal_nan=True), (str(model), stored, name)
    assert ran or bias == "radius"  # (a bias with radii takes the passes)


@pytest.mark.parametrize("shapes", [((6, 7), (6, 7)), ((4, 5), (4, 1)), ((3,), (2, 3))])
@pytest.mark.parametrize("seed", range(3))
def test_carried_special_values_match_the_vectorised_passes(fast_xp: Any, shapes: Any,
                                                            seed: int) -> None:
    """ieee's add, sub, mul and div carry the special values the operands decide
    (exact zeros, infinities, NaN) in numba's one loop: the same elements, values
    and radii as the vectorised passes over their masks."""
    if fast_xp is not np:
        pytest.skip("the loop is the CPU's")
    rng = np.random.default_rng(seed)
    model = get_model("fp32")
    decided = 0
    for _ in range(20):
        a, b = (bounded(rng.choice([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 1e-300],
                                   size=s),
                        rng.choice([0.0, 0.0, 1e-7, np.inf, np.nan, 3.0], size=s),
                        ref_err=rng.choice([0.0, 1e-20], size=s)) for s in shapes)
        for f in (ieee.add, ieee.sub, ieee.mul, ieee.div):
            loop = f(a, b, model)
            with _numpy_passes():
                passes = f(a, b, model)
            for name in ("value", "det", "prob", "ref_err", "mag"):
                assert np.array_equal(*np.broadcast_arrays(getattr(loop, name),
                                                           getattr(passes, name)),
                                      equal_nan=True), (f.__name__, name)
            decided += int(np.count_nonzero(loop.det == 0))
    assert decided > 0  # some elements were decided exactly


@pytest.mark.parametrize("kind", ["exact", "one", "two", "wild"])
@pytest.mark.parametrize("shape", [(5, 7), (3,), ()])
def test_elementary_loop_matches_the_numpy_passes_bitwise(fast_xp: Any, kind: str,
                                                          shape: tuple[int, ...]) -> None:
    """Elementary functions' radii in numba's one loop (exp, log, sqrt, the sigmoid
    with its overflowing edge, an error growing with ``|x|``): the NumPy passes' bits."""
    if fast_xp is not np:
        pytest.skip("the loop is the CPU's")
    rng = np.random.default_rng(len(kind) * 7 + len(shape))
    t = _operand(shape, kind, rng)
    model = get_model("fp32")
    calls = [lambda x: ew.exp(x, model), lambda x: ew.log(x, model),
             lambda x: ew.sqrt(x, model), lambda x: ew.sigmoid(x, model),
             lambda x: ew.elementary(x, model, f=np.exp, lipschitz=lambda lo, hi: np.exp(hi),
                                     ulps=Ulps(2.0, per_x=1.5, of_one=1.0))]
    for call in calls:
        loop = call(t)
        with _numpy_passes():
            passes = call(t)
        for name in ("value", "ref_err", "det", "prob", "mag"):
            assert np.array_equal(*np.broadcast_arrays(getattr(loop, name),
                                                       getattr(passes, name)),
                                  equal_nan=True), name


@pytest.mark.gpu
def test_gpu_radius_product_and_special_mask_match_the_numpy_passes(cupy: Any) -> None:
    """The two one-kernel forms give the bits of the passes they replace: ``0 * inf = 0``
    of radius products (a NaN kept), and the special values ieee decides exactly."""
    from numoracle.oracle.elementwise import _rmul
    from numoracle.oracle.fused import radius_product, special_mask
    from numoracle.oracle.traced.library.ieee import special_points
    from numoracle.oracle.tracked import bounded

    edge = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 2.0**-1074, 1.5, -3.0, 2.0**1000])
    a, b = (x.ravel() for x in np.meshgrid(edge, np.abs(edge)))
    host = _rmul(np.abs(a), b)
    np.testing.assert_array_equal(cupy.asnumpy(radius_product(cupy.asarray(np.abs(a)),
                                                              cupy.asarray(b))), host)
    col = cupy.asarray(np.abs(edge)[:, None])  # broadcast, and a number beside an array
    np.testing.assert_array_equal(cupy.asnumpy(radius_product(col, 0.0)),
                                  _rmul(np.abs(edge)[:, None], 0.0))
    assert radius_product(np.abs(a), b) is None  # the host keeps its passes
    for det in (np.zeros_like(a), np.abs(b), np.where(np.isnan(b), np.nan, 0.0)):
        t = bounded(a, det, ref_err=np.where(a == 1.5, 2.0**-60, 0.0))
        dev = bounded(cupy.asarray(a), cupy.asarray(det),
                      ref_err=cupy.asarray(np.where(a == 1.5, 2.0**-60, 0.0)))
        got = special_mask(dev.value, dev.det, dev.ref_err)
        assert got.dtype == cupy.bool_
        np.testing.assert_array_equal(cupy.asnumpy(got), special_points(t))


@pytest.mark.skipif(not fused_cpu.available(), reason="the loops need numba")
def test_loops_representable_is_the_formats_test() -> None:
    """The loops' scalar test of a value's representability (from its bits) answers as
    NumPy's :func:`~numoracle.oracle.formats.representable` for every format, over
    the whole float64 range: subnormals, powers of two, both ends of each format."""
    import numba  # noqa: PLC0415 - the loops' own dependency

    from numoracle.oracle import _numba_loops  # noqa: PLC0415 - imported where numba is
    from numoracle.oracle.formats import FORMATS, representable  # noqa: PLC0415

    @numba.njit
    def each(xs: Any, t: int, emin: int, fmax: float) -> Any:
        out = np.empty(xs.size, dtype=np.bool_)
        for i in range(xs.size):
            out[i] = _numba_loops._representable(xs[i], t, emin, fmax)
        return out

    rng = np.random.default_rng(11)
    xs = np.concatenate([rng.standard_normal(20000) * 10.0 ** rng.integers(-320, 308, 20000),
                         rng.standard_normal(5000).astype(np.float32),
                         rng.standard_normal(5000).astype(np.float16),
                         np.ldexp(1.0, np.arange(-1074, 1024)),
                         [0.0, -0.0, np.inf, -np.inf, np.nan]])
    with np.errstate(over="ignore"):
        xs = np.concatenate([xs, -xs, xs * (1 + 2.0**-52), xs * (1 + 2.0**-10),
                             np.nextafter(xs, np.inf)])
    for fmt in FORMATS.values():
        want = representable(xs, fmt)
        got = each(xs, int(fmt.t), int(fmt.emin), float(fmt.max))
        assert np.array_equal(got, want), (fmt.name, xs[got != want][:5])


_CUDA_SHIM = r"""
#include <cmath>
#include <cstring>
#include <algorithm>
using std::max;
static long long __double_as_longlong(double d) { long long b; memcpy(&b, &d, 8); return b; }
static double __longlong_as_double(long long b) { double d; memcpy(&d, &b, 8); return d; }
static int __ffsll(long long x) { return __builtin_ffsll(x); }
struct Dim { long long x, y; };
static Dim blockIdx = {0, 0}, threadIdx = {0, 0}, blockDim = {1, 1}, gridDim = {1, 1};
#define __device__ static
#define __global__
#define __shared__ static
static int __shfl_down_sync(unsigned int, int v, int) { return v; }
static void __syncthreads() {}
static int atomicMax(int* a, int v) { int old = *a; if (v > old) *a = v; return old; }
static int atomicOr(int* a, int v) { int old = *a; *a |= v; return old; }
extern "C" void numoracle_set_block(long long y) { blockIdx.y = y; }
"""


@pytest.mark.parametrize("stored", [False, True])
def test_the_raw_exact_kernels_give_the_loops_bits(stored: bool, tmp_path: Any) -> None:
    """The raw kernels of the exact contraction's pass (their C text, every variant:
    bias or none, float32 or float64 ``S``, rounded to float32 or bfloat16 or not),
    compiled with g++ on the host (one thread walking every element): the value, ``S``
    and every radius bit for bit the NumPy loop's
    (:func:`~numoracle.oracle.fused_cpu.exact_radii`, whose bits the elementwise kernels
    give), through the exact regime, overflow and the bias along the last axis."""
    import ctypes
    import shutil
    import subprocess

    from numoracle.oracle import fused
    from numoracle.oracle.formats import BF16

    if shutil.which("g++") is None or not fused_cpu.available():
        pytest.skip("no g++ or numba on this machine")
    names = [f"exact_raw{b}{'_stored' if stored else ''}{s}"
             for b in ("", "_bias") for s in ("", "_single")]
    src = _CUDA_SHIM + "".join(fused.exact_raw_source(n).replace(fused._STORE, "")
                               for n in names)
    (tmp_path / "raw.cpp").write_text(_CUDA_SHIM + fused._STORE + src[len(_CUDA_SHIM):])
    subprocess.run(["g++", "-O1", "-ffp-contract=off", "-shared", "-fPIC", "-o",
                    str(tmp_path / "raw.so"), str(tmp_path / "raw.cpp")],
                   check=True, capture_output=True)
    lib = ctypes.CDLL(str(tmp_path / "raw.so"))
    rng = np.random.default_rng(8)
    shape = (9, 41)
    S64 = np.abs(rng.standard_normal(shape)) * 2.0 ** rng.integers(-30, 30, shape)
    S64.flat[::5] = 2.0 ** rng.integers(-20, 20, S64.flat[::5].shape)
    S64.flat[1::11] = 1e300
    value = rng.standard_normal(shape) * S64
    value.flat[2::9] = 2.0 ** rng.integers(-20, 20, value.flat[2::9].shape)
    value.flat[3::13] = 3e38
    bias = rng.standard_normal(shape[1]) * 2.0 ** rng.integers(-5, 5, shape[1])
    bias[::3] = 0.0  # (columns left in the exact regime)
    with np.errstate(over="ignore"):
        S32 = S64.astype(np.float32)  # (an infinite TF32 sum where float32 overflows)
    scalars = (1.0 + 2.0**-40, 2.0**-140, 41 * 2.0**-1074, 2.0**-20, 2.0**-23, 2.0**-120,
               2.0**-48, 2.0**12, 2.0**30, 1e200)
    dbl = ctypes.c_double
    for fmt in ((FP32, BF16) if stored else (None,)):
        for name in names:
            single, with_bias = name.endswith("_single"), "_bias" in name
            S_in = S32.copy() if single else S64.copy()
            v_raw, v_loop = value.copy(), value.copy()
            out = [np.empty(shape) for _ in range(4)]
            rounding = fused_cpu.rounding_params(fmt) if fmt is not None else (0.0,) * 4 + (0, 0)
            getattr(lib, f"numoracle_{name}")(
                ctypes.c_void_p(S_in.ctypes.data), ctypes.c_void_p(v_raw.ctypes.data),
                ctypes.c_void_p((bias if with_bias else v_raw).ctypes.data),
                ctypes.c_longlong(shape[1]), ctypes.c_longlong(value.size),
                *(ctypes.c_void_p(a.ctypes.data) for a in out),
                *(dbl(c) for c in scalars), *(dbl(c) for c in rounding[:4]),
                *(ctypes.c_int(int(c)) for c in rounding[4:]))
            want = fused_cpu.exact_radii(v_loop, S32.copy() if single else S64.copy(),
                                         bias if with_bias else None, scalars, fmt)
            np.testing.assert_array_equal(v_raw, v_loop)
            for got, w, what in zip(out, want, ("S", "det", "prob", "ref"), strict=True):
                np.testing.assert_array_equal(got, w, err_msg=f"{name} {fmt} {what}")
            assert np.isinf(out[1]).any() and (out[1] == 0).any(), name


def test_the_facts_pass_over_several_operands_is_the_pass_over_each(tmp_path: Any) -> None:
    """The operand-facts pass over up to four operands in one launch (the grid's second
    axis picks the operand; its C text compiled with g++ on the host, one thread a
    block): each operand's magnitudes and row of facts are those of the pass over it
    alone (float64 and TF32 magnitudes), and the float64 rows are the NumPy loop's
    (lowest set bit, NOT_FINITE, SUBNORMAL, UNREPRESENTABLE as to float32)."""
    import ctypes
    import shutil
    import subprocess

    from numoracle.oracle import fused

    if shutil.which("g++") is None or not fused_cpu.available():
        pytest.skip("no g++ or numba on this machine")
    src = (_CUDA_SHIM + fused._REPRESENTABLE + fused._FACTS_64 + fused._FACTS_TF32
           + fused._FACTS_64_MANY + fused._FACTS_TF32_MANY)
    (tmp_path / "facts.cpp").write_text(src)
    subprocess.run(["g++", "-O1", "-ffp-contract=off", "-shared", "-fPIC", "-o",
                    str(tmp_path / "facts.so"), str(tmp_path / "facts.cpp")],
                   check=True, capture_output=True)
    lib = ctypes.CDLL(str(tmp_path / "facts.so"))
    rng = np.random.default_rng(12)
    ops = [rng.standard_normal(37) * 2.0 ** rng.integers(-140, 140, 37),
           np.array([1.5, 0.0, np.inf, 2.0**-1070, -3.0]),
           np.zeros(0),
           (rng.integers(-99, 99, 50) * 2.0**-7).astype(np.float64)]
    none, i32, i64, dbl = 1 << 20, ctypes.c_int, ctypes.c_longlong, ctypes.c_double
    p = lambda a: ctypes.c_void_p(a.ctypes.data)  # noqa: E731
    fmt_args = (i32(FP32.t), i32(FP32.emin), dbl(FP32.max), dbl(FP32.tiny), i32(none))
    for tf32, mag in ((False, np.float64), (True, np.float32)):
        tail = "_tf32" if tf32 else ""
        alone, rows_alone = [], np.zeros((len(ops), 2), dtype=np.int32)
        for r, x in enumerate(ops):
            ax = np.zeros(x.shape, dtype=mag)
            lib.numoracle_set_block(i64(0))
            getattr(lib, f"numoracle_operand_facts{tail}")(
                p(x), p(ax), i64(x.size), *fmt_args, p(rows_alone[r:]))
            alone.append(ax)
        for group in (ops[:1], ops[:3], ops):
            found = np.zeros((len(group), 2), dtype=np.int32)
            mags = [np.zeros(x.shape, dtype=mag) for x in group]
            slots = list(range(len(group))) + [0] * (4 - len(group))
            for k in range(len(group)):
                lib.numoracle_set_block(i64(k))
                getattr(lib, f"numoracle_operand_facts{tail}_many")(
                    *(p(group[j]) for j in slots), *(p(mags[j]) for j in slots),
                    *(i64(group[j].size) for j in slots), *fmt_args, p(found))
            np.testing.assert_array_equal(found, rows_alone[:len(group)])
            for got, want in zip(mags, alone, strict=False):
                np.testing.assert_array_equal(got, want)
        if not tf32:
            loop = fused_cpu.operand_facts(ops, [np.empty(x.shape) for x in ops], FP32, none,
                                           True)
            np.testing.assert_array_equal(rows_alone, loop)
        assert rows_alone[1, 1] & fused.NOT_FINITE and rows_alone[1, 1] & fused.SUBNORMAL


@pytest.mark.gpu
@pytest.mark.parametrize("model_name", ["fp32", "bf16", "tf32"])
def test_on_the_gpu_the_exact_pass_is_one_raw_kernel_with_the_elementwise_bits(
        cupy: Any, model_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On CuPy the raw kernel of the exact contraction's pass and the facts pass over
    several operands in one launch pass their probes, and a linear backward's references (bias along the last axis, rounded to the storage
    format in the pass, TF32 sums and float64 ones) are bit for bit those of the
    elementwise kernels."""
    from numoracle.oracle import fused, tracked
    from numoracle.oracle.ops import get_op

    device = int(cupy.cuda.runtime.getDevice())
    assert fused._many_facts_probe(device, True) and fused._many_facts_probe(device, False)
    for bias in (False, True):
        for stored in (False, True):
            for single in (False, True):
                assert fused._raw_probe(device, fused._raw_name(bias, stored, single))
    rng = np.random.default_rng(23)
    op = get_op("linear")
    params = op.validate({"batch": 96, "in_features": 200, "out_features": 70, "bias": True})
    inputs = {k: cupy.asarray((rng.standard_normal(s) * 2.0 ** rng.integers(-9, 9, s))
                              .astype(np.float32).astype(np.float64))
              for k, s in op.input_shapes(params).items()}
    model = get_model(model_name)
    for single in (True, False):
        monkeypatch.setattr(tracked, "SINGLE_SUMS", single)
        launched: list[bool] = []
        real = fused._device_exact_radii

        def spy(*args: Any, **kwargs: Any) -> Any:
            launched.append(args[-1])
            return real(*args, **kwargs)

        monkeypatch.setattr(fused, "_device_exact_radii", spy)
        raw = {k: _snapshot(t) for k, t in op.reference(inputs, params, model).items()}
        assert launched and all(launched), launched
        monkeypatch.setattr(fused, "_raw_takes", lambda *a: False)
        plain = {k: _snapshot(t) for k, t in op.reference(inputs, params, model).items()}
        monkeypatch.undo()
        for name, snap in raw.items():
            _same(plain[name], snap, f"{model_name} {name} single={single}")
