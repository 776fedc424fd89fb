"""Rules for ATen's elementwise ops: correctly rounded arithmetic, comparisons and
selection, the piecewise activations and the transcendentals.

Arithmetic (``add``, ``sub``, ``mul``, ``div``) is rounded once in the
accumulation format (:mod:`numoracle.oracle.elementwise`,
:func:`numoracle.oracle.tracked.add`), exact where the inputs are exact and the
result representable. A Python number operand is what the kernel sees in its
accumulation format (:func:`._common.scalar`); a division by a single number may
be a multiplication by its rounded reciprocal (torch's CPU kernels do so), so it
is bounded as both roundings.

Selections (``relu``, ``clamp``, ``hardtanh``, ``maximum``) round nothing and are
1-Lipschitz: the radius passes through. A piecewise function (``leaky_relu``,
``elu``, ``threshold``) whose branch a kernel may choose differently (the input
lies within its radius of the edge) is bounded by its Lipschitz constant times
the radius plus the larger of the branches' evaluation errors, or, where it
jumps (``threshold``), by the jump.

Transcendentals are :func:`~numoracle.oracle.elementwise.elementary` functions
with a Lipschitz bound over the input's interval and the kernel's claimed ulps
(``ctx.model.error_of``: a per-function claim, else the accuracy profile's
figure; defaults in :data:`ULPS`, the CUDA maths library's
documented errors plus one rounding per further operation). GELU's erf form and
tanh form are different functions, never one another's approximation; both are
bounded relative to ``|x|``, the magnitude of the terms of their usual formula
``x/2 (1 + erf(x/sqrt 2))``, which cancels for large negative ``x``.

Comparisons return a :class:`._common.Decision` (in torch's namespace a boolean
array of the device, :func:`._common.decided`); ``where`` covers both branches
where the decision is unsure.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from ... import elementwise as ew
from ...accuracy import Ulps
from ...tracked import Tracked, aligned, bounded, folded, moved, relu
from ...xp import array_module, like, special
from ..rules import NoRule, RuleContext, rule
from . import ieee
from .ieee import add, sub
from ._common import (
    as_tracked,
    decided,
    is_tracked,
    on_host,
    reach,
    scalar,
    scaled,
    torch_array,
    unsure_of,
)

__all__ = ["ULPS", "ulps"]

#: default ulps of the functions the rules here evaluate (see the module docstring)
ULPS: dict[str, float] = {
    "tanh": 2.0,        # tanhf
    "erf": 2.0,         # erff
    "log1p": 2.0,       # log1pf
    "expm1": 2.0,       # expm1f
    "rsqrt": 2.0,       # rsqrtf, or 1 / sqrtf: two roundings
    "log2": 2.0,        # log2f
    "pow": 4.0,         # powf 2, through exp/log of a general exponent
    "gelu": 4.0,        # x/2 (1 + erff(x/sqrt 2)): erff 2 plus three roundings, of |x|
    "gelu_tanh": 6.0,   # x/2 (1 + tanhf(c (x + a x^3))): tanhf 2, the cubic, of |x|
    "elu": 4.0,         # alpha (expm1f(x)): expm1f 2 plus the scalings
}


def ulps(ctx: RuleContext, name: str) -> float | Ulps:
    """The error a kernel claims for ``name``: a per-function claim, else its
    accuracy profile's (the library default here, plus the profile's excess)."""
    err = ctx.ulps(name, ULPS[name] if name in ULPS else ew.ULPS[name])
    assert err is not None
    return err


def _np(x: Any) -> bool:
    return (isinstance(x, np.ndarray) or torch_array(x)) and not is_tracked(x)


def _all_plain(*xs: Any) -> bool:
    """No operand is tracked (integer/boolean arrays and numbers): exact NumPy, a
    mask of torch's namespace brought to the host (:func:`_hosted`)."""
    return not any(is_tracked(x) for x in xs) and any(_np(x) for x in xs)


