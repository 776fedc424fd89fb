"""The softmax family's device kernels (``numoracle/oracle/_rows_cuda.py``, run by
``fused_cuda``) against the primitives' passes and numba's whole-rule loops.

On the host the kernels' C text is compiled by g++ (``rows_harness``: each thread
index a loop, no contraction, the C library's ``exp`` and ``expm1`` as NumPy's) and the
rules run through ``fused_cuda`` on NumPy arrays: the primitives' bits, and within the
oracle's own error of numba's loops (whose ``exp`` and ``expm1`` are their own,
``_numba_exp``), on drawn shapes, values, radii, masked rows, NaN and infinities, empty
and one-entry rows; each kernel that computes no exponential alone on special values
too, bit for bit with numba's. On a GPU (``gpu``-marked) the same kernels compiled by
CuPy: bit for bit where the kernel computes no exponential, and each rule within the
oracle's own error of the NumPy path (the device's ``exp`` and ``expm1`` are not the
host's).
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import rows_harness
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_softmax_rows import (
    MODELS,
    _special_rows,
    _tracked,
    _passes,
    _values,
    assert_same_bits,
    assert_within,
    gradient,
)

from numoracle.oracle import fused, fused_cpu, fused_cuda
from numoracle.oracle import _rows_cuda as src
from numoracle.oracle.precision import get_model
from numoracle.oracle.traced.library import _softmax_rows as rows
from numoracle.oracle.traced.library import softmax as sm
from numoracle.oracle.traced.rules import RuleContext
from numoracle.oracle.tracked import Tracked, bounded, exact

host_kernels = pytest.mark.skipif(
    shutil.which("g++") is None or not fused_cpu.rows_available(),
    reason="the host's build of the device kernels needs g++, the loops they are compared "
           "with numba")

RULES = {"softmax": lambda c, v: sm.softmax(c, v, -1),
         "safe_softmax": lambda c, v: sm.softmax(c, v, -1, masked_rows="zero"),
         "log_softmax": lambda c, v: sm.log_softmax(c, v, -1)}
KERNELS = ("softmax_rows", "log_softmax_rows", "log_softmax_backward_rows")


class _Runs:
    """Counts of the row functions called, per module."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        for mod in (fused_cpu, fused_cuda):
            for name in KERNELS:
                real = getattr(mod, name)
                monkeypatch.setattr(mod, name, self._wrap(mod.__name__, real))

    def _wrap(self, mod: str, real: Any) -> Any:
        def run(*a: Any) -> Any:
            self.calls.append(mod.rsplit(".", 1)[-1])
            return real(*a)
        return run

    def take(self) -> list[str]:
        out, self.calls[:] = list(self.calls), []
        return out


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> _Runs:
    """The loops from one element, and the calls of their last functions counted."""
    monkeypatch.setattr(fused_cpu, "LOOP_MIN", 1)
    return _Runs(monkeypatch)


@contextlib.contextmanager
def _device_kernels() -> Iterator[None]:
    """The rules through ``fused_cuda`` on NumPy arrays, its kernels built on the host."""
    loops, build = rows._loops, fused_cuda.build
    rows._loops = lambda xp: fused_cuda
    fused_cuda.build = rows_harness.build
    try:
        yield
    finally:
        rows._loops, fused_cuda.build = loops, build


def _assert_as_passes(got: Any, want: Any) -> None:
    """The kernels on the host against the passes: bit for bit where the C library's
    ``exp`` and ``expm1`` are NumPy's here (:func:`rows_harness.exp_as_numpy`), else
    within the oracle's own error."""
    if rows_harness.exp_as_numpy():
        assert_same_bits(got, want)
    else:
        assert_within(got, want)


def _compare(runs: _Runs, fn: Any, *args: Any) -> None:
    """The device kernels (on the host) give the primitives' bits (where the C library's
    ``exp`` is NumPy's), are within the oracle's own error of numba's loops, and run
    where they run."""
    runs.take()
    by_loops = fn(*args)
    by_numba = runs.take()
    with _device_kernels():
        got = fn(*args)
    by_kernels = runs.take()
    _assert_as_passes(got, _passes(fn, *args))
    assert_within(by_loops, got)
    assert by_kernels == ["fused_cuda"] * len(by_numba), (by_kernels, by_numba)


