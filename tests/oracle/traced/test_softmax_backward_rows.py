"""softmax's backward as whole-rule loops (``_numba_softmax_grad``) against the
primitives' passes: the same bits, value, radii, magnitude and length, on drawn shapes,
values and radii, special points in either operand (exact zeros, infinities, NaN,
subnormals, huge values, masked rows of a softmax) and several claims. The loops
evaluate no function of their own, so nothing may differ but a NaN's payload (which
IEEE leaves to the hardware's choice of operand)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import test_softmax_rows as base

from numoracle.oracle import fused_cpu
from numoracle.oracle.precision import get_model
from numoracle.oracle.traced.library import _softmax_rows as rows
from numoracle.oracle.traced.library import softmax as sm
from numoracle.oracle.traced.rules import RuleContext
from numoracle.oracle.tracked import Tracked, bounded, exact

pytestmark = pytest.mark.skipif(fused_cpu.softmax_grad_loops() is None,
                                reason="the whole-rule loops need numba")

FIELDS = ("value", "det", "prob", "ref_err", "mag")
MODELS = ["fp32", "bf16", "fp16+triton", "tf32"]
#: values a drawn entry may be overwritten with
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -2.0**-1060, 1e300, -3e307]


def _passes(*args: Any) -> Tracked:
    """The rule by the primitives' passes (the whole-rule loops switched off)."""
    orig = rows.whole_rules
    rows.whole_rules = lambda xp, size: False
    try:
        return sm.softmax_backward_rule(*args)
    finally:
        rows.whole_rules = orig


def assert_same_bits(got: Tracked, want: Tracked) -> None:
    """Every field the same float64 bits (a NaN any NaN), the same lengths."""
    assert got.shape == want.shape
    for f in FIELDS:
        a = np.ascontiguousarray(np.broadcast_to(getattr(got, f), got.shape), dtype=np.float64)
        b = np.ascontiguousarray(np.broadcast_to(getattr(want, f), want.shape),
                                 dtype=np.float64)
        same = (a.view(np.int64) == b.view(np.int64)) | (np.isnan(a) & np.isnan(b))
        assert same.all(), (f, np.argwhere(~same)[:3].tolist(), a[~same][:3], b[~same][:3])
    assert np.array_equal(np.asarray(got.n), np.asarray(want.n))
    assert got.lo is None and want.lo is None


def _values(rng: np.random.Generator, shape: tuple[int, ...], kind: str) -> np.ndarray:
    x = (rng.standard_normal(shape) * 3.0).astype(np.float32).astype(np.float64)
    if kind == "huge":
        return x * 1e300
    if kind == "tiny":
        return x * 1e-310  # subnormal
    if kind == "ints":  # odd: exact products and differences (the exact tests), no 0
        return 2.0 * np.round(x) + 1.0
    if kind == "halves":  # a softmax-like output of exact entries, no 0
        return (2.0 * np.round(x * 4) + 1.0) / 64
    return x


def _tracked(x: np.ndarray, rng: np.random.Generator, radii: str) -> Tracked:
    """``test_softmax_rows``'s operands, or with ``shared`` its radii of ``all`` with
    det and prob one array."""
    if radii != "shared":
        return base._tracked(x, rng, radii)
    t = base._tracked(x, rng, "all")
    return bounded(t.value, t.det, t.det, ref_err=t.ref_err)


def _sprinkled(x: np.ndarray, rng: np.random.Generator, k: int) -> np.ndarray:
    x = x.copy()
    for _ in range(k):
        x.flat[rng.integers(x.size)] = SPECIALS[rng.integers(len(SPECIALS))]
    return x


def _softmax_out(ctx: RuleContext, rng: np.random.Generator, shape: tuple[int, ...],
                 masked: str, radii: str) -> Tracked:
    """A softmax's output of drawn logits, some masked (-inf) in part or in whole rows,
    with a NaN or +inf in a row (its entries NaN, unjudged)."""
    x = base._special_rows(_values(rng, shape, "normal"), rng)
    with np.errstate(all="ignore"):
        return sm.softmax(ctx, _tracked(x.reshape(shape), rng, radii), -1, masked)


