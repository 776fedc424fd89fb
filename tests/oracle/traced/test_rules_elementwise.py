"""The elementwise rules against torch float32 and mpmath (see traced_rulecheck)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch
from traced_rulecheck import RuleCase, check, mp_array, mpmap

from numoracle.oracle.traced import Claims

G = torch.Generator().manual_seed(31)


def rnd(*shape: int, scale: float = 3.0) -> torch.Tensor:
    return (torch.randn(*shape, generator=G) * scale).float()


#: random values plus the special ones: zeros of both signs, tiny, huge, integers
SPECIAL = torch.tensor([0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -3.0, 1e-30, -1e-30, 80.0, -80.0,
                        1e-3, 7.25, -0.1], dtype=torch.float32)


def vals(n: int = 24, scale: float = 3.0) -> torch.Tensor:
    return torch.cat([rnd(n, scale=scale), SPECIAL])


def pos(n: int = 24) -> torch.Tensor:
    return torch.cat([rnd(n).abs() + 1e-3, torch.tensor([1.0, 4.0, 1e-20, 1e20, 0.25])])


def mpf_map(f):
    return lambda x, *a, **k: mpmap(f, x)


def gelu_mp(x, approximate="none"):
    if approximate == "none":
        return mpmap(lambda v: v / 2 * (1 + mpmath.erf(v / mpmath.sqrt(2))), x)
    c = mpmath.sqrt(2 / mpmath.pi)
    return mpmap(lambda v: v / 2 * (1 + mpmath.tanh(c * (v + mpmath.mpf("0.044715") * v**3))), x)


def where_mp(c, a, b):
    return np.where(c, a, b)


def _ew(f2):
    """A binary mpmath op broadcast like NumPy over object arrays."""
    def run(a, b, **kw):
        if not isinstance(b, np.ndarray):
            b = mpmath.mpf(b) if isinstance(b, float) else b
        if not isinstance(a, np.ndarray):
            a = mpmath.mpf(a) if isinstance(a, float) else a
        alpha = kw.get("alpha", 1)
        return f2(a, b, alpha)
    return run


a24, b24 = vals(), vals()
a2d, b_row = rnd(5, 7), rnd(7)
CASES = [
    RuleCase("aten.add.Tensor", (a24, b24), mp=_ew(lambda a, b, al: a + al * b)),
    RuleCase("aten.add.Tensor", (a2d, b_row), {"alpha": 0.3}, mp=_ew(
        lambda a, b, al: a + mpmath.mpf(al) * b), id="alpha-broadcast"),
    RuleCase("aten.add.Tensor", (a24, 0.1), mp=_ew(lambda a, b, al: a + mpmath.mpf(0.1)),
             id="scalar"),
    RuleCase("aten.add.Scalar", (a24, 2.0), mp=_ew(lambda a, b, al: a + 2)),
    RuleCase("aten.sub.Tensor", (a24, b24), mp=_ew(lambda a, b, al: a - b)),
    RuleCase("aten.sub.Tensor", (torch.tensor(1.0), torch.tensor(0.3)),
             mp=_ew(lambda a, b, al: a - b), id="zero-dim"),
    RuleCase("aten.sub.Scalar", (a24, 0.7), mp=_ew(lambda a, b, al: a - mpmath.mpf(0.7))),
    RuleCase("aten.rsub.Scalar", (a24, 1.0), mp=_ew(lambda a, b, al: 1 - a)),
    RuleCase("aten.mul.Tensor", (a24, b24), mp=_ew(lambda a, b, al: a * b)),
    RuleCase("aten.mul.Tensor", (a24, 0.1), mp=_ew(lambda a, b, al: a * mpmath.mpf(0.1)),
             id="scalar"),
    RuleCase("aten.mul.Scalar", (a24, 4.0), mp=_ew(lambda a, b, al: a * 4)),
    RuleCase("aten.div.Tensor", (a24, pos(33) * torch.sign(vals() + 0.01)),
             mp=_ew(lambda a, b, al: a / b)),
    RuleCase("aten.div.Tensor", (a24, torch.tensor(3.0)), mp=_ew(lambda a, b, al: a / 3),
             id="zero-dim-divisor"),
    RuleCase("aten.div.Tensor", (a24, 7.0), mp=_ew(lambda a, b, al: a / 7), id="scalar"),
    RuleCase("aten.div.Scalar", (a24, 0.25), mp=_ew(lambda a, b, al: a * 4)),
    RuleCase("aten.reciprocal.default", (pos(),), mp=mpf_map(lambda v: 1 / v)),
    RuleCase("aten.neg.default", (a24,), mp=mpf_map(lambda v: -v)),
    RuleCase("aten.abs.default", (a24,), mp=mpf_map(abs)),
    RuleCase("aten.relu.default", (a24,), mp=mpf_map(lambda v: max(v, 0))),
    RuleCase("aten.clamp.default", (a24, -1.5, 0.3),
             mp=lambda x, lo, hi: mpmap(lambda v: min(max(v, mpmath.mpf(lo)), mpmath.mpf(hi)), x)),
    RuleCase("aten.clamp.Tensor", (a24, rnd(38), None), mp=lambda x, lo, hi: np.maximum(x, lo)),
    RuleCase("aten.clamp_min.default", (a24, 0.5), mp=lambda x, c: mpmap(lambda v: max(v, c), x)),
    RuleCase("aten.clamp_min.Tensor", (a24, torch.tensor(0.5)),
             mp=lambda x, c: np.maximum(x, c)),
    RuleCase("aten.clamp_min_.Tensor", (a24, torch.tensor(0.5)),
             mp=lambda x, c: np.maximum(x, c)),
    RuleCase("aten.sign.default", (a24,), mp=mpf_map(mpmath.sign)),
    RuleCase("aten.clamp_max.default", (a24, 0.5), mp=lambda x, c: mpmap(lambda v: min(v, c), x)),
    RuleCase("aten.clamp_max.Tensor", (a24, torch.tensor(0.5)),
             mp=lambda x, c: np.minimum(x, c)),
    RuleCase("aten.hardtanh.default", (a24, -0.5, 2.0),
             mp=lambda x, lo, hi: mpmap(lambda v: min(max(v, lo), hi), x)),
    RuleCase("aten.maximum.default", (a24, b24), mp=lambda a, b: np.maximum(a, b)),
    RuleCase("aten.minimum.default", (a24, b24), mp=lambda a, b: np.minimum(a, b)),
    RuleCase("aten.leaky_relu.default", (a24, 0.01),
             mp=lambda x, s: mpmap(lambda v: v if v > 0 else mpmath.mpf(s) * v, x)),
    RuleCase("aten.threshold.default", (a24, 0.5, -2.0),
             mp=lambda x, t, val: mpmap(lambda v: v if v > t else mpmath.mpf(val), x)),
    RuleCase("aten.elu.default", (a24, 1.0, 1.0, 1.0),
             mp=lambda x, al, sc, ins: mpmap(lambda v: v if v > 0 else mpmath.expm1(v), x)),
    RuleCase("aten.elu.default", (a24, 1.6732632423543772, 1.0507009873554805, 1.0),
             mp=lambda x, al, sc, ins: mpmap(lambda v: mpmath.mpf(sc) * (
                 v if v > 0 else mpmath.mpf(al) * mpmath.expm1(v)), x), id="selu"),
    RuleCase("aten.exp.default", (vals(scale=4),), mp=mpf_map(mpmath.exp)),
    RuleCase("aten.log.default", (pos(),), mp=mpf_map(mpmath.log)),
    RuleCase("aten.log2.default", (pos(),), mp=mpf_map(lambda v: mpmath.log(v, 2))),
    RuleCase("aten.log1p.default", (pos() - 0.5,), mp=mpf_map(mpmath.log1p)),
    RuleCase("aten.expm1.default", (vals(),), mp=mpf_map(mpmath.expm1)),
    RuleCase("aten.sqrt.default", (pos(),), mp=mpf_map(mpmath.sqrt)),
    RuleCase("aten.rsqrt.default", (pos(),), mp=mpf_map(lambda v: 1 / mpmath.sqrt(v))),
    RuleCase("aten.sigmoid.default", (vals(),), mp=mpf_map(lambda v: 1 / (1 + mpmath.exp(-v)))),
    RuleCase("aten.silu.default", (vals(),), mp=mpf_map(lambda v: v / (1 + mpmath.exp(-v)))),
    RuleCase("aten.tanh.default", (vals(),), mp=mpf_map(mpmath.tanh)),
    RuleCase("aten.erf.default", (vals(scale=1.5),), mp=mpf_map(mpmath.erf)),
    RuleCase("aten.gelu.default", (vals(),), mp=gelu_mp),
    RuleCase("aten.gelu.default", (vals(),), {"approximate": "tanh"}, mp=gelu_mp, id="tanh"),
    RuleCase("aten.pow.Tensor_Scalar", (vals(), 2), mp=lambda x, p: mpmap(lambda v: v**2, x)),
    RuleCase("aten.pow.Tensor_Scalar", (vals(), 3.0), mp=lambda x, p: mpmap(lambda v: v**3, x),
             id="cube"),
    RuleCase("aten.pow.Tensor_Scalar", (pos(), 0.5), mp=lambda x, p: mpmap(mpmath.sqrt, x),
             id="sqrt"),
    RuleCase("aten.pow.Tensor_Scalar", (pos(), -0.5), mp=lambda x, p: mpmap(
        lambda v: 1 / mpmath.sqrt(v), x), id="rsqrt"),
    RuleCase("aten.pow.Tensor_Scalar", (pos(), -1), mp=lambda x, p: mpmap(lambda v: 1 / v, x),
             id="reciprocal"),
    RuleCase("aten.pow.Tensor_Scalar", (pos()[:20], 1.7),
             mp=lambda x, p: mpmap(lambda v: v ** mpmath.mpf(p), x), id="general"),
    RuleCase("aten.where.self", (a24 > 0, a24, b24), mp=where_mp),
    RuleCase("aten.where.ScalarOther", (a24 > 0, a24, 0.0),
             mp=lambda c, a, b: np.where(c, a, mpmath.mpf(0))),
    RuleCase("aten.where.ScalarSelf", (a24 > 0, 1.0, a24),
             mp=lambda c, a, b: np.where(c, mpmath.mpf(1), b)),
]
for _cmp in ("gt", "lt", "ge", "le", "eq", "ne"):
    CASES.append(RuleCase(f"aten.{_cmp}.Tensor", (a24, torch.where(a24 > 1, a24, b24))))
    CASES.append(RuleCase(f"aten.{_cmp}.Scalar", (a24, 0.5)))
CASES += [
    RuleCase("aten.logical_not.default", (a24 > 0,)),
    RuleCase("aten.logical_and.default", (a24 > 0, b24 > 0)),
    RuleCase("aten.logical_or.default", (a24 > 0, b24 > 0)),
    RuleCase("aten.bitwise_and.Tensor", (a24 > 0, b24 > 0)),
    RuleCase("aten.bitwise_or.Tensor", (a24 > 0, b24 > 0)),
    RuleCase("aten.where.Scalar", (a24 > 0, 1.0, 0.1),
             mp=lambda c, a, b: np.where(c, mpmath.mpf(1), mpmath.mpf(0.1))),
    RuleCase("aten.isnan.default", (torch.tensor([1.0, float("nan"), 0.0]),)),
    RuleCase("aten.isinf.default", (torch.tensor([1.0, float("inf"), -float("inf")]),)),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_rule(case: RuleCase) -> None:
    check(case)


def test_ulps_claim_widens_the_bound() -> None:
    x = vals()
    tight = check(RuleCase("aten.tanh.default", (x,), mp=mpf_map(mpmath.tanh)))[0]
    fast = check(RuleCase("aten.tanh.default", (x,), claims=Claims(ulps={"tanh": 64.0}),
                          mp=mpf_map(mpmath.tanh)))[0]
    assert (fast.det >= tight.det).all() and (fast.det > tight.det).any()


def test_gelu_tanh_is_not_gelu_erf() -> None:
    """The tanh form is a different function: where the two differ by more than the
    erf form's bound, a tanh-GELU kernel fails the erf rule."""
    x = torch.linspace(-4, 4, 81)
    r = check(RuleCase("aten.gelu.default", (x,), mp=gelu_mp))[0]
    tanh_form = torch.nn.functional.gelu(x, approximate="tanh").double().numpy()
    assert (np.abs(tanh_form - r.value) > r.det + r.ref_err).any()