@host_kernels
@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # (the same patch each time)
@given(n_rows=st.integers(1, 6), cols=st.integers(1, 70), lead=st.booleans(),
       kind=st.sampled_from(["normal", "huge", "tiny", "wide", "ints", "zero_max"]),
       radii=st.sampled_from(["exact", "all", "some"]), special=st.booleans(),
       model=st.sampled_from(MODELS), per_op=st.booleans(), seed=st.integers(0, 2**32 - 1),
       rule=st.sampled_from(sorted(RULES)))
def test_device_kernels_give_the_loops_bits(runs: _Runs, n_rows: int, cols: int, lead: bool,
                                            kind: str, radii: str, special: bool, model: str,
                                            per_op: bool, seed: int, rule: str) -> None:
    rng = np.random.default_rng(seed)
    shape = (2, n_rows, cols) if lead else (n_rows, cols)
    x = _values(rng, shape, kind)
    if special:
        x = _special_rows(x, rng).reshape(shape)
    ctx = RuleContext(get_model(model, rounding="per-op") if per_op else get_model(model))
    with np.errstate(all="ignore"):
        _compare(runs, RULES[rule], ctx, _tracked(x, rng, radii))


@host_kernels
@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # (the same patch each time)
@given(n_rows=st.integers(1, 6), cols=st.integers(1, 70),
       grad=st.sampled_from(["one_hot", "dense", "mixed", "zero_row", "special"]),
       kind=st.sampled_from(["normal", "wide", "ints"]), model=st.sampled_from(MODELS),
       seed=st.integers(0, 2**32 - 1))
def test_device_backward_kernel_gives_the_loops_bits(runs: _Runs, n_rows: int, cols: int,
                                                     grad: str, kind: str, model: str,
                                                     seed: int) -> None:
    rng = np.random.default_rng(seed)
    ctx = RuleContext(get_model(model))
    x = _values(rng, (n_rows, cols), kind)
    with np.errstate(all="ignore"):
        y = sm.log_softmax(ctx, _tracked(x, rng, "all"), -1)
    gt = gradient(rng, n_rows, cols, grad)
    runs.take()
    with np.errstate(all="ignore"):
        _compare(runs, sm.log_softmax_backward_rule, ctx, gt, y, -1)


@host_kernels
@pytest.mark.parametrize("masked_rows", ["nan", "zero"])
def test_causal_masks_on_the_device_kernels(runs: _Runs, masked_rows: str) -> None:
    """Masked entries (exact -inf) and one fully masked row: ieee's exact zeros in the
    kernels as in the loops."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 40, 40)).astype(np.float32).astype(np.float64)
    x[..., np.triu(np.ones((40, 40), dtype=bool), 1)] = -np.inf
    ctx = RuleContext(get_model("bf16"))
    for t in (exact(x), _tracked(x, rng, "all")):
        _compare(runs, lambda c, v: sm.softmax(c, v, -1, masked_rows), ctx, t)
    x[0, 3] = -np.inf
    _compare(runs, lambda c, v: sm.softmax(c, v, -1, masked_rows), ctx, exact(x))


@host_kernels
@pytest.mark.parametrize("shape", [(1, 1), (7, 1), (1, 300), (3, 0), (0, 4)])
def test_one_entry_and_empty_rows(runs: _Runs, shape: tuple[int, int]) -> None:
    x = np.linspace(-2.0, 3.0, int(np.prod(shape))).reshape(shape)
    ctx = RuleContext(get_model("fp32"))
    for name in ("softmax", "log_softmax"):
        try:
            RULES[name](ctx, exact(x))
        except ValueError:  # an empty lane has no maximum: both refuse it alike
            with _device_kernels(), pytest.raises(ValueError):
                RULES[name](ctx, exact(x))
            continue
        _compare(runs, RULES[name], ctx, exact(x))


def _specials(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Values with NaN, infinities, zeros of both signs, subnormals and huge ones."""
    x = rng.standard_normal(shape)
    pick = rng.random(shape)
    for lo, val in ((0.05, np.nan), (0.1, np.inf), (0.15, -np.inf), (0.2, 0.0), (0.25, -0.0),
                    (0.3, 1e-310), (0.35, 1e300)):
        x = np.where((pick >= lo - 0.05) & (pick < lo), val, x)
    return x