def _hosted(x: Any) -> Any:
    """An operand of exact NumPy arithmetic: a mask of torch's namespace on the host,
    anything else as it is."""
    return on_host(x) if torch_array(x) else x


# -- arithmetic ------------------------------------------------------------------

def _number(x: Any) -> bool:
    return isinstance(x, (bool, int, float, np.number)) and not isinstance(x, np.ndarray)


@rule("aten.add.Tensor", "aten.add.Scalar")
def add_rule(ctx: RuleContext, a: Any, b: Any, *, alpha: Any = 1) -> Any:
    if _all_plain(a, b):
        return np.asarray(_hosted(a) + alpha * np.asarray(_hosted(b)))
    m = ctx.model
    if alpha != 1:
        b = scaled(ctx, as_tracked(b, m), float(alpha)) if not _number(b) else float(
            alpha) * b
    return add(as_tracked(a, m), as_tracked(b, m), m)


@rule("aten.sub.Tensor", "aten.sub.Scalar")
def sub_rule(ctx: RuleContext, a: Any, b: Any, *, alpha: Any = 1) -> Any:
    if _all_plain(a, b):
        return np.asarray(_hosted(a) - alpha * np.asarray(_hosted(b)))
    m = ctx.model
    if alpha != 1:
        b = scaled(ctx, as_tracked(b, m), float(alpha)) if not _number(b) else float(
            alpha) * b
    return sub(as_tracked(a, m), as_tracked(b, m), m)


@rule("aten.rsub.Scalar")
def rsub_rule(ctx: RuleContext, a: Any, b: Any, alpha: Any = 1) -> Any:
    return sub_rule(ctx, b, a, alpha=alpha) if alpha == 1 else sub_rule(
        ctx, b, scaled(ctx, as_tracked(a, ctx.model), float(alpha)))


@rule("aten.mul.Tensor", "aten.mul.Scalar")
def mul_rule(ctx: RuleContext, a: Any, b: Any) -> Any:
    if _all_plain(a, b):
        return np.asarray(np.asarray(_hosted(a)) * np.asarray(_hosted(b)))
    if _number(b):
        return scaled(ctx, as_tracked(a, ctx.model), float(b))
    if _number(a):
        return scaled(ctx, as_tracked(b, ctx.model), float(a))
    return ieee.mul(as_tracked(a, ctx.model), as_tracked(b, ctx.model), ctx.model)


@rule("aten.div.Tensor", "aten.div.Scalar")
def div_rule(ctx: RuleContext, a: Any, b: Any) -> Any:
    m = ctx.model
    if _number(b):
        if float(b) == 0.0:
            return ieee.div(as_tracked(a, m), scalar(b, m), m)
        return scaled(ctx, as_tracked(a, m), float(b), divide=True)
    a_t, b_t = as_tracked(a, m), as_tracked(b, m)
    if b_t.value.size == 1 and a_t.value.size > 1:
        # a single divisor: the kernel may multiply by its rounded reciprocal
        return either_of(ieee.div(a_t, b_t, m),
                         ieee.mul(a_t, ieee.div(scalar(1.0, m), b_t, m), m))
    return ieee.div(a_t, b_t, m)


def either_of(t1: Tracked, t2: Tracked) -> Tracked:
    """A kernel computing ``t1`` or ``t2`` (the same exact value two ways): the
    larger radius of the two."""
    xp = np
    return replace(t1, det=xp.maximum(t1.det, t2.det), prob=xp.maximum(t1.prob, t2.prob),
                   ref_err=xp.maximum(t1.ref_err, t2.ref_err))


@rule("aten.reciprocal.default")
def reciprocal_rule(ctx: RuleContext, a: Tracked) -> Tracked:
    return ieee.div(scalar(1.0, ctx.model), a, ctx.model)


@rule("aten.neg.default")
def neg_rule(ctx: RuleContext, a: Any) -> Any:
    if not is_tracked(a):
        return -np.asarray(a)
    a = folded(a)
    return replace(a, value=-a.value)


