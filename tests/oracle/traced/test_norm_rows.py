"""Layer norm's whole-rule loops against the primitives' NumPy passes: the same bits
(values, radii, magnitudes, lengths; any NaN as any other) forward and backward, on
drawn shapes and values: zero-variance rows, NaN and infinities, size-1 lanes, huge
and tiny values, exact inputs and radii, eps at its extremes, with and without the
affine weights, several claims; group norm's statistics through the same loops;
batch norm's and escalated inputs through the primitives. With the sums folded into
the loops (``FOLD_SUMS``, other bits): every sum's value within its reference radius
of the exact sum of its terms, and the results within both sides' reference radii
of the passes', the radii within 2^-9 of theirs."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numoracle.oracle import fused_cpu
from numoracle.oracle.precision import get_model
from numoracle.oracle.traced.library import _norm_rows as rows
from numoracle.oracle.traced.library import normalization as nz
from numoracle.oracle.traced.rules import RuleContext
from numoracle.oracle.tracked import Tracked, exact, sum_, sum_of_parts

from test_softmax_rows import FIELDS, _tracked

pytestmark = pytest.mark.skipif(not fused_cpu.norm_available(),
                                reason="the whole-rule loops need numba")

MODELS = ["fp32", "bf16", "fp16+triton", "tf32"]


def _bits(a: Any, shape: tuple[int, ...]) -> np.ndarray:
    """The bits of ``a`` broadcast to ``shape``, every NaN as one (a NaN's sign and
    payload are not the arithmetic's: NumPy and compiled loops order a commutative
    operation's operands as they like)."""
    a = np.array(np.broadcast_to(a, shape), dtype=np.float64)
    a[np.isnan(a)] = np.nan
    return a.view(np.int64)


def assert_same_bits(got: Tracked, want: Tracked) -> None:
    assert got.shape == want.shape
    for f in FIELDS:
        g, w = _bits(getattr(got, f), got.shape), _bits(getattr(want, f), want.shape)
        bad = np.flatnonzero(g != w)
        assert bad.size == 0, (f, bad[:5], g.view(np.float64).flat[bad[0]],
                               w.view(np.float64).flat[bad[0]])
    assert np.array_equal(np.asarray(got.n), np.asarray(want.n))
    assert (got.lo is None) == (want.lo is None)


def _passes(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` by the primitives' NumPy passes (the whole-rule loops and the
    per-node loops switched off)."""
    orig, elementwise = rows.loops_run, fused_cpu.elementwise
    rows.loops_run = lambda xp, size: False
    fused_cpu.elementwise = lambda *a: False
    try:
        return fn(*args)
    finally:
        rows.loops_run, fused_cpu.elementwise = orig, elementwise


@pytest.fixture
def small_loops(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loops from one element, so that small drawn shapes take them; the sums
    not folded into them (every step the primitives' bits)."""
    monkeypatch.setattr(fused_cpu, "LOOP_MIN", 1)
    monkeypatch.setattr(rows, "FOLD_SUMS", False)


@pytest.fixture
def folded_loops(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loops from one element, their sums folded into them."""
    monkeypatch.setattr(fused_cpu, "LOOP_MIN", 1)
    monkeypatch.setattr(rows, "FOLD_SUMS", True)


def assert_both_sound(got: Tracked, want: Tracked, slack: bool, terms: int) -> None:
    """``got`` (sums folded) and ``want`` (the passes) agree as two sound bounds of one
    result do: their values within the sum of their reference radii (with ``slack``
    also of the smaller kernel radius: a step stored to a narrow format may round
    either way from two float64 values), their radii and magnitudes within 2^-9 of
    each other plus ``(terms + 1) 2^-124`` (the passes' float32 ``S`` carries ``(k +
    1) 2^-125`` for its products flushed to zero, a float64 one not; ``terms`` at
    least every sum's length), the same elements not finite."""
    assert got.shape == want.shape and got.lo is None and want.lo is None
    shape = got.shape
    g = {f: np.broadcast_to(getattr(got, f), shape) for f in FIELDS}
    w = {f: np.broadcast_to(getattr(want, f), shape) for f in FIELDS}
    for f in FIELDS:
        assert np.array_equal(np.isfinite(g[f]), np.isfinite(w[f])), f
    fin = np.isfinite(g["value"]) & np.isfinite(g["ref_err"]) & np.isfinite(w["ref_err"])
    with np.errstate(invalid="ignore", over="ignore"):
        room = g["ref_err"] + w["ref_err"]
        if slack:
            room = room + np.minimum(g["det"], w["det"])
        assert np.all(np.abs(g["value"] - w["value"])[fin] <= room[fin])
        for f in ("det", "prob", "ref_err", "mag"):
            ok = np.isfinite(g[f])
            assert np.all(np.abs(g[f] - w[f])[ok]
                          <= 2.0**-9 * np.abs(w[f])[ok] + (terms + 1) * 2.0**-124), f
    assert np.array_equal(np.asarray(got.n), np.asarray(want.n))


def _values(rng: np.random.Generator, shape: tuple[int, ...], kind: str) -> np.ndarray:
    x = (rng.standard_normal(shape) * 3.0 + 0.5).astype(np.float32).astype(np.float64)
    if kind == "huge":
        x = x * 1e300
    elif kind == "tiny":
        x = x * 1e-310
    elif kind == "ints":
        x = np.round(x)  # exact deviations and squares: the exact tests
    elif kind == "flat":  # zero-variance rows
        x = np.broadcast_to(x[..., :1], shape).copy()
    elif kind == "zeros":
        x = np.zeros(shape)
    return x


def _special(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    x = x.copy()
    flat = x.reshape(-1)
    for v in (np.nan, np.inf, -np.inf):
        if rng.random() < 0.5:
            flat[rng.integers(flat.size)] = v
    return x


def _affine(rng: np.random.Generator, shape: tuple[int, ...], kind: str) -> Any:
    if kind == "none":
        return None
    w = rng.standard_normal(shape).astype(np.float32).astype(np.float64)
    return exact(w) if kind == "exact" else _tracked(w, rng, "all")


CASES = dict(lead=st.lists(st.integers(1, 5), min_size=1, max_size=2),
             lane=st.lists(st.integers(1, 40), min_size=1, max_size=2),
             kind=st.sampled_from(["normal", "huge", "tiny", "ints", "flat", "zeros"]),
             radii=st.sampled_from(["exact", "all", "some"]), special=st.booleans(),
             affine=st.sampled_from(["none", "exact", "tracked"]),
             eps=st.sampled_from([1e-5, 0.0, 5e-324, 1e300]), model=st.sampled_from(MODELS),
             per_op=st.booleans(), seed=st.integers(0, 2**32 - 1))


def _case(lead: list[int], lane: list[int], kind: str, radii: str, special: bool,
          affine: str, model: str, per_op: bool, seed: int
          ) -> tuple[RuleContext, Tracked, Any, Any, tuple[int, ...]]:
    rng = np.random.default_rng(seed)
    x = _values(rng, tuple(lead) + tuple(lane), kind)
    if special:
        x = _special(x, rng)
    ctx = RuleContext(get_model(model, rounding="per-op") if per_op else get_model(model))
    return (ctx, _tracked(x, rng, radii), _affine(rng, tuple(lane), affine),
            _affine(rng, tuple(lane), affine), tuple(lane))


#: a backward case: ``CASES`` and the gradient's radii
BACKWARD = dict(CASES, grad=st.sampled_from(["exact", "all", "some"]))
#: which gradients the backward is asked for (the input's, the weight's, the bias's)
MASKS = [(True, True, True), (True, False, False), (False, True, True)]


def _backward_case(lead: list[int], lane: list[int], kind: str, radii: str, special: bool,
                   affine: str, model: str, per_op: bool, seed: int, grad: str
                   ) -> tuple[RuleContext, Tracked, Tracked, Any, Any, tuple[int, ...]]:
    """:func:`_case` and a drawn gradient of the input's shape (radii as ``grad``)."""
    ctx, x, w, b, shape = _case(lead, lane, kind, radii, special, affine, model, per_op, seed)
    rng = np.random.default_rng(seed + 1)
    return ctx, x, _tracked(rng.standard_normal(x.shape), rng, grad), w, b, shape


def assert_each(check: Any, got: tuple[Any, ...], want: tuple[Any, ...]) -> None:
    """``check`` of each result the passes give, None where they give None."""
    for g, v in zip(got, want, strict=True):
        assert (g is None) == (v is None)
        if v is not None:
            check(g, v)


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # (the same patch each time)
@given(**CASES)
def test_layer_norm_loops_give_the_passes_bits(small_loops: None, lead: list[int],
                                               lane: list[int], kind: str, radii: str,
                                               special: bool, affine: str, eps: float,
                                               model: str, per_op: bool, seed: int) -> None:
    ctx, x, w, b, shape = _case(lead, lane, kind, radii, special, affine, model, per_op, seed)
    with np.errstate(all="ignore"):
        got = nz.layer_norm_rule(ctx, x, shape, w, b, eps)
        want = _passes(nz.layer_norm_rule, ctx, x, shape, w, b, eps)
    for g, v in zip(got, want, strict=True):
        assert_same_bits(g, v)


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # (the same patch each time)
@given(**BACKWARD, mask=st.sampled_from(MASKS))
def test_layer_norm_backward_loops_give_the_passes_bits(
        small_loops: None, lead: list[int], lane: list[int], kind: str, radii: str,
        special: bool, affine: str, eps: float, model: str, per_op: bool, seed: int,
        grad: str, mask: tuple[bool, bool, bool]) -> None:
    ctx, x, g, w, b, shape = _backward_case(lead, lane, kind, radii, special, affine, model,
                                            per_op, seed, grad)
    with np.errstate(all="ignore"):
        _, mean, rstd = _passes(nz.layer_norm_rule, ctx, x, shape, w, b, eps)
        args = (ctx, g, x, shape, mean, rstd, w, b, mask)
        assert_each(assert_same_bits, nz.layer_norm_backward_rule(*args),
                    _passes(nz.layer_norm_backward_rule, *args))


@pytest.mark.parametrize("shape", [(16, 4096), (3, 20000), (20000, 1), (4, 8, 1024)])
def test_the_loops_run_at_realistic_sizes(shape: tuple[int, ...],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Above LOOP_MIN the loops run (not a fallback) and give the NumPy passes' bits,
    forward and backward."""
    ran: list[str] = []
    for name in ("normalized_rows", "deviation_squares", "norm_backward_products",
                 "input_grad_rows", "deviation_square_sums", "norm_backward_sums",
                 "norm_backward_merged"):
        real = getattr(fused_cpu, name)
        monkeypatch.setattr(fused_cpu, name,
                            lambda *a, _r=real, _n=name: ran.append(_n) or _r(*a))
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).astype(np.float32).astype(np.float64)
    lane = shape[-1:]
    ctx = RuleContext(get_model("fp32"))
    w, b = _affine(rng, lane, "tracked"), _affine(rng, lane, "exact")
    g = _tracked(rng.standard_normal(shape), rng, "all")
    for fold in (False, True):
        monkeypatch.setattr(rows, "FOLD_SUMS", fold)
        check = (lambda a, b: assert_both_sound(a, b, False, x.size)) if fold else \
            assert_same_bits
        for t in (exact(x), _tracked(x, rng, "all")):
            out = nz.layer_norm_rule(ctx, t, lane, w, b, 1e-5)
            for got, want in zip(out, _passes(nz.layer_norm_rule, ctx, t, lane, w, b, 1e-5),
                                 strict=True):
                check(got, want)
            args = (ctx, g, t, lane, out[1], out[2], w, b, (True, True, True))
            for got, want in zip(nz.layer_norm_backward_rule(*args),
                                 _passes(nz.layer_norm_backward_rule, *args), strict=True):
                check(got, want)
    assert ran == ["deviation_squares", "normalized_rows", "norm_backward_products",
                   "input_grad_rows"] * 2 + ["deviation_square_sums", "normalized_rows",
                                             "norm_backward_merged"] * 2


def test_group_norm_statistics_take_the_loops(small_loops: None) -> None:
    rng = np.random.default_rng(5)
    x = _tracked(rng.standard_normal((2, 6, 5, 3)), rng, "some")
    w, b = _affine(rng, (6,), "tracked"), _affine(rng, (6,), "tracked")
    ctx = RuleContext(get_model("bf16"))
    got = nz.group_norm_rule(ctx, x, w, b, 2, 6, 15, 3, 1e-5)
    for g, v in zip(got, _passes(nz.group_norm_rule, ctx, x, w, b, 2, 6, 15, 3, 1e-5),
                    strict=True):
        assert_same_bits(g, v)


def test_other_axes_escalated_and_one_pass_give_the_passes_bits(small_loops: None) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 6, 5))
    ctx = RuleContext(get_model("fp32"))
    assert rows.runs(exact(x), (2,)) and rows.runs(exact(x), (1, 2))
    assert not rows.runs(exact(x), (0, 2))  # batch norm's axes
    low = Tracked(value=x, ref_err=np.zeros_like(x), det=np.zeros_like(x),
                  prob=np.zeros_like(x), mag=np.abs(x), lo=x * 2.0**-60)
    assert not rows.runs(low, (2,))
    one_pass = RuleContext(get_model("fp32").with_(variance="one-pass"))
    for c, t in ((ctx, low), (one_pass, exact(x))):
        for g, v in zip(nz.layer_norm_rule(c, t, (5,), None, None, 1e-5),
                        _passes(nz.layer_norm_rule, c, t, (5,), None, None, 1e-5), strict=True):
            assert_same_bits(g, v)
    bn = nz.batch_norm_rule(ctx, exact(x), None, None, None, None, True, 0.1, 1e-5)
    for g, v in zip(bn, _passes(nz.batch_norm_rule, ctx, exact(x), None, None, None, None,
                                True, 0.1, 1e-5), strict=True):
        assert_same_bits(g, v)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # (the same patch each time)
@given(**BACKWARD, mask=st.sampled_from(MASKS))
def test_folded_sums_agree_with_the_passes(
        folded_loops: None, lead: list[int], lane: list[int], kind: str, radii: str,
        special: bool, affine: str, eps: float, model: str, per_op: bool, seed: int,
        grad: str, mask: tuple[bool, bool, bool]) -> None:
    """The sums folded into the loops against the primitives' passes, forward and
    backward: the same results up to both sides' reference radii, radii within 2^-9
    (``S`` summed in float64, where the contraction sums it in float32)."""
    ctx, x, g, w, b, shape = _backward_case(lead, lane, kind, radii, special, affine, model,
                                            per_op, seed, grad)

    def sound(got: Tracked, want: Tracked) -> None:
        assert_both_sound(got, want, per_op, x.value.size)
    with np.errstate(all="ignore"):
        want = _passes(nz.layer_norm_rule, ctx, x, shape, w, b, eps)
        assert_each(sound, nz.layer_norm_rule(ctx, x, shape, w, b, eps), want)
        args = (ctx, g, x, shape, want[1], want[2], w, b, mask)
        assert_each(sound, nz.layer_norm_backward_rule(*args),
                    _passes(nz.layer_norm_backward_rule, *args))


@settings(max_examples=60, deadline=None)
@given(rows_=st.integers(1, 6), k=st.integers(1, 300), radii=st.sampled_from(["all", "some"]),
       scale=st.sampled_from([1.0, 1e-300, 1e200]), model=st.sampled_from(MODELS),
       seed=st.integers(0, 2**32 - 1))
def test_sum_of_parts_bounds_the_exact_sum(rows_: int, k: int, radii: str, scale: float,
                                           model: str, seed: int) -> None:
    """``sum_of_parts`` from float64 sums taken in another order than the contraction's:
    the value within its reference radius of the exact sum of the terms (plus their
    own reference radii), the radii and ``S`` within 2^-9 of ``sum_``'s, and None
    where the contraction must decide (a term not finite, no det, inputs rounded)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows_, k)) * scale
    t = _tracked(x, rng, radii)
    m = get_model(model)
    parts = np.stack([x[:, ::-1].sum(axis=1), np.abs(x).sum(axis=1),
                      *(np.broadcast_to(a, x.shape).sum(axis=1)
                        for a in (t.det, t.prob, t.ref_err))], axis=-1)
    got = sum_of_parts(parts, k, m)
    if m.summing().rounds_inputs or not np.any(np.broadcast_to(t.det, x.shape) > 0):
        assert got is None
        return
    if got is None:  # the float64 reference not precise enough: the contraction escalates
        return
    # the value's distance from the exact sum of the terms (rounded once: fsum)
    off = np.array([math.fsum([v, *(-r)]) for v, r in zip(got.value, x, strict=True)])
    assert np.all(np.abs(off) <= got.ref_err)
    want = sum_(t, -1, m)
    assert np.all(np.abs(got.value - want.value) <= got.ref_err + want.ref_err)
    for f in ("det", "prob", "ref_err", "mag"):
        a, c = np.asarray(getattr(got, f)), np.asarray(getattr(want, f))
        assert np.all(np.abs(a - c) <= 2.0**-9 * c + (k + 1) * 2.0**-124), f
    bad = parts.copy()
    bad[0, 2] = np.inf
    assert sum_of_parts(bad, k, m) is None


@settings(max_examples=200, deadline=None)
@given(v=st.floats(allow_nan=True, allow_infinity=True) | st.floats(-1e6, 1e6).map(
    lambda f: float(np.float32(f))) | st.integers(-(2**30), 2**30).map(float),
    t=st.sampled_from([7, 10, 23, 52]))
def test_finer_only_where_no_value_of_the_format(v: float, t: int) -> None:
    """``_finer`` (the exact tests' pre-filter) is True only where ``_representable``
    is False for the format of ``t`` fraction bits (whatever its range: every format
    of the models, and float64's own, which nothing is finer than)."""
    from numoracle.oracle import _numba_loops, _numba_norm  # noqa: PLC0415 - numba's

    for emin, fmax in ((-126, 3.4028234663852886e38), (-14, 65504.0), (-1022, 1.8e308)):
        if _numba_norm._finer(v, t):
            assert not _numba_loops._representable(v, t, emin, fmax), (v, t, emin)
    assert not _numba_norm._finer(v, 52)


def test_finer_filters_products_of_singles() -> None:
    """Products of two float32 values with full significands are finer than float32
    (the pre-filter skips their exact test) and those of small integers not."""
    from numoracle.oracle import _numba_norm  # noqa: PLC0415 - numba's

    rng = np.random.default_rng(11)
    a, b = (rng.standard_normal(1000).astype(np.float32).astype(np.float64) for _ in range(2))
    assert sum(_numba_norm._finer(float(x * y), 23) for x, y in zip(a, b, strict=True)) > 990
    assert not any(_numba_norm._finer(float(x * y), 23) for x in range(-40, 40)
                   for y in (3.0, -0.5, 7.0, 1024.0))


@pytest.mark.parametrize("exact_rows", [0, 3, 16])
def test_weighted_exact_test_gives_the_passes_bits(exact_rows: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Backward with an exact gradient and weight whose products are exact in some rows
    (small integers) and not in the others (float32 values): the loops' exact test of
    ``g w`` (its pre-filter skipping the rows of no exact product) gives the passes'
    bits, folded or not."""
    monkeypatch.setattr(fused_cpu, "LOOP_MIN", 1)
    rng = np.random.default_rng(exact_rows)
    shape = (16, 300)
    x = rng.standard_normal(shape).astype(np.float32).astype(np.float64)
    g = rng.standard_normal(shape).astype(np.float32).astype(np.float64)
    g[:exact_rows] = rng.integers(-8, 8, (exact_rows, shape[1]))
    w = np.where(rng.random(shape[1]) < 0.5, rng.integers(-4, 4, shape[1]),
                 rng.standard_normal(shape[1]).astype(np.float32))
    ctx = RuleContext(get_model("fp32"))
    for fold in (False, True):
        monkeypatch.setattr(rows, "FOLD_SUMS", fold)
        out = nz.layer_norm_rule(ctx, exact(x), (shape[1],), exact(w), None, 1e-5)
        args = (ctx, exact(g), exact(x), (shape[1],), out[1], out[2], exact(w), None,
                (True, True, False))
        got, want = nz.layer_norm_backward_rule(*args), _passes(nz.layer_norm_backward_rule,
                                                                *args)
        if fold:
            assert_both_sound(got[0], want[0], False, x.size)
        else:
            assert_same_bits(got[0], want[0])
            assert_same_bits(got[1], want[1])


def _two_loops(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` with layer norm's backward in its two loops (the sums, then the
    input gradient after the means' passes), not the merged one."""
    orig = rows.backward_merged
    rows.backward_merged = lambda *a: None
    try:
        return fn(*args)
    finally:
        rows.backward_merged = orig


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # (the same patch each time)
@given(**BACKWARD,
       mask=st.sampled_from([(True, True, True), (True, False, False), (True, True, False)]))
def test_layer_norm_backward_in_one_pass_gives_the_two_loops_bits(
        folded_loops: None, lead: list[int], lane: list[int], kind: str, radii: str,
        special: bool, affine: str, eps: float, model: str, per_op: bool, seed: int,
        grad: str, mask: tuple[bool, bool, bool]) -> None:
    """The merged pass (each row's means finished in the loop) against the sums' loop,
    the means' passes and the input gradient's loop: the same bits, or the merged
    pass declines (then the two loops run): drawn shapes, values (NaN, infinities,
    huge, tiny, zero rows, integers), radii, claims."""
    ctx, x, g, w, b, shape = _backward_case(lead, lane, kind, radii, special, affine, model,
                                            per_op, seed, grad)
    with np.errstate(all="ignore"):
        _, mean, rstd = nz.layer_norm_rule(ctx, x, shape, w, b, eps)
        args = (ctx, g, x, shape, mean, rstd, w, b, mask)
        assert_each(assert_same_bits, nz.layer_norm_backward_rule(*args),
                    _two_loops(nz.layer_norm_backward_rule, *args))


@pytest.mark.parametrize("weight", ["none", "exact", "tracked"])
@pytest.mark.parametrize("grad", ["exact", "all"])
def test_layer_norm_backward_takes_the_one_pass(folded_loops: None, weight: str,
                                                grad: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Ordinary rows take the merged pass (it does not decline) and give the two
    loops' bits; a row of NaN makes a mean's sum undecided there, and an exact
    gradient without a weight has a sum of ``g`` whose det is 0 everywhere (the
    contraction's exact regime decides it): the two loops run."""
    calls: list[bool] = []
    real = fused_cpu.norm_backward_merged
    monkeypatch.setattr(fused_cpu, "norm_backward_merged",
                        lambda *a: (lambda r: calls.append(r is not None) or r)(real(*a)))
    rng = np.random.default_rng(3)
    shape = (12, 257)
    x = _tracked(rng.standard_normal(shape).astype(np.float32).astype(np.float64), rng,
                 "some")
    g = _tracked(rng.standard_normal(shape), rng, grad)
    w = _affine(rng, shape[1:], weight)
    ctx = RuleContext(get_model("bf16"))
    for bad_row in (False, True):
        if bad_row:
            g = Tracked(value=np.where(np.arange(shape[0])[:, None] == 5, np.nan, g.value),
                        ref_err=g.ref_err, det=g.det, prob=g.prob, mag=g.mag, n=g.n)
        _, mean, rstd = nz.layer_norm_rule(ctx, x, shape[1:], w, None, 1e-5)
        args = (ctx, g, x, shape[1:], mean, rstd, w, None, (True, True, True))
        with np.errstate(all="ignore"):
            assert_each(assert_same_bits, nz.layer_norm_backward_rule(*args),
                        _two_loops(nz.layer_norm_backward_rule, *args))
    assert calls == [not (grad == "exact" and weight == "none"), False]