def _radius(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    r = np.abs(rng.standard_normal(shape)) * 1e-6
    return np.where(rng.random(shape) < 0.3, 0.0, np.where(rng.random(shape) < 0.05, np.inf, r))


def _inputs(seed: int) -> dict[str, Any]:
    """Values with NaN, infinities, signed zeros, subnormals and infinite radii, where no
    rule would send the kernels, and per-row quantities (rows of finite, nonzero sums:
    numba's division raises on a zero divisor; in two rows a radius wider than the
    value, a pole inside)."""
    rng = np.random.default_rng(seed)
    shape = (5, 33)
    per_row = np.abs(rng.standard_normal((5, 4))) * [1.0, 1e-9, 1e-9, 1e-12] + [1, 0, 0, 0]
    per_row[:2, 1:] = 5.0
    x = _specials(rng, shape)
    return {"x": x, "d": _radius(rng, shape), "p": _radius(rng, shape), "r": _radius(rng, shape),
            "per_row": per_row,
            "mx": np.concatenate([rng.standard_normal((5, 1)),
                                  np.abs(rng.standard_normal((5, 3))) * 1e-7,
                                  np.zeros((5, 3))], axis=1),
            "lsm": [rng.standard_normal((5, 4)) * [1, 1e-8, 1e-8, 1e-12] for _ in range(3)],
            "ok": rng.random(5) < 0.5, "g": np.where(rng.random(shape) < 0.8, 0.0, x)}


_PARAMS = (2.0**-24, 2.0**-126, 2.0**-53, 3.4e38, 2.0**-24, 2.0**-150, 1 + 2.0**-24,
           1 + 2.0**-52)
_LPARAMS = (2.0**-24, 2.0**-126, 2.0**-53, 3.4e38, 1 + 2.0**-52)


def _loop_outputs(seed: int) -> dict[str, np.ndarray]:
    """What numba's loops give on :func:`_inputs`."""
    from numoracle.oracle import _numba_rows as nb  # noqa: PLC0415 - numba is optional

    a = _inputs(seed)
    x, d, p, r = a["x"], a["d"], a["p"], a["r"]
    out: dict[str, Any] = {"row_max": np.empty((5, 6))}
    out["fine"] = np.asarray(nb.row_max(x, d, p, r, out["row_max"]))
    with np.errstate(all="ignore"):
        for carry in (False, True):
            five = [np.empty(x.shape) for _ in range(5)]
            nb.softmax_rows(x, d, p, r, a["per_row"], a["per_row"] * 0.5, carry,
                            np.asarray(_PARAMS), *five)
            out[f"softmax{carry}"] = np.stack(five)
        for flags in (False, True):
            five = [np.empty(x.shape) for _ in range(5)]
            nb.log_softmax_rows(x, d, p, r, a["mx"], *a["lsm"], a["ok"], np.asarray([flags] * 4),
                                np.asarray(_LPARAMS), np.asarray([24, -126]), *five)
            out[f"log_softmax{flags}"] = np.stack(five)
    g = a["g"].copy()
    g[0] = 0.0
    out["hot"] = np.stack(fused_cpu.hot_rows(g, d))
    return out


def _kernel_outputs(seed: int, build: Any, dev: Any, host: Any) -> dict[str, np.ndarray]:
    """What the kernels built by ``build`` give on :func:`_inputs` (given ``dev``'s
    arrays, read back by ``host``)."""
    a = _inputs(seed)
    x, d, p, r = (dev(a[k]) for k in "xdpr")
    shape = a["x"].shape
    one, cols = np.int64(1), np.int64(shape[1])
    got = dev(np.empty((5, src.ROW_MAX_COLUMNS)))
    build(src.ROW_MAX)((5,), (src.BLOCK,), (x, d, cols, one, p, cols, one, r, cols, one,
                                            cols, got))
    out = {"row_max": host(got)[:, :6].copy(), "fine": np.asarray(not host(got)[:, 6].any())}
    per_row = a["per_row"].ravel()
    for carry in (False, True):
        five = [dev(np.empty(shape)) for _ in range(5)]
        build(src.SOFTMAX)(x, d, p, r, dev(per_row), dev(per_row * 0.5),
                           *(np.float64(q) for q in _PARAMS), np.bool_(carry), cols, *five)
        out[f"softmax{carry}"] = np.stack([host(f) for f in five])
    for flags in (False, True):
        five = [dev(np.empty(shape)) for _ in range(5)]
        build(src.LOG_SOFTMAX)(x, d, p, r, *(dev(q.ravel()) for q in (a["mx"], *a["lsm"])),
                               dev(a["ok"]), *(np.float64(q) for q in _LPARAMS), np.int32(24),
                               np.int32(-126), *(np.bool_(flags) for _ in range(4)), cols,
                               *five)
        out[f"log_softmax{flags}"] = np.stack([host(f) for f in five])
    g = a["g"].copy()
    g[0] = 0.0
    count, first = (dev(np.empty(5, dtype=np.int64)) for _ in range(2))
    build(src.HOT_ROWS)((5,), (src.BLOCK,), (dev(g), d, cols, one, cols, count, first))
    out["hot"] = np.stack([host(count), host(first)])
    return out


def _same_bits(got: dict[str, np.ndarray], want: dict[str, np.ndarray],
               signed_zeros: bool = True) -> None:
    """The same outputs bit for bit (``signed_zeros=False``: the rows' maxima as numbers,
    a signed zero being the larger of two by the order of the device's threads)."""
    assert got.keys() == want.keys()
    for k, w in want.items():
        g = got[k]
        if k == "row_max" and not signed_zeros:
            assert np.array_equal(g, w, equal_nan=True), k
        elif w.dtype == np.float64:  # (a NaN's sign and payload are the processor's)
            nan = np.isnan(g) & np.isnan(w)
            assert np.array_equal(np.where(nan, 0, g.view(np.int64)),
                                  np.where(nan, 0, w.view(np.int64))), k
        else:
            assert np.array_equal(g, w), k


@host_kernels
@pytest.mark.parametrize("seed", range(4))
def test_kernels_alone_on_special_values(seed: int) -> None:
    """Each kernel where no rule would send it: numba's loop's bits."""
    _same_bits(_kernel_outputs(seed, rows_harness.build, lambda a: a, lambda a: a),
               _loop_outputs(seed))


@host_kernels
@pytest.mark.parametrize("threads", [2, 8, 256])
@pytest.mark.parametrize("seed", range(2))
def test_row_kernels_with_threads(seed: int, threads: int) -> None:
    """The kernels of a block per row with several threads meeting at ``__syncthreads``
    (the device's shared-memory reduction): the one-thread results, the rows' maxima as
    numbers (a signed zero being the larger of two by the threads' order)."""
    one = _kernel_outputs(seed, rows_harness.build, lambda a: a, lambda a: a)
    many = _kernel_outputs(seed, lambda spec: rows_harness.build(spec, threads),
                           lambda a: a, lambda a: a)
    _same_bits(many, one, signed_zeros=False)


# on a GPU: CuPy's build of the same kernels


@pytest.mark.gpu
@pytest.mark.skipif(shutil.which("g++") is None, reason="the host's build is compared with")
@pytest.mark.parametrize("seed", range(4))
def test_device_kernels_alone_on_special_values(cupy: Any, seed: int) -> None:
    """No exponential in these kernels: the host build's bits on the device (compiled
    with ``--fmad=false``), so numba's loops' (``test_kernels_alone_on_special_values``)."""
    _same_bits(_kernel_outputs(seed, fused_cuda.cupy_kernel, cupy.asarray, cupy.asnumpy),
               _kernel_outputs(seed, rows_harness.build, lambda a: a, lambda a: a),
               signed_zeros=False)


@host_kernels
@pytest.mark.parametrize("per_op", [False, True])
@pytest.mark.parametrize("rule", [*sorted(RULES), "backward"])
def test_device_forms_keep_to_device_arrays(runs: _Runs, strict: Any, rule: str,
                                            per_op: bool,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules through ``fused_cuda`` in the strict namespace (CuPy's manners: no
    host array beside its arrays, no implicit conversion), its kernels built on the
    host: the primitives' bits, so no host array slips into the device forms."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 50)).astype(np.float32).astype(np.float64)
    if rule != "log_softmax":
        x[:, 40:] = -np.inf
    model = get_model("bf16", rounding="per-op") if per_op else get_model("bf16")
    ctx, sctx = RuleContext(model), RuleContext(model, xp=strict)
    t = _tracked(x, rng, "all")
    on = bounded(*(strict.asarray(a) for a in (t.value, t.det, t.prob)),
                 ref_err=strict.asarray(t.ref_err))
    monkeypatch.setattr(rows, "whole_rules", lambda xp, size: size > 0)
    with np.errstate(all="ignore"):
        if rule == "backward":
            g = np.zeros(x.shape)
            g[np.arange(6), rng.integers(0, 40, 6)] = -1.0 / 6
            x[:, 40:] = 1.0
            t = _tracked(x, rng, "all")
            on = bounded(*(strict.asarray(a) for a in (t.value, t.det, t.prob)),
                         ref_err=strict.asarray(t.ref_err))
            y = _passes(sm.log_softmax, ctx, t, -1)
            with _device_kernels():
                ys = sm.log_softmax(sctx, on, -1)
            runs.take()
            sm.log_softmax_backward_rule(ctx, exact(g), y, -1)
            want = _passes(sm.log_softmax_backward_rule, ctx, exact(g), y, -1)
            with _device_kernels():
                got = sm.log_softmax_backward_rule(sctx, exact(strict.asarray(g)), ys, -1)
        else:
            runs.take()
            RULES[rule](ctx, t)
            want = _passes(RULES[rule], ctx, t)
            with _device_kernels():
                got = RULES[rule](sctx, on)
    assert runs.take() == ["fused_cpu", "fused_cuda"]
    _assert_as_passes(got.to_host(), want)


def _field(t: Tracked, name: str) -> np.ndarray:
    return np.broadcast_to(np.asarray(getattr(t, name), dtype=np.float64), t.shape).copy()


def _within(host: Tracked, other: Tracked, what: str) -> None:
    """Values within the two references' own errors of each other, radii within 2^-10
    of each other (they follow values that may differ in their last bits) plus those."""
    o = other.to_host()
    assert o.shape == host.shape
    hv, ov = _field(host, "value"), _field(o, "value")
    slack = _field(host, "ref_err") + _field(o, "ref_err")
    with np.errstate(invalid="ignore"):
        same = (hv == ov) | (np.isnan(hv) & np.isnan(ov)) | (np.abs(hv - ov) <= slack)
    assert same.all(), (what, np.argwhere(~same)[:3].tolist(), hv[~same][:3], ov[~same][:3])
    for name in ("det", "prob", "ref_err", "mag"):
        a, b = _field(host, name), _field(o, name)
        with np.errstate(invalid="ignore"):
            close = (a == b) | (np.isnan(a) & np.isnan(b)) | (
                np.abs(a - b) <= 2.0**-10 * np.maximum(np.abs(a), np.abs(b)) + slack)
        assert close.all(), (what, name, np.argwhere(~close)[:3].tolist(), a[~close][:3],
                             b[~close][:3])


def _device_case(cp: Any, case: str) -> tuple[Tracked, Tracked]:
    rng = np.random.default_rng(len(case))
    shape = {"wide": (64, 1000), "long": (3, 9000), "causal": (2, 128, 128),
             "one": (2000, 1), "big": (256, 4096)}[case]
    x = rng.standard_normal(shape).astype(np.float32).astype(np.float64) * 3.0
    if case == "causal":
        x[..., np.triu(np.ones(shape[1:], dtype=bool), 1)] = -np.inf
    t = _tracked(x, rng, "all" if case in ("wide", "causal") else "exact")
    exact_in = t.det is t.prob and not np.any(t.det)
    # (the host's case as _tracked makes it, on the device)
    return t, exact(cp.asarray(x)) if exact_in else bounded(
        *(cp.asarray(a) for a in (t.value, t.det, t.prob)), ref_err=cp.asarray(t.ref_err))


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["wide", "long", "causal", "one", "big", "wide per-op",
                                  "causal per-op"])
@pytest.mark.parametrize("rule", sorted(RULES))
def test_device_rules_within_the_oracles_error(cupy: Any, runs: _Runs,
                                               monkeypatch: pytest.MonkeyPatch, rule: str,
                                               case: str) -> None:
    """Each rule by the kernels on CuPy: within the oracle's own error of the NumPy path
    and of CuPy's primitives (the switch off), the kernels run."""
    if rule == "log_softmax" and case.startswith("causal"):
        pytest.skip("log-softmax takes the primitives where entries are masked")
    case, _, per_op = case.partition(" ")
    t, on = _device_case(cupy, case)
    model = get_model("bf16", rounding="per-op") if per_op else get_model("bf16")
    ctx, dctx = RuleContext(model), RuleContext(model, xp=cupy)
    with np.errstate(all="ignore"):
        want = RULES[rule](ctx, t)
        monkeypatch.setenv(fused.DEVICE_ROWS_VARIABLE, "0")
        runs.take()
        plain = RULES[rule](dctx, on)
        assert "fused_cuda" not in runs.take()
        monkeypatch.setenv(fused.DEVICE_ROWS_VARIABLE, "1")
        got = RULES[rule](dctx, on)
    assert runs.take() == ["fused_cuda"]
    _within(want, got, "the NumPy path")
    _within(plain.to_host(), got, "CuPy's primitives")


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["wide", "big"])
def test_device_backward_within_the_oracles_error(cupy: Any, runs: _Runs,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  case: str) -> None:
    """log-softmax's backward (a cross-entropy's one-hot gradient) by the kernel on CuPy."""
    t, on = _device_case(cupy, case)
    rows_, cols = t.shape
    g = np.zeros(t.shape)
    g[np.arange(rows_), np.random.default_rng(1).integers(0, cols, rows_)] = -1.0 / rows_
    ctx, dctx = RuleContext(get_model("bf16")), RuleContext(get_model("bf16"), xp=cupy)
    monkeypatch.setenv(fused.DEVICE_ROWS_VARIABLE, "1")
    with np.errstate(all="ignore"):
        y = sm.log_softmax(ctx, t, -1)
        yd = sm.log_softmax(dctx, on, -1)
        want = sm.log_softmax_backward_rule(ctx, exact(g), y, -1)
        runs.take()
        got = sm.log_softmax_backward_rule(dctx, exact(cupy.asarray(g)), yd, -1)
    assert runs.take() == ["fused_cuda"]
    _within(want, got, "the NumPy path")