@pytest.fixture
def small_loops(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loops from one element, so that small drawn shapes take them."""
    monkeypatch.setattr(fused_cpu, "LOOP_MIN", 1)


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # (the same patch each time)
@given(rows_=st.integers(1, 6), cols=st.integers(1, 70), lead=st.booleans(),
       y_from=st.sampled_from(["softmax", "safe_softmax", "normal", "huge", "tiny", "ints",
                               "halves"]),
       g_kind=st.sampled_from(["normal", "huge", "tiny", "ints"]),
       y_radii=st.sampled_from(["exact", "all", "some", "shared"]),
       g_radii=st.sampled_from(["exact", "all", "some", "shared"]),
       specials=st.integers(0, 4), model=st.sampled_from(MODELS),
       seed=st.integers(0, 2**32 - 1))
@example(rows_=3, cols=8, lead=False, y_from="ints", g_kind="ints", y_radii="exact",
         g_radii="exact", specials=0, model="fp32", seed=0)  # every exact test holds
@example(rows_=4, cols=9, lead=False, y_from="safe_softmax", g_kind="normal",
         y_radii="exact", g_radii="exact", specials=0, model="bf16", seed=1)  # masked rows
@example(rows_=2, cols=5, lead=False, y_from="halves", g_kind="ints", y_radii="exact",
         g_radii="exact", specials=3, model="fp32", seed=2)
def test_the_loops_give_the_passes_bits(small_loops: None, rows_: int, cols: int,
                                        lead: bool, y_from: str, g_kind: str, y_radii: str,
                                        g_radii: str, specials: int, model: str,
                                        seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = (2, rows_, cols) if lead else (rows_, cols)
    ctx = RuleContext(get_model(model))
    if y_from in ("softmax", "safe_softmax"):
        y = _softmax_out(ctx, rng, shape, "nan" if y_from == "softmax" else "zero", y_radii)
    else:
        y = _tracked(_sprinkled(_values(rng, shape, y_from), rng, specials), rng, y_radii)
    g = _tracked(_sprinkled(_values(rng, shape, g_kind), rng, specials), rng, g_radii)
    with np.errstate(all="ignore"):
        assert rows.fused_softmax_backward(ctx, g, y, len(shape) - 1) is not None
        assert_same_bits(sm.softmax_backward_rule(ctx, g, y, -1), _passes(ctx, g, y, -1))


@pytest.mark.parametrize("shape", [(200, 100), (3, 9000), (20000, 1)])
@pytest.mark.parametrize("masked", [False, True])
def test_the_loops_run_at_realistic_sizes(shape: tuple[int, int], masked: bool,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Above LOOP_MIN the loops run (not a fallback) and give the passes' bits: a
    softmax's output of exact logits (a causal mask's exact zeros with ``masked``) and
    an exact gradient, as a traced graph hands them over."""
    ran = []
    loops = fused_cpu.softmax_grad_loops()
    real = loops.rows
    monkeypatch.setattr(loops, "rows", lambda *a: ran.append(1) or real(*a))
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).astype(np.float32).astype(np.float64)
    if masked:
        x[..., np.triu(np.ones(shape, dtype=bool), 1)] = -np.inf
    ctx = RuleContext(get_model("fp32"))
    y = sm.softmax(ctx, exact(x), -1, "zero")
    g = exact(rng.standard_normal(shape).astype(np.float32).astype(np.float64))
    assert_same_bits(sm.softmax_backward_rule(ctx, g, y, -1), _passes(ctx, g, y, -1))
    assert ran == [1]


def test_other_axes_shapes_and_escalated_operands_take_the_passes(small_loops: None) -> None:
    rng = np.random.default_rng(3)
    ctx = RuleContext(get_model("fp32"))
    y, g = (_tracked(rng.standard_normal((6, 40)), rng, "all") for _ in range(2))
    assert rows.fused_softmax_backward(ctx, g, y, 0) is None
    assert_same_bits(sm.softmax_backward_rule(ctx, g, y, 0), _passes(ctx, g, y, 0))
    low = Tracked(value=g.value, ref_err=np.zeros((6, 40)), det=np.zeros((6, 40)),
                  prob=np.zeros((6, 40)), mag=np.abs(g.value), lo=g.value * 2.0**-60)
    assert rows.fused_softmax_backward(ctx, low, y, 1) is None
    row = exact(rng.standard_normal(40))
    assert rows.fused_softmax_backward(ctx, row, y, 1) is None  # (a broadcast operand)
    assert rows.fused_softmax_backward(ctx, exact(np.zeros((6, 0))), exact(np.zeros((6, 0))),
                                       1) is None


@pytest.mark.parametrize("grad", ["one_hot", "dense", "special"])
@pytest.mark.parametrize("model", ["fp32", "bf16"])
def test_log_softmax_backward_exact_ones_give_the_general_bits(
        grad: str, model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """log-softmax's backward loop with its constants 1 and ``1 / 1`` taken as exact
    ones (``_by_one``) gives the bits of the general quotient and product, on values
    with radii, huge and tiny ones, exact zeros of both signs and subnormals."""
    calls: list[tuple[Any, ...]] = []
    loops = fused_cpu.softmax_grad_loops()
    real = loops.log_softmax_backward_rows
    monkeypatch.setattr(loops, "log_softmax_backward_rows",
                        lambda *a: calls.append(a) or real(*a))
    rng = np.random.default_rng(13)
    ctx = RuleContext(get_model(model))
    x = _values(rng, (40, 600), "normal")
    x[0, :4] = [-700.0, 80.0, 1e-300, -2.0**-1060]
    y = sm.log_softmax(ctx, _tracked(x, rng, "all"), -1)
    g = np.zeros(x.shape)
    g[np.arange(40), rng.integers(0, 600, 40)] = -1.0 / 40
    if grad != "one_hot":
        g = np.where(rng.random((40, 1)) < 0.5, rng.standard_normal(x.shape), g)
    if grad == "special":  # (finite: the loop takes finite operands alone)
        for k, v in enumerate([0.0, -0.0, 5e-324, -2.0**-1060, 1e300, -3e307]):
            g[k, :: 7 + k] = v
    with np.errstate(all="ignore"):
        sm.log_softmax_backward_rule(ctx, _tracked(g, rng, "some"), y, -1)
    assert len(calls) == 1
    args = list(calls[0])
    assert args[13] is True  # (the claim's 1 and 1 / 1 are exact)
    both = []
    for ones in (True, False):
        outs = [np.empty(x.shape) for _ in range(5)]
        real(*args[:13], ones, *outs)
        both.append(outs)
    for f, a, b in zip(FIELDS, *both, strict=True):
        same = (a.view(np.int64) == b.view(np.int64)) | (np.isnan(a) & np.isnan(b))
        assert same.all(), (f, np.argwhere(~same)[:3].tolist())
