"""The softmax family's whole-rule loops against the primitives' passes on drawn
shapes and values, special rows (masked, NaN, +inf: the passes run there), empty and
one-entry rows, huge and tiny values, radii and exact inputs, several claims: within
the oracle's own error of each other (the loops' ``exp`` and ``expm1`` are their own,
``_numba_exp``, not NumPy's: the last bits may differ), the same special values,
lengths and regimes; and the loops' values within their ref_err of mpmath's."""

from __future__ import annotations

import functools
from typing import Any

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from numoracle.oracle import fused_cpu
from numoracle.oracle.precision import get_model
from numoracle.oracle.traced.library import _softmax_rows as rows
from numoracle.oracle.traced.library import softmax as sm
from numoracle.oracle.traced.rules import RuleContext
from numoracle.oracle.tracked import Tracked, bounded, exact

pytestmark = pytest.mark.skipif(not fused_cpu.rows_available(),
                                reason="the whole-rule loops need numba")

FIELDS = ("value", "det", "prob", "ref_err", "mag")
MODELS = ["fp32", "bf16", "fp16+triton", "tf32"]


def _passes(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` by the primitives' passes (the whole-rule loops switched off)."""
    orig = rows.whole_rules
    rows.whole_rules = lambda xp, size: False
    try:
        return fn(*args)
    finally:
        rows.whole_rules = orig


def _bits(a: Any, shape: tuple[int, ...]) -> np.ndarray:
    return np.ascontiguousarray(np.broadcast_to(a, shape), dtype=np.float64).view(np.int64)


def assert_same_bits(got: Tracked, want: Tracked) -> None:
    assert got.shape == want.shape
    for f in FIELDS:
        g, w = _bits(getattr(got, f), got.shape), _bits(getattr(want, f), want.shape)
        bad = np.flatnonzero(g != w)
        assert bad.size == 0, (f, bad[:5], np.broadcast_to(getattr(got, f), got.shape).flat[
            bad[0]], np.broadcast_to(getattr(want, f), want.shape).flat[bad[0]])
    assert np.array_equal(np.asarray(got.n), np.asarray(want.n))
    assert (got.lo is None) == (want.lo is None)


def _field(t: Tracked, name: str) -> np.ndarray:
    return np.broadcast_to(np.asarray(getattr(t, name), dtype=np.float64), t.shape)


#: how far the loops' radii may be from the passes' (relative), beyond the values'
#: slack: they follow values that may differ in their last bits
RADIUS_REL = 2.0**-40


def assert_within(got: Tracked, want: Tracked) -> None:
    """``got`` (the loops) within the oracle's own error of ``want`` (the passes): values
    within the sum of the two ref_errs (the same where either is a special value or
    exact), radii and magnitudes within :data:`RADIUS_REL` plus that, the same
    lengths."""
    assert got.shape == want.shape
    gv, wv = _field(got, "value"), _field(want, "value")
    slack = _field(got, "ref_err") + _field(want, "ref_err")
    with np.errstate(invalid="ignore"):
        same = (gv == wv) | (np.isnan(gv) & np.isnan(wv)) | (np.abs(gv - wv) <= slack)
    assert same.all(), ("value", np.argwhere(~same)[:3].tolist(), gv[~same][:3], wv[~same][:3])
    for f in ("det", "prob", "ref_err", "mag"):
        a, b = _field(got, f), _field(want, f)
        with np.errstate(invalid="ignore"):
            close = (a == b) | (np.isnan(a) & np.isnan(b)) | (
                np.abs(a - b) <= RADIUS_REL * np.maximum(np.abs(a), np.abs(b)) + slack)
            if f in ("det", "prob"):  # (a zero radius, the exact regime, on both sides alike)
                close &= (a == 0) == (b == 0)
        assert close.all(), (f, np.argwhere(~close)[:3].tolist(), a[~close][:3], b[~close][:3])
    assert np.array_equal(np.asarray(got.n), np.asarray(want.n))
    assert (got.lo is None) == (want.lo is None)


@pytest.fixture
def small_loops(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loops from one element, so that small drawn shapes take them."""
    monkeypatch.setattr(fused_cpu, "LOOP_MIN", 1)


def _values(rng: np.random.Generator, shape: tuple[int, ...], kind: str) -> np.ndarray:
    x = (rng.standard_normal(shape) * 3.0).astype(np.float32).astype(np.float64)
    if kind == "huge":
        x = x * 1e300
    elif kind == "tiny":
        x = x * 1e-310
    elif kind == "wide":
        x = x * 300.0  # exponentials underflow to 0 in part of each row
    elif kind == "ints":
        x = np.round(x)  # exact differences: the exact tests of the subtractions
    elif kind == "zero_max":
        x = -np.abs(x)
        x[..., 0] = 0.0
    return x


def _special_rows(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Some rows masked with -inf (a few, or all), one holding NaN, one +inf."""
    x = x.reshape(-1, x.shape[-1]).copy()
    rows = x.shape[0]
    for r in rng.choice(rows, size=min(rows, 4), replace=False):
        kind = rng.integers(4)
        if kind == 0:
            x[r, rng.integers(x.shape[1])] = -np.inf
        elif kind == 1:
            x[r] = -np.inf
        elif kind == 2:
            x[r, rng.integers(x.shape[1])] = np.nan
        else:
            x[r, rng.integers(x.shape[1])] = np.inf
    return x


def _tracked(x: np.ndarray, rng: np.random.Generator, radii: str) -> Tracked:
    if radii == "exact":
        return exact(x)
    with np.errstate(invalid="ignore", over="ignore"):
        r = np.abs(x) * 2.0**-20 + rng.random(x.shape) * 1e-7
        r = np.where(np.isfinite(r), r, 0.0)
    if radii == "some":  # exact entries beside inexact ones
        r = np.where(rng.random(x.shape) < 0.5, 0.0, r)
    return bounded(x, r, r * 0.75, ref_err=r * 2.0**-30)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # (the same patch each time)
@given(rows=st.integers(1, 6), cols=st.integers(1, 70), lead=st.booleans(),
       kind=st.sampled_from(["normal", "huge", "tiny", "wide", "ints", "zero_max"]),
       radii=st.sampled_from(["exact", "all", "some"]), special=st.booleans(),
       model=st.sampled_from(MODELS), per_op=st.booleans(), seed=st.integers(0, 2**32 - 1),
       rule=st.sampled_from(["softmax", "log_softmax", "safe_softmax"]))
def test_whole_rule_loops_give_the_passes_bits(small_loops: None, rows: int, cols: int,
                                               lead: bool, kind: str, radii: str,
                                               special: bool, model: str, per_op: bool,
                                               seed: int, rule: str) -> None:
    rng = np.random.default_rng(seed)
    shape = (2, rows, cols) if lead else (rows, cols)
    x = _values(rng, shape, kind)
    if special:
        x = _special_rows(x, rng).reshape(shape)
    ctx = RuleContext(get_model(model, rounding="per-op") if per_op else get_model(model))
    t = _tracked(x, rng, radii)
    fn = {"softmax": lambda c, v: sm.softmax(c, v, -1),
          "safe_softmax": lambda c, v: sm.softmax(c, v, -1, masked_rows="zero"),
          "log_softmax": lambda c, v: sm.log_softmax(c, v, -1)}[rule]
    with np.errstate(all="ignore"):
        assert_within(fn(ctx, t), _passes(fn, ctx, t))


@pytest.mark.parametrize("rule", [sm.softmax, sm.log_softmax])
@pytest.mark.parametrize("shape", [(200, 100), (3, 9000), (20000, 1)])
def test_the_loops_run_at_realistic_sizes(rule: Any, shape: tuple[int, int],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Above LOOP_MIN the loops run (not a fallback) and give the passes' bits."""
    ran = []
    for name in ("softmax_rows", "log_softmax_rows"):
        real = getattr(fused_cpu, name)
        monkeypatch.setattr(fused_cpu, name, lambda *a, _r=real: ran.append(1) or _r(*a))
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).astype(np.float32).astype(np.float64)
    ctx = RuleContext(get_model("fp32"))
    for t in (exact(x), _tracked(x, rng, "all")):
        assert_within(rule(ctx, t, -1), _passes(rule, ctx, t, -1))
    assert len(ran) == 2


@pytest.mark.parametrize("shape", [(4, 0), (0, 5), (3,)])
def test_empty_and_one_dimensional(small_loops: None, shape: tuple[int, ...]) -> None:
    x = np.linspace(-1.0, 2.0, int(np.prod(shape))).reshape(shape)
    ctx = RuleContext(get_model("fp32"))
    for rule in (sm.softmax, sm.log_softmax):
        try:
            want = _passes(rule, ctx, exact(x), -1)
        except ValueError:  # an empty lane has no maximum: both refuse it alike
            with pytest.raises(ValueError):
                rule(ctx, exact(x), -1)
            continue
        assert_within(rule(ctx, exact(x), -1), want)


def test_other_axis_and_escalated_inputs_take_the_passes(small_loops: None) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 40))
    ctx = RuleContext(get_model("fp32"))
    t = exact(x)
    assert rows._row_pass(ctx, t, 0, False) is None
    assert rows._row_pass(ctx, t, 1, False) is not None
    assert_within(sm.softmax(ctx, t, 0), _passes(sm.softmax, ctx, t, 0))
    low = Tracked(value=x, ref_err=np.zeros_like(x), det=np.zeros_like(x),
                  prob=np.zeros_like(x), mag=np.abs(x), lo=x * 2.0**-60)
    assert rows._row_pass(ctx, low, 1, False) is None
    assert_within(sm.softmax(ctx, low, 1), _passes(sm.softmax, ctx, low, 1))


def gradient(rng: np.random.Generator, rows: int, cols: int, grad: str) -> Tracked:
    """A drawn gradient of log-softmax: one-hot (a cross-entropy's), dense, a mix of
    the two by rows, with a zero row, or holding a NaN."""
    g = np.zeros((rows, cols))
    g[np.arange(rows), rng.integers(0, cols, rows)] = -1.0 / 3.0
    if grad in ("dense", "mixed", "special"):
        dense = rng.standard_normal((rows, cols))
        g = dense if grad == "dense" else np.where(rng.random((rows, 1)) < 0.5, dense, g)
    if grad == "zero_row":
        g[0] = 0.0
    if grad == "special":
        g[0, 0] = np.nan
    return exact(g) if grad in ("one_hot", "zero_row") else _tracked(g, rng, "some")


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # (the same patch each time)
@given(rows=st.integers(1, 6), cols=st.integers(1, 70),
       grad=st.sampled_from(["one_hot", "dense", "mixed", "zero_row", "special"]),
       kind=st.sampled_from(["normal", "wide", "ints"]), model=st.sampled_from(MODELS),
       seed=st.integers(0, 2**32 - 1))
def test_log_softmax_backward_loop_gives_the_passes_bits(small_loops: None, rows: int,
                                                         cols: int, grad: str, kind: str,
                                                         model: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    ctx = RuleContext(get_model(model))
    x = _values(rng, (rows, cols), kind)
    with np.errstate(all="ignore"):
        y = _passes(sm.log_softmax, ctx, _tracked(x, rng, "all"), -1)
    gt = gradient(rng, rows, cols, grad)
    with np.errstate(all="ignore"):
        assert_within(sm.log_softmax_backward_rule(ctx, gt, y, -1),
                      _passes(sm.log_softmax_backward_rule, ctx, gt, y, -1))


def test_log_softmax_backward_loop_runs_at_realistic_sizes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ran = []
    real = fused_cpu.log_softmax_backward_rows
    monkeypatch.setattr(fused_cpu, "log_softmax_backward_rows",
                        lambda *a: ran.append(1) or real(*a))
    rng = np.random.default_rng(11)
    ctx = RuleContext(get_model("fp32"))
    x = rng.standard_normal((64, 500)).astype(np.float32).astype(np.float64)
    y = sm.log_softmax(ctx, exact(x), -1)
    g = np.zeros(x.shape)
    g[np.arange(64), rng.integers(0, 500, 64)] = -1.0 / 64
    assert_within(sm.log_softmax_backward_rule(ctx, exact(g), y, -1),
                  _passes(sm.log_softmax_backward_rule, ctx, exact(g), y, -1))
    assert ran == [1]


@pytest.mark.parametrize("masked_rows", ["nan", "zero"])
def test_causal_masks_take_the_softmax_loops(masked_rows: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Masked entries (exact -inf, as a causal mask makes them): ieee's exact zeros in
    the loops, the same bits as the passes."""
    ran = []
    real = fused_cpu.softmax_rows
    monkeypatch.setattr(fused_cpu, "softmax_rows", lambda *a: ran.append(1) or real(*a))
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 128, 128)).astype(np.float32).astype(np.float64)
    x[..., np.triu(np.ones((128, 128), dtype=bool), 1)] = -np.inf
    ctx = RuleContext(get_model("bf16"))
    for t in (exact(x), _tracked(x, rng, "all")):
        assert_within(sm.softmax(ctx, t, -1, masked_rows),
                      _passes(sm.softmax, ctx, t, -1, masked_rows))
    assert len(ran) == 2


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 300), kind=st.sampled_from(["normal", "ties", "cubed", "flat",
                                                    "masked", "ends", "crowded"]),
       spread=st.sampled_from([0.0, 1e-7, 0.3, 1e300]), seed=st.integers(0, 2**32 - 1))
@example(n=300, kind="cubed", spread=0.0, seed=0)  # one bucket, sorted and searched
@example(n=300, kind="crowded", spread=0.0, seed=1)  # buckets compared in pairs
def test_larger_counts_count_exactly(n: int, kind: str, spread: float, seed: int) -> None:
    """The count of larger entries (the online bound's ``k``) by buckets equals the
    count of every pair, with ties (not larger), crowded buckets (compared in pairs,
    or sorted and searched), -inf and +inf entries and a range too wide for the
    buckets; an exact row's count (``lo`` and ``hi`` one array) the same."""
    from numoracle.oracle import _numba_counts  # noqa: PLC0415 - numba is optional

    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(np.float32).astype(np.float64)
    if kind == "ties":
        x = np.round(x * 2.0)
    elif kind == "cubed":  # most entries in a few buckets
        x = rng.standard_cauchy(n) ** 3
    elif kind == "flat":
        x[:] = 1.5
    elif kind == "masked":
        x[rng.integers(n, size=3)] = -np.inf
    elif kind == "ends":
        x[0], x[-1] = 1e308, -1e308
    elif kind == "crowded":  # buckets of 5 to 17 entries, tied
        x = np.round(rng.standard_normal(n), 1)
    r = np.abs(rng.standard_normal(n)) * spread
    with np.errstate(over="ignore", invalid="ignore"):
        lo, hi = x - r, x + r
    want = (hi[None, :] > lo[:, None]).sum(axis=1)
    out = np.empty(n, dtype=np.int64)
    _numba_counts.larger_counts_row(lo, hi, out)
    assert np.array_equal(out, want)
    if spread == 0.0:
        out = np.full(n, -1.0)
        _numba_counts.larger_counts_self(x, out)
        assert np.array_equal(out, want)


#: formats as (t, emin, fmax): float32, bfloat16, float16, float64, float8 e4m3
_FORMATS = [(23, -126, 3.4028234663852886e38), (7, -126, 3.3895313892515355e38),
            (10, -14, 65504.0), (52, -1022, 1.7976931348623157e308), (3, -6, 448.0)]


@functools.cache
def _both_grid_tests() -> Any:
    """A loop writing ``_on_grid`` and ``_representable`` of each entry (compiled once)."""
    import numba  # noqa: PLC0415 - numba is optional

    from numoracle.oracle import _numba_loops, _numba_rows  # noqa: PLC0415

    @numba.njit
    def both(x: np.ndarray, t: int, emin: int, fmax: float, a: np.ndarray,
             b: np.ndarray) -> None:
        for i in range(x.size):
            a[i] = _numba_rows._on_grid(x[i], t, emin, fmax)
            b[i] = _numba_loops._representable(x[i], t, emin, fmax)
    return both


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), fmt=st.sampled_from(_FORMATS))
@example(seed=0, fmt=_FORMATS[0])
def test_on_grid_is_representable(seed: int, fmt: tuple[int, int, float]) -> None:
    """The branch-free test of membership in a format (the exact test of ``x - m``)
    agrees with ``_numba_loops._representable`` on random bits, on short significands
    over the whole exponent range (most of them members), on the edges (zeros,
    infinities, NaN, subnormals, the largest finite) and on the float64 neighbours of
    each."""
    rng = np.random.default_rng(seed)
    t, emin, fmax = fmt
    short = np.round(rng.standard_normal(4000) * 2.0**rng.integers(0, 30, 4000))
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 2.0**-1022, 2.0**-1023,
                      1.7976931348623157e308, fmax, 2.0**(emin - t), 2.0**(emin - t - 1),
                      3 * 2.0**(emin - t - 1), 2.0**emin, 1.0, 1.0 + 2.0**-t])
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        x = np.concatenate([rng.integers(0, 2**64 - 1, 4000, dtype=np.uint64).view(np.float64),
                            np.ldexp(short, rng.integers(-1100, 1000, 4000)), edges, -edges])
        x = np.concatenate([x, np.nextafter(x, np.inf), np.nextafter(x, -np.inf)])
        a, b = np.empty(x.size, np.bool_), np.empty(x.size, np.bool_)
        _both_grid_tests()(x, t, emin, fmax, a, b)
    assert np.array_equal(a, b), x[a != b][:5]
    assert 0 < a.sum() < a.size or t == 52  # (members and non-members; float64: all)


@pytest.mark.parametrize("rule", ["softmax", "log_softmax"])
def test_the_loops_values_are_within_their_ref_err_of_mpmath(
        small_loops: None, rule: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The oracle's own error bounded: the loops' values (their ``exp`` their own) within
    their ref_err of the exact result, on rows whose exponentials span 1 to ``2^-1000``
    (normal numbers: a subnormal's last bit is the claims' ``tiny`` term)."""
    ran = []
    for name in ("softmax_rows", "log_softmax_rows"):
        real = getattr(fused_cpu, name)
        monkeypatch.setattr(fused_cpu, name, lambda *a, _r=real: ran.append(1) or _r(*a))
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((3, 50)) * 4.0).astype(np.float32).astype(np.float64)
    x[0, :6] = [-650.0, -600.5, 30.0, -1e-9, 0.5, 29.999]
    x[1] = np.linspace(-649.5, 0.5, 50)  # (a maximum of exact 0 takes the passes)
    ctx = RuleContext(get_model("fp32"))
    out = (sm.softmax if rule == "softmax" else sm.log_softmax)(ctx, exact(x), -1)
    assert ran == [1]
    mpmath.mp.prec = 160
    for i, row in enumerate(x):
        m = mpmath.mpf(float(row.max()))
        s = mpmath.fsum(mpmath.exp(mpmath.mpf(float(v)) - m) for v in row)
        for j, v in enumerate(row):
            d = mpmath.mpf(float(v)) - m
            truth = mpmath.exp(d) / s if rule == "softmax" else d - mpmath.log(s)
            err = abs(mpmath.mpf(float(out.value[i, j])) - truth)
            assert err <= mpmath.mpf(float(out.ref_err[i, j])), (i, j, float(err),
                                                                 float(out.ref_err[i, j]))