@rule("aten.abs.default")
def abs_rule(ctx: RuleContext, a: Any) -> Any:
    if not is_tracked(a):
        return np.abs(np.asarray(a))
    a = folded(a)  # 1-Lipschitz, no rounding
    return replace(a, value=a.xp.abs(a.value))


# -- selections and piecewise functions ---------------------------------------------

@rule("aten.relu.default")
def relu_rule(ctx: RuleContext, a: Any) -> Any:
    if not is_tracked(a):
        return np.maximum(np.asarray(a), 0)
    return relu(a)


def _bound(ctx: RuleContext, a: Tracked, c: Any, upper: bool) -> Tracked:
    c_t = as_tracked(c, ctx.model)
    if upper:  # min(a, c) = -max(-a, -c)
        neg = lambda t: replace(folded(t), value=-t.value)  # noqa: E731
        return neg(ew.maximum(neg(a), neg(c_t)))
    return ew.maximum(a, c_t)


@rule("aten.clamp.default", "aten.clamp.Tensor")
def clamp_rule(ctx: RuleContext, a: Any, min: Any = None, max: Any = None) -> Any:
    if _all_plain(a, *(x for x in (min, max) if x is not None)):
        return np.clip(np.asarray(_hosted(a)), _hosted(min), _hosted(max))
    out = a
    if min is not None:
        out = _bound(ctx, out, min, upper=False)
    if max is not None:
        out = _bound(ctx, out, max, upper=True)
    return out


@rule("aten.clamp_min.default", "aten.clamp_min.Tensor", "aten.clamp_min_.Tensor")
def clamp_min_rule(ctx: RuleContext, a: Any, min: Any) -> Any:
    return clamp_rule(ctx, a, min=min)


@rule("aten.clamp_max.default", "aten.clamp_max.Tensor")
def clamp_max_rule(ctx: RuleContext, a: Any, max: Any) -> Any:
    return clamp_rule(ctx, a, max=max)


@rule("aten.hardtanh.default")
def hardtanh_rule(ctx: RuleContext, a: Tracked, min_val: Any = -1, max_val: Any = 1) -> Any:
    return clamp_rule(ctx, a, min=min_val, max=max_val)


@rule("aten.maximum.default")
def maximum_rule(ctx: RuleContext, a: Any, b: Any) -> Any:
    if _all_plain(a, b):
        return np.maximum(np.asarray(_hosted(a)), np.asarray(_hosted(b)))
    return ew.maximum(as_tracked(a, ctx.model), as_tracked(b, ctx.model))


@rule("aten.minimum.default")
def minimum_rule(ctx: RuleContext, a: Any, b: Any) -> Any:
    if _all_plain(a, b):
        return np.minimum(np.asarray(_hosted(a)), np.asarray(_hosted(b)))
    return _bound(ctx, as_tracked(a, ctx.model), as_tracked(b, ctx.model), upper=True)


def _sign_unsure(x: Tracked, edge: float = 0.0) -> Any:
    r, xp = reach(x), x.xp
    return (xp.abs(x.value - edge) <= r) & (r > 0) | xp.isnan(x.value)


def _piecewise(x: Tracked, pos: Tracked, neg: Tracked, lip: float,
               edge: float = 0.0, jump: Any = 0.0) -> Tracked:
    """``pos`` where ``x > edge`` else ``neg``; where the kernel may take the other
    branch: ``lip * reach(x) + jump`` plus the larger evaluation radius."""
    x = folded(x)
    cond = x.value > edge
    unsure = _sign_unsure(x, edge)
    out = ew.where(cond, pos, neg)
    if not unsure.any():
        return out
    extra = lip * reach(x) + jump
    pos, neg = aligned(pos, neg)
    xp = out.xp
    det = xp.where(unsure, xp.maximum(pos.det, neg.det) + extra, out.det)
    prob = xp.where(unsure, xp.maximum(pos.prob, neg.prob) + extra, out.prob)
    ref = xp.where(unsure, xp.maximum(pos.ref_err, neg.ref_err), out.ref_err)
    return replace(out, det=det, prob=prob, ref_err=ref)


