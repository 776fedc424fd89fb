"""Special values carried as IEEE carries them (numoracle.oracle.traced.library.ieee):
masked softmax rows judged on their unmasked entries, fully masked rows by the
claimed convention, max pooling's -inf windows and NaN ties, and causal-mask bugs
caught end to end."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import torch
from traced_rulecheck import RuleCase, check

from benchmarks.traced import specials as bench
from numoracle import check_kernel
from numoracle.checking.verdict import compare
from numoracle.errors import InvalidArgument
from numoracle.oracle.precision import get_model
from numoracle.oracle.traced import Claims, RuleContext, lookup
from numoracle.oracle.traced.library import ieee
from numoracle.oracle.traced.library._common import as_judged
from numoracle.oracle.tracked import Tracked, exact

INF, NAN = float("inf"), float("nan")
FP32 = get_model("fp32")
G = torch.Generator().manual_seed(11)


def _masked(rows: int, n: int, fully: int | None = None) -> torch.Tensor:
    x = torch.randn(rows, n, generator=G)
    keep = torch.ones(rows, n, dtype=torch.bool).tril()
    if fully is not None:
        keep[fully] = False
    return x.masked_fill(~keep, -INF)


def mp_masked_softmax(lane: list, empty: object) -> list:
    e = [mpmath.exp(v) for v in lane]
    s = mpmath.fsum(e)
    return [empty] * len(lane) if s == 0 else [v / s for v in e]


def _along(f, x):
    out = np.empty(x.shape, dtype=object)
    for i in range(x.shape[0]):
        out[i] = np.array(f(list(x[i])) + [None], dtype=object)[:-1]
    return out


CASES = [
    RuleCase("aten._safe_softmax.default", (_masked(5, 6, fully=2), -1),
             mp=lambda x, d: _along(lambda ln: mp_masked_softmax(ln, mpmath.mpf(0)), x)),
    RuleCase("aten._softmax.default", (_masked(5, 6), -1, False),
             mp=lambda x, d, h: _along(lambda ln: mp_masked_softmax(ln, None), x), id="masked"),
    RuleCase("aten._log_softmax.default", (_masked(5, 6), -1, False),
             mp=lambda x, d, h: _along(
                 lambda ln: [v - mpmath.log(mpmath.fsum(mpmath.exp(w) for w in ln))
                             for v in ln], x), id="masked"),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_rule(case: RuleCase) -> None:
    check(case)


def _t(*values: float, radius: float = 0.0) -> Tracked:
    t = exact(np.array(values, dtype=np.float64))
    r = np.full(t.value.shape, radius)
    return Tracked(value=t.value, ref_err=np.zeros(t.value.shape), det=r, prob=r.copy(),
                   mag=np.abs(t.value))


def test_ieee_results_are_exact_where_the_special_value_decides() -> None:
    e = ieee.exp(_t(-INF, INF, NAN), FP32)
    np.testing.assert_array_equal(e.value, [0.0, INF, NAN])
    assert not e.det.any()
    s = ieee.sub(_t(-INF, INF, 1.0), _t(2.0, 2.0, NAN, radius=1e-3), FP32)
    np.testing.assert_array_equal(s.value[:2], [-INF, INF])
    assert np.isnan(s.value[2]) and not s.det.any()  # NaN spreads, whatever its partner
    z = ieee.mul(_t(0.0, 0.0), _t(3.0, -INF, radius=0.0), FP32)
    assert z.value[0] == 0.0 and z.det[0] == 0.0 and np.isnan(z.value[1])
    q = ieee.div(_t(0.0, 1.5, 0.0), _t(2.0, INF, 0.0), FP32)
    assert q.value[0] == 0.0 and q.value[1] == 0.0 and not q.det[:2].any()
    assert np.isnan(q.value[2]) and q.det[2] == 0.0  # 0 / 0 of both signs: NaN


def test_ieee_leaves_undecided_what_an_interval_may_change() -> None:
    # inf times a number that may be 0 or of either sign; 0 over a divisor that may be 0;
    # x / 0 (its sign is the zero's)
    m = ieee.mul(_t(INF), _t(0.0, radius=1e-3), FP32)
    assert not (m.det == 0).all()
    d = ieee.div(_t(0.0, 1.0), _t(0.0, 0.0, radius=1e-3), FP32)
    assert not (d.det[0] == 0)
    d0 = ieee.div(_t(1.0), _t(0.0), FP32)
    assert not (d0.det == 0).all()


def _softmax(x: torch.Tensor, claims: Claims = Claims(), op: str = "_softmax") -> Tracked:
    args = (exact(x.double().numpy()), -1) + ((False,) if op == "_softmax" else ())
    return lookup(f"aten.{op}.default")(RuleContext(FP32, claims), *args)


def test_masked_entries_are_exact_zeros_and_the_rest_has_a_finite_bound() -> None:
    x = _masked(6, 6)
    out = _softmax(x)
    masked = np.isneginf(x.numpy())
    assert (out.value[masked] == 0).all() and (out.det[masked] == 0).all()
    assert np.isfinite(out.det[~masked]).all() and (out.det[~masked] < 1e-5).all()


@pytest.mark.parametrize(("op", "claim", "expect"), [
    ("_softmax", None, "nan"), ("_safe_softmax", None, "zero"),
    ("_softmax", "zero", "zero"), ("_safe_softmax", "nan", "nan")])
def test_a_fully_masked_row_gives_the_claimed_convention(op: str, claim: str | None,
                                                         expect: str) -> None:
    x = _masked(4, 5, fully=1)
    out = _softmax(x, Claims(masked_rows=claim), op)
    row = out.value[1]
    assert (np.isnan(row) if expect == "nan" else row == 0).all()
    assert (out.det[1] == 0).all()
    assert np.isfinite(out.value[0]).all()


def test_masked_rows_claim_is_checked() -> None:
    with pytest.raises(InvalidArgument, match="masked_rows"):
        Claims(masked_rows="ignore")


def test_a_row_holding_inf_is_nan_there_and_unjudged_elsewhere() -> None:
    x = torch.tensor([[0.5, INF, -1.0], [0.1, 0.2, 0.3]])
    out = _softmax(x)
    assert np.isnan(out.value[0, 1]) and out.det[0, 1] == 0
    assert np.isnan(out.det[0, [0, 2]]).all()  # 0 or NaN by formulation
    assert np.isfinite(out.det[1]).all()


def test_max_pool_of_a_window_of_minus_inf_routes_to_a_real_tap() -> None:
    x = torch.full((1, 1, 3, 3), -INF)
    x[0, 0, 2, 2] = 1.0
    ctx = RuleContext(FP32)
    _, idx = lookup("aten.max_pool2d_with_indices.default")(
        ctx, exact(x.double().numpy()), [2, 2], [1, 1], [1, 1])
    assert (np.asarray(idx) >= 0).all()
    _, torch_idx = torch.nn.functional.max_pool2d(x, 2, 1, 1, return_indices=True)
    assert idx.admits(torch_idx.numpy()).all()


def test_torch_max_pool_with_special_values_and_gradients_passes() -> None:
    kernel, spec = bench.CORRECT["max_pool2d with gradient and special values, torch"]
    check_kernel(kernel, backend="torch-cpu", examples=40, seed=0, store=None,
                 name="max_pool_torch", **spec)


@pytest.mark.parametrize("name", list(bench.MUTANTS))
def test_causal_mask_bugs_are_caught(name: str) -> None:
    kernel, spec = bench.MUTANTS[name]
    with pytest.raises(AssertionError, match="logic bug"):
        check_kernel(kernel, backend="torch-cpu", examples=20, seed=0, store=None,
                     name=kernel.__name__, **spec)


@pytest.mark.parametrize("name", ["padded softmax, by hand", "padded attention, by hand",
                                  "causal attention, online softmax by hand"])
def test_correct_masked_kernels_pass(name: str) -> None:
    kernel, spec = bench.CORRECT[name]
    check_kernel(kernel, backend="torch-cpu", examples=20, seed=0, store=None,
                 name=kernel.__name__, **spec)


@pytest.mark.parametrize("pick", [0, 1])
def test_every_admissible_index_passes_strictly(pick: int) -> None:
    """The farthest of tied indices (and NaN's last, as torch's CPU picks it) is an
    answer like the nearest: its ratio stays below 1."""
    x = torch.tensor([[1.0, 1.0, 0.5], [NAN, NAN, 0.0]])
    _, idx = lookup("aten.max.dim")(RuleContext(FP32), exact(x.double().numpy()), 1)
    got = np.array([pick, pick], dtype=np.float64)
    verdict = compare("indices", got, as_judged(idx))
    assert verdict.passed and verdict.worst_ratio < 1.0
    wrong = compare("indices", np.array([2.0, 2.0]), as_judged(idx))
    assert not wrong.passed


@pytest.mark.parametrize(("claim", "nan"), [(None, False), ("nan", True)])
def test_logsumexp_of_a_row_of_minus_inf(claim: str | None, nan: bool) -> None:
    x = exact(np.array([[-INF, -INF], [0.5, -INF]]))
    out = lookup("aten.logsumexp.default")(RuleContext(FP32, Claims(masked_rows=claim)), x, [1])
    assert (np.isnan(out.value[0]) if nan else out.value[0] == -INF) and out.det[0] == 0
    assert abs(out.value[1] - 0.5) < 1e-15 and np.isfinite(out.det[1])


@pytest.mark.parametrize("namespace", ["numpy", "torch"])
def test_special_points_are_the_exact_zeros_and_infinities_and_the_bounded_nans(
        namespace: str) -> None:
    """Every pairing of special and ordinary values with special and ordinary radii:
    radius 0 and the value 0 or infinite, or a NaN value with a finite radius."""
    from numoracle.oracle.xp import namespace_named, to_numpy  # noqa: PLC0415

    values = [0.0, -0.0, INF, -INF, NAN, 1.0, -2.5, 2.0**-1074, -2.0**-1074, 3 * 2.0**-1074,
              2.0**-1022, 1.7e308, -1.7e308]
    radii = [0.0, -0.0, INF, NAN, 1.0, 2.0**-1074, 1e300]
    v, det, ref = (a.reshape(-1) for a in np.meshgrid(values, radii, radii, indexing="ij"))
    r = det + ref
    want = ((r == 0) & ((v == 0) | np.isinf(v))) | (np.isnan(v) & np.isfinite(r))
    xp = namespace_named(namespace)
    put = (lambda a: a) if xp is np else (lambda a: xp.asarray(torch.from_numpy(a.copy())))
    t = Tracked(value=put(v), ref_err=put(ref), det=put(det), prob=put(det),
                mag=put(np.abs(v)), n=1)
    np.testing.assert_array_equal(np.asarray(to_numpy(ieee.special_points(t))), want)