def test_exact_regime() -> None:
    """Integers in float32: add, mul, relu and where are exact (bound 0)."""
    a = torch.arange(-8, 8, dtype=torch.float32)
    for name, args in (("aten.add.Tensor", (a, a)), ("aten.mul.Tensor", (a, a)),
                       ("aten.relu.default", (a,)), ("aten.mul.Scalar", (a, 0.5))):
        out = check(RuleCase(name, args, sharp=False))[0]
        assert out.is_exact, name


def test_unsure_comparison_widens_where() -> None:
    """A comparison of an inexact value near its threshold is unsure; where then
    covers both branches."""
    x = torch.tensor([0.1, 5.0], dtype=torch.float32)
    ctx_case = RuleCase("aten.exp.default", (x,))
    e = check(ctx_case)[0]
    from numoracle.oracle.precision import get_model
    from numoracle.oracle.traced import RuleContext, lookup
    ctx = RuleContext(get_model("fp32"))
    thr = float(e.value[0])
    c = lookup("aten.gt.Scalar")(ctx, e, thr)
    assert c.unsure[0] and not c.unsure[1]
    zero = lookup("aten.zeros_like.default")(ctx, e)
    w = lookup("aten.where.self")(ctx, c, e, zero)
    assert w.det[0] >= thr and w.det[1] == e.det[1]
    assert math.isfinite(float(w.det[0]))


def test_mp_array_is_exact() -> None:
    assert mp_array(torch.tensor([0.1]))[0] == mpmath.mpf(float(np.float32(0.1)))


def test_anything_times_exact_zero_is_unjudged() -> None:
    """A value the kernel may hold as anything (an overflowed intermediate: infinite
    radius) times an exact 0 may be NaN in the kernel (inf * 0): not judged, never
    claimed exactly 0."""
    from numoracle.oracle.elementwise import mul
    from numoracle.oracle.precision import get_model
    from numoracle.oracle.tracked import Tracked, exact

    wild = Tracked(value=np.array([1.0, 1.0]), ref_err=np.zeros(2), det=np.array([np.inf, 0.0]),
                   prob=np.array([np.inf, 0.0]), mag=np.ones(2))
    out = mul(wild, exact(np.array([0.0, 0.0])), get_model("fp32"))
    assert np.isnan(out.det[0]) and out.det[1] == 0.0