@rule("aten.leaky_relu.default")
def leaky_relu_rule(ctx: RuleContext, a: Tracked, negative_slope: Any = 0.01) -> Tracked:
    s = float(negative_slope)
    return _piecewise(a, folded(a), scaled(ctx, a, s), max(1.0, abs(s)))


@rule("aten.threshold.default")
def threshold_rule(ctx: RuleContext, a: Tracked, threshold: Any, value: Any) -> Tracked:
    v = as_tracked(value, ctx.model)
    neg = replace(v, value=np.full(a.shape, float(value)))
    jump = a.xp.abs(folded(a).value - float(value))
    return _piecewise(a, folded(a), neg, 1.0, edge=float(threshold), jump=jump)


@rule("aten.elu.default")
def elu_rule(ctx: RuleContext, a: Tracked, alpha: Any = 1, scale: Any = 1,
             input_scale: Any = 1) -> Tracked:
    al, sc, ins = float(alpha), float(scale), float(input_scale)
    k = sc * al

    xp = a.xp

    def lip(lo: Any, hi: Any) -> Any:
        return abs(k) * abs(ins) * xp.exp(xp.minimum(xp.minimum(ins * hi, ins * lo), 0.0)
                                          if ins < 0 else xp.minimum(ins * hi, 0.0))
    neg = ew.elementary(a, ctx.model, f=lambda v: k * xp.expm1(ins * v), lipschitz=lip,
                        ulps=ulps(ctx, "elu"))
    pos = folded(a) if sc == 1.0 else scaled(ctx, a, sc)
    return _piecewise(a, pos, neg, max(abs(sc), abs(k * ins)))


@rule("aten.sign.default")
def sign_rule(ctx: RuleContext, a: Any) -> Any:
    """-1, 0 or 1: exact where the sign is certain; where the value lies within its
    radius of 0 the kernel's sign may be any of them (radius 2, 1 at an exact 0)."""
    if not is_tracked(a):
        return np.sign(np.asarray(a))
    a = folded(a)
    xp = a.xp
    value = xp.sign(a.value)
    r = reach(a)
    unsure = (xp.abs(a.value) <= r) & (r > 0)
    rad = xp.where(unsure, xp.where(value == 0, 1.0, 2.0), 0.0)
    rad = xp.where(xp.isnan(a.value), xp.nan, rad)
    return bounded(value, rad, rad.copy())


# -- comparisons, masks and where -------------------------------------------------

_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "gt": operator.gt, "lt": operator.lt, "ge": operator.ge, "le": operator.le,
    "eq": operator.eq, "ne": operator.ne,
}