@host_kernels
def test_signed_zeros_count_as_equal(runs: _Runs) -> None:
    """The online bound counts the entries larger than each: -0 and +0 are equal there
    (the device sorts order-preserving integer keys, -0 made +0 first)."""
    x = np.array([[-0.0, 0.0, -1.0, 2.0, -0.0, 0.5, 0.0, -3.0]] * 3)
    ctx = RuleContext(get_model("bf16"))
    for name in ("softmax", "log_softmax"):
        _compare(runs, RULES[name], ctx, exact(x))


def test_device_kernels_are_on_by_default_on_cupy(monkeypatch: pytest.MonkeyPatch) -> None:
    """CuPy's arrays get the kernels unless ``NUMORACLE_DEVICE_ROWS=0``; NumPy's never."""
    cupy_like = type("cupy", (), {"__name__": "cupy"})()
    monkeypatch.delenv(fused.DEVICE_ROWS_VARIABLE, raising=False)
    assert fused.device_rows(cupy_like) and fused.whole_rules(cupy_like, 10)
    assert not fused.device_rows(np)
    monkeypatch.setenv(fused.DEVICE_ROWS_VARIABLE, "0")
    assert not fused.device_rows(cupy_like) and not fused.whole_rules(cupy_like, 10)
    monkeypatch.setenv(fused.DEVICE_ROWS_VARIABLE, "1")
    assert fused.device_rows(cupy_like) and not fused.whole_rules(cupy_like, 0)