def _compare(op: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def compare(ctx: RuleContext, a: Any, b: Any) -> np.ndarray:
        if _all_plain(a, b) or not (is_tracked(a) or is_tracked(b)):
            return np.asarray(op(np.asarray(_hosted(a)), np.asarray(_hosted(b))))
        at, bt = aligned(as_tracked(a, ctx.model), as_tracked(b, ctx.model))
        av, bv = folded(at).value, folded(bt).value
        xp = at.xp
        with np.errstate(invalid="ignore"):
            value = op(av, bv)
            r = reach(at) + reach(bt)
            unsure = ((xp.abs(av - bv) <= r) & (r > 0)) | (xp.isnan(r))
        return decided(value, unsure)
    return compare


for _name, _op in _COMPARE.items():
    rule(f"aten.{_name}.Tensor", f"aten.{_name}.Scalar")(_compare(_op))


@rule("aten.where.self", "aten.where.ScalarSelf", "aten.where.ScalarOther", "aten.where.Scalar")
def where_rule(ctx: RuleContext, cond: Any, a: Any, b: Any) -> Any:
    floating = [x for x in (a, b) if is_tracked(x) or isinstance(x, float)]
    if not floating:
        return np.where(on_host(cond, bool), a, b)
    at, bt = (folded(t) for t in aligned(as_tracked(a, ctx.model), as_tracked(b, ctx.model)))
    if not (is_tracked(a) or is_tracked(b)):  # two numbers: the result in the namespace
        at, bt = moved(at, ctx.xp, ctx.device), moved(bt, ctx.xp, ctx.device)
    c = cond.astype(bool) if torch_array(cond) else np.asarray(cond, dtype=bool)
    out = ew.where(c, at, bt)
    unsure = unsure_of(cond)
    if unsure is None:
        return out
    xp = out.xp
    c, unsure = like(c, out.value), like(unsure, out.value)
    with np.errstate(invalid="ignore"):
        gap = xp.abs(at.value - bt.value)
        gap = xp.where(at.value == bt.value, 0.0, gap)
    other_det = xp.where(c, bt.det, at.det) + gap
    other_prob = xp.where(c, bt.prob, at.prob) + gap
    other_ref = xp.where(c, bt.ref_err, at.ref_err)
    return replace(out, det=xp.where(unsure, xp.maximum(out.det, other_det + other_ref), out.det),
                   prob=xp.where(unsure, xp.maximum(out.prob, other_prob + other_ref), out.prob))


def _array(a: Any) -> Any:
    """An integer or boolean operand as an array: a mask of torch's namespace kept
    there, anything else on the host."""
    return a if torch_array(a) else np.asarray(a)


@rule("aten.logical_not.default")
def logical_not_rule(ctx: RuleContext, a: np.ndarray) -> np.ndarray:
    arr = _array(a)
    if arr.dtype != bool:
        return arr == 0
    return decided(~arr, unsure_of(a))


@rule("aten.bitwise_not.default")
def bitwise_not_rule(ctx: RuleContext, a: np.ndarray) -> np.ndarray:
    """``~a``: a boolean tensor negated (its unsure elements stay unsure), an
    integer one with every bit inverted."""
    arr = _array(a)
    if arr.dtype != bool:
        return np.invert(arr)
    return decided(~arr, unsure_of(a))


def _logical(op: Callable[[Any, Any], Any]) -> Callable[..., np.ndarray]:
    def logical(ctx: RuleContext, a: Any, b: Any) -> np.ndarray:
        ab, bb = _array(a).astype(bool), _array(b).astype(bool)
        ua, ub = unsure_of(a), unsure_of(b)
        if torch_array(ab) or torch_array(bb):  # (a host operand joins the device's)
            ref = ab if torch_array(ab) else bb
            ab, bb = like(ab, ref), like(bb, ref)
        value = op(ab, bb)
        if ua is None and ub is None:
            return value if torch_array(value) else np.asarray(value)
        ua = (ab & False) if ua is None else ua
        ub = (bb & False) if ub is None else ub
        # unsure unless the sure operand decides alone
        flips = [op(ab ^ fa, bb ^ fb) != value
                 for fa, fb in ((ua, False), (False, ub), (ua, ub))]
        return decided(value, flips[0] | flips[1] | flips[2])
    return logical


rule("aten.logical_and.default", "aten.bitwise_and.Tensor")(_logical(np.logical_and))
rule("aten.logical_or.default", "aten.bitwise_or.Tensor")(_logical(np.logical_or))


@rule("aten.isnan.default")
def isnan_rule(ctx: RuleContext, a: Any) -> np.ndarray:
    if not is_tracked(a):
        return np.zeros(np.shape(a), dtype=bool)
    a = folded(a)
    xp = a.xp
    return decided(xp.isnan(a.value), xp.isnan(a.det) | xp.isinf(a.det))


@rule("aten.isinf.default")
def isinf_rule(ctx: RuleContext, a: Any) -> np.ndarray:
    if not is_tracked(a):
        return np.zeros(np.shape(a), dtype=bool)
    a = folded(a)
    xp = a.xp
    return decided(xp.isinf(a.value), ~xp.isfinite(a.det))


# -- transcendentals ---------------------------------------------------------------

def _nearest_zero(lo: Any, hi: Any) -> Any:
    xp = array_module(lo)
    return xp.minimum(xp.maximum(lo, 0.0), hi)


@rule("aten.exp.default")
def exp_rule(ctx: RuleContext, a: Tracked) -> Tracked:
    return ieee.exp(a, ctx.model, ulps=ulps(ctx, "exp"))


@rule("aten.log.default")
def log_rule(ctx: RuleContext, a: Tracked) -> Tracked:
    return ieee.log(a, ctx.model, ulps=ulps(ctx, "log"))


@rule("aten.sqrt.default")
def sqrt_rule(ctx: RuleContext, a: Tracked) -> Tracked:
    return ieee.sqrt(a, ctx.model, ulps=ulps(ctx, "sqrt"))


@rule("aten.sigmoid.default")
def sigmoid_rule(ctx: RuleContext, a: Tracked) -> Tracked:
    return ew.sigmoid(a, ctx.model, ulps=ulps(ctx, "sigmoid"))


@rule("aten.silu.default")
def silu_rule(ctx: RuleContext, a: Tracked) -> Tracked:
    return ew.silu(a, ctx.model, ulps=ulps(ctx, "silu"))


@rule("aten.tanh.default")
def tanh_rule(ctx: RuleContext, a: Tracked) -> Tracked:
    xp = a.xp

    def lip(lo: Any, hi: Any) -> Any:
        t = xp.tanh(_nearest_zero(lo, hi))
        return 1.0 - t * t
    return ew.elementary(a, ctx.model, f=xp.tanh, lipschitz=lip, ulps=ulps(ctx, "tanh"))


def erf_value(v: Any) -> Any:
    """The float64 error function (torch's, accurate to a few float64 ulps)."""
    return special(v, "erf")


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


@rule("aten.erf.default")
def erf_rule(ctx: RuleContext, a: Tracked) -> Tracked:
    def lip(lo: Any, hi: Any) -> Any:
        m = _nearest_zero(lo, hi)
        return _TWO_OVER_SQRT_PI * array_module(m).exp(-m * m)
    return ew.elementary(a, ctx.model, f=erf_value, lipschitz=lip, ulps=ulps(ctx, "erf"))


@rule("aten.log1p.default")
def log1p_rule(ctx: RuleContext, a: Tracked) -> Tracked:
    xp = a.xp
    return ew.elementary(a, ctx.model, f=xp.log1p,
                         lipschitz=lambda lo, hi: xp.where(lo > -1.0, 1.0 / (1.0 + lo), xp.inf),
                         ulps=ulps(ctx, "log1p"))


@rule("aten.expm1.default")
def expm1_rule(ctx: RuleContext, a: Tracked) -> Tracked:
    xp = a.xp
    return ew.elementary(a, ctx.model, f=xp.expm1, lipschitz=lambda lo, hi: xp.exp(hi),
                         ulps=ulps(ctx, "expm1"))


@rule("aten.log2.default")
def log2_rule(ctx: RuleContext, a: Tracked) -> Tracked:
    xp = a.xp
    return ew.elementary(a, ctx.model, f=xp.log2,
                         lipschitz=lambda lo, hi: xp.where(lo > 0, 1.0 / (lo * math.log(2.0)),
                                                           xp.inf),
                         ulps=ulps(ctx, "log2"))


def _rsqrt(ctx: RuleContext, a: Tracked) -> Tracked:
    xp = a.xp
    return ew.elementary(a, ctx.model, f=lambda v: 1.0 / xp.sqrt(v),
                         lipschitz=lambda lo, hi: xp.where(lo > 0, 0.5 * lo ** -1.5, xp.inf),
                         ulps=ulps(ctx, "rsqrt"))


@rule("aten.rsqrt.default")
def rsqrt_rule(ctx: RuleContext, a: Tracked) -> Tracked:
    return _rsqrt(ctx, a)


@rule("aten.pow.Tensor_Scalar")
def pow_rule(ctx: RuleContext, a: Any, exponent: Any) -> Any:
    p = float(exponent)
    if _all_plain(a):
        return np.asarray(np.asarray(_hosted(a)) ** exponent)
    m = ctx.model
    if p == 1.0:
        return folded(a)
    if p == 2.0:
        return ew.mul(a, a, m)
    if p == 3.0:
        return ew.mul(ew.mul(a, a, m), a, m)
    if p == 0.5:
        return ew.sqrt(a, m, ulps=ulps(ctx, "sqrt"))
    if p == -1.0:
        return ew.div(scalar(1.0, m), a, m)
    if p == -0.5:
        return _rsqrt(ctx, a)
    if p == 0.0:
        return as_tracked(np.ones(a.shape), m)
    integral = p == int(p)
    xp = a.xp

    def f(v: Any) -> Any:
        return xp.power(v, p) if integral else xp.where(v >= 0, xp.abs(v) ** p, xp.nan)

    def lip(lo: Any, hi: Any) -> Any:
        big = xp.maximum(xp.abs(lo), xp.abs(hi))
        small = xp.where((lo <= 0) & (hi >= 0), 0.0, xp.minimum(xp.abs(lo), xp.abs(hi)))
        with np.errstate(divide="ignore"):
            edge = big if p >= 1 else small
            out = abs(p) * xp.abs(edge) ** (p - 1.0)
        if not integral:
            out = xp.where(lo >= 0, out, xp.inf)
        return xp.where(xp.isnan(out), xp.inf, out)
    return ew.elementary(a, m, f=f, lipschitz=lip, ulps=ulps(ctx, "pow"))


_SQRT1_2 = math.sqrt(0.5)
_GELU_LIP = 1.13  # max |gelu'| (about 1.1289) and max |gelu_tanh'| (about 1.1289), rounded up
_TANH_C = math.sqrt(2.0 / math.pi)


def _gelu_erf(v: Any) -> Any:
    # x/2 erfc(-x/sqrt 2): no cancellation where erf(x/sqrt 2) nears -1
    return 0.5 * v * special(-v * _SQRT1_2, "erfc")


def _gelu_tanh_inner(v: Any) -> Any:
    return _TANH_C * (v + 0.044715 * v * v * v)


def _gelu_tanh(v: Any) -> Any:
    # x/2 (1 + tanh z) = x sigmoid(2 z): no cancellation where tanh z nears -1
    return v * ew.sigmoid_value(2.0 * _gelu_tanh_inner(v))


def _gelu_ref_err(v: Any, value: Any, tanh_form: bool) -> Any:
    """The float64 evaluation's error beyond a few ulps of the result: the argument's
    rounding, amplified by ``|d log f / d arg|`` (``2 t`` for ``erfc(t)``, 2 for
    ``sigmoid(2 z)``) times ``|arg|``."""
    xp = array_module(v)
    arg = xp.abs(_gelu_tanh_inner(v)) * 2.0 if tanh_form else v * v
    return 16.0 * 2.0**-53 * (arg + 8.0) * xp.abs(value)


@rule("aten.gelu.default")
def gelu_rule(ctx: RuleContext, a: Tracked, *, approximate: str = "none") -> Tracked:
    if approximate not in ("none", "tanh"):
        raise NoRule(f"no rule for aten.gelu with {approximate=!r}")
    name, f = ("gelu", _gelu_erf) if approximate == "none" else ("gelu_tanh", _gelu_tanh)
    with np.errstate(over="ignore", invalid="ignore"):
        xp = a.xp
        out = ew.elementary(a, ctx.model, f=f,
                            lipschitz=lambda lo, hi: xp.full_like(lo, _GELU_LIP),
                            ulps=ulps(ctx, name), scale=xp.abs)
        extra = _gelu_ref_err(folded(a).value, out.value, approximate == "tanh")
    return replace(out, ref_err=out.ref_err + extra)
