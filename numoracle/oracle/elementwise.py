"""Elementwise primitives of the error-tracking arithmetic (DESIGN §2): products,
quotients, square roots, maxima and elementary functions of tracked arrays.

Each maps tracked inputs (values with radii, see :class:`~numoracle.oracle.tracked.Tracked`)
to a tracked output under a :class:`~numoracle.oracle.precision.PrecisionModel`.
Elementwise arithmetic runs in the model's accumulation format (unit ``u``,
smallest normal ``tiny``): torch and CUDA kernels evaluate elementwise maths
in float32 for fp32, bf16 and fp16 storage alike (bf16/fp16 results are then
rounded once more by :func:`~numoracle.oracle.tracked.store`).

Radii compose as follows (``r`` a radius of an input, ``v`` its exact value):

* ``mul``: ``|a| r_b + r_a |b| + r_a r_b``, then one rounding
  ``u (|ab| + radius) + tiny``; exact where both inputs are exact and the
  product is representable;
* ``div``: ``(r_a + |a/b| r_b) / (|b| - r_b)``, then one rounding (or, under
  an accuracy profile with an approximate division, its error: ``2 k u`` for
  ``k`` ulps, :meth:`~numoracle.oracle.precision.PrecisionModel.div_rel`);
  unjudged (infinite radius) where ``|b| <= r_b`` (the divisor may be 0);
* ``sqrt``: ``r / (sqrt(v) + sqrt(max(v - r, 0)))``, never more than
  ``sqrt(r)`` (the square root is 1/2-Hölder), then ``ulps`` roundings;
* an elementary function ``f`` (:func:`exp`, :func:`log`, :func:`sigmoid`,
  :func:`silu`, :func:`silu_grad`): ``L r`` with ``L`` the largest ``|f'|`` over
  ``[v - r, v + r]``, plus the kernel's evaluation error
  ``2 ulps u (scale + L r) + ulps tiny`` (one ulp is at most ``2 u`` of the
  result), where ``scale`` is ``|f(v)|`` for a
  function accurate to ``ulps`` relative to its result and the magnitude of
  the evaluation's terms for one that is not (``silu_grad`` cancels near its
  root);
* :func:`maximum`, :func:`amax`: 1-Lipschitz in the max-norm, no rounding: the
  larger radius.

A function's error is what the model claims (its accuracy profile,
:mod:`numoracle.oracle.accuracy`, and per-function ``ulps``); the ``ieee``
defaults are the CUDA maths library's documented maximum errors
(``expf`` 2, ``logf`` 1, ``sqrtf`` correctly rounded) plus one rounding per
further operation of the usual formula (``sigmoid = 1 / (1 + exp(-x))``:
2 + 1/2 + 1/2 and the error of ``exp(-x)`` carried through ``1 + e``, ...). A
target compiled with fast maths (``__expf``) must pass larger values.

The oracle's own error (``ref_err``) carries ``L ref_err`` plus a few float64
ulps of the result (NumPy's float64 ``exp``/``log`` are accurate to about 1 ulp).

Examples
--------
>>> import numpy as np
>>> from numoracle.oracle.precision import get_model
>>> from numoracle.oracle.tracked import exact
>>> t = mul(exact(np.array([3.0])), exact(np.array([0.5])), get_model("fp32"))
>>> float(t.value[0]), float(t.det[0])
(1.5, 0.0)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import InvalidArgument
from .accuracy import Ulps
from . import fused_cpu
from .formats import representable
from .fused import own_array, radius_product
from .precision import PrecisionModel
from .tracked import (
    U64,
    Tracked,
    aligned,
    bounded,
    folded,
    may_be_exact,
    surely_zero,
    two_product_error,
)
from .xp import array_module as _xp
from .xp import fill_where, is_torch, keeps_subnormals, like, reads_are_free

__all__ = ["mul", "div", "sqrt", "exp", "log", "sigmoid", "silu", "silu_grad", "maximum",
           "amax", "where", "widen", "elementary", "ULPS"]

#: default maximum errors, in ulps of the accumulation format, of each function
#: as a kernel usually evaluates it (see the module docstring)
ULPS: dict[str, float] = {
    "sqrt": 1.0,      # sqrtf: correctly rounded (0.5 ulp); 1 for rsqrt-based paths
    "exp": 2.0,       # expf
    "log": 1.0,       # logf
    "sigmoid": 4.0,   # 1 / (1 + expf(-x)): expf 2, add 1/2, divide 1/2, carried through
    "silu": 5.0,      # x / (1 + expf(-x)) or x * sigmoid(x)
    "silu_grad": 8.0,  # s (1 + x (1 - s)), relative to the magnitude of its terms
}

#: float64 ulps allowed for NumPy's own evaluation of each function
_REF_ULPS = 4.0


def _rmul(x: Any, y: Any) -> Any:
    """``x * y`` for magnitudes and radii with ``0 * inf = 0``."""
    fast = radius_product(x, y)  # (one kernel on a GPU)
    if fast is not None:
        return fast
    xp = _xp(x)
    with np.errstate(invalid="ignore", over="ignore"):
        p = x * y
    if reads_are_free(xp) and not bool(xp.isnan(xp.sum(p))):  # (x, y >= 0: no NaN, so
        return p                                                 # no 0 * inf)
    return xp.where((x == 0) | (y == 0), 0.0, p)


def _finish(value: Any, det: Any, prob: Any, ref_err: Any, n: Any = 1,
            exact_here: Any = None, over: Any = None) -> Tracked:
    """A tracked result: exact elements zeroed, elements that may overflow unjudged."""
    xp = _xp(value)
    shape = tuple(value.shape)
    if is_torch(xp) and (exact_here is not None or over is not None):
        return _finish_filled(value, det, prob, ref_err, n, exact_here, over, xp)
    # (arrays of their own, as the caller's arithmetic made them: not copied again)
    det = own_array(det, shape, xp)
    prob = own_array(prob, shape, xp) if prob is not det else xp.array(det, copy=True)
    ref_err = own_array(ref_err, shape, xp) if ref_err is not det and ref_err is not prob \
        else xp.array(ref_err, copy=True)
    if exact_here is not None:
        for a in (det, prob, ref_err):
            fill_where(a, exact_here, 0.0)
    if over is not None and (not reads_are_free(xp) or bool(over.any())):
        fill_where(det, over, xp.inf)
        fill_where(prob, over, xp.inf)
    return bounded(value, det, prob, ref_err=ref_err, n=n)


def _finish_filled(value: Any, det: Any, prob: Any, ref_err: Any, n: Any, exact_here: Any,
                   over: Any, xp: Any) -> Tracked:
    """:func:`_finish` in torch's namespace: a contiguous radius of the result's shape
    filled into a fresh tensor (``masked_fill``, contiguous as the copy it replaces), not
    copied and then filled in place; the same values, laid out the same."""
    shape = tuple(value.shape)
    f64 = xp._torch.float64

    def filled(a: Any, *fills: tuple[Any, float]) -> Any:
        masks = [(xp.tensor(m), v) for m, v in fills if m is not None]
        t = a.tensor if type(a) is xp.ndarray else None
        if (t is None or t.dtype != f64 or tuple(t.shape) != shape or not t.is_contiguous()
                or any(tuple(m.shape) != shape for m, _ in masks)):
            a = own_array(a, shape, xp)  # (as _finish: a copy, filled in place)
            for m, v in masks:
                fill_where(a, xp.from_tensor(m), v)
            return a
        out = t.masked_fill(*masks[0])
        for m, v in masks[1:]:
            out.masked_fill_(m, v)
        return xp.from_tensor(out)

    zero, inf = (exact_here, 0.0), (over, xp.inf)
    return bounded(value, filled(det, zero, inf), filled(prob, zero, inf),
                   ref_err=filled(ref_err, zero) if exact_here is not None
                   else own_array(ref_err, shape, xp), n=n)


def _exact_inputs(*ts: Tracked) -> Any:
    out: Any = True
    for t in ts:
        out = out & (t.det == 0) & (t.ref_err == 0)
    return out


def _max_n(*ts: Tracked) -> Any:
    """The longest accumulation length behind each element of a combination of ``ts``."""
    if all(isinstance(t.n, int) for t in ts):
        return max(int(t.n) for t in ts)
    return np.maximum.reduce(np.broadcast_arrays(*[np.asarray(t.n) for t in ts]))


def mul(a: Tracked, b: Tracked, model: PrecisionModel) -> Tracked:
    """Elementwise ``a * b`` (NumPy broadcasting), rounded once in the
    accumulation format (see the module docstring for the bound)."""
    a, b = (folded(t) for t in aligned(a, b))
    xp = _xp(a.value)
    u, tiny = model.acc_unit(), model.accumulate.tiny
    if xp is np and fused_cpu.elementwise(a.value, b.value):  # one loop, the same bits
        value, ref_err, det, prob, mag = fused_cpu.mul_radii(
            a.value, b.value, (a.det, b.det, a.prob, b.prob, a.ref_err, b.ref_err),
            model.accumulate, u, U64, may_be_exact(a, b))
        return bounded(value, det, prob, ref_err=ref_err, mag=mag, n=_max_n(a, b))
    with np.errstate(invalid="ignore", over="ignore"):
        value = a.value * b.value
        aa, ab = xp.abs(a.value), xp.abs(b.value)

        def prop(ra: Any, rb: Any) -> Any:
            # (a radius 0 everywhere adds nothing: its products are left out)
            nz_a, nz_b = not surely_zero(ra), not surely_zero(rb)
            out: Any = _rmul(aa, rb) if nz_b else 0.0
            if nz_a:
                out = out + _rmul(ra, ab)
            if nz_a and nz_b:
                out = out + _rmul(ra, rb)
            return out

        det = prop(a.det, b.det)
        prob = det if a.prob is a.det and b.prob is b.det else prop(a.prob, b.prob)
        ref_err = prop(a.ref_err, b.ref_err) + U64 * xp.abs(value)
        scaled = (xp.abs(value) + det + ref_err) * u + tiny
        det, prob = det * (1 + u) + scaled, prob * (1 + u) + scaled
        exact_here = None
        if keeps_subnormals(xp) and may_be_exact(a, b):
            err = two_product_error(*xp.broadcast_arrays(a.value, b.value))
            exact_here = (_exact_inputs(a, b) & (err == 0) & xp.isfinite(value)
                          & ((value != 0) | (a.value == 0) | (b.value == 0))
                          & representable(value, model.accumulate))
        over = (xp.abs(value) + det) >= model.accumulate.max
        # an operand the kernel may hold as anything (infinite or NaN radius) times an
        # exact zero: the kernel's product may be NaN (inf * 0), so it is not judged
        wild = ((~xp.isfinite(a.det) & (b.value == 0) & (b.det == 0))
                | (~xp.isfinite(b.det) & (a.value == 0) & (a.det == 0)))
        if not reads_are_free(xp) or bool(wild.any()):
            det = xp.where(wild, xp.nan, det)
            prob = xp.where(wild, xp.nan, prob)
    return _finish(value, det, prob, ref_err, _max_n(a, b), exact_here, over)


def div(a: Tracked, b: Tracked, model: PrecisionModel) -> Tracked:
    """Elementwise ``a / b``, rounded once in the accumulation format; unjudged
    where the divisor's radius reaches 0 (see the module docstring)."""
    a, b = (folded(t) for t in aligned(a, b))
    xp = _xp(a.value)
    u, tiny = model.acc_unit(), model.accumulate.tiny
    rel = model.div_rel()  # 1: correctly rounded; 2k: a k-ulp division
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        value = a.value / b.value
        q, ab = xp.abs(value), xp.abs(b.value)

        def prop(ra: Any, rb: Any) -> Any:
            room = ab - rb
            return xp.where(room > 0, (ra + _rmul(q, rb)) / room, xp.inf)

        det, prob = prop(a.det, b.det), prop(a.prob, b.prob)
        ref_err = prop(a.ref_err, b.ref_err) + U64 * q
        scaled = (q + det + ref_err) * (rel * u) + rel * tiny
        det, prob = det * (1 + rel * u) + scaled, prob * (1 + rel * u) + scaled
        exact_here = None
        if keeps_subnormals(xp) and may_be_exact(a, b) and rel == 1.0:  # an approximate
            # division may miss an exact quotient
            av, bv = xp.broadcast_arrays(a.value, b.value)
            err = xp.where(value * bv == av, two_product_error(value, bv), 1.0)
            exact_here = (_exact_inputs(a, b) & (err == 0) & xp.isfinite(value) & (bv != 0)
                          & ((value != 0) | (av == 0))
                          & representable(value, model.accumulate))
        over = (q + det) >= model.accumulate.max
    return _finish(value, det, prob, ref_err, _max_n(a, b), exact_here, over)


def sqrt(t: Tracked, model: PrecisionModel, *, ulps: float | None = None) -> Tracked:
    """Elementwise square root (see the module docstring); NaN where the exact
    value is negative. The kernel's argument is taken to be >= 0 (a sum of
    squares, say): where the radius reaches below 0 the Hölder bound
    ``sqrt(r)`` covers any non-negative argument."""
    t = folded(t)
    xp = _xp(t.value)
    ulps = _check_ulps("sqrt", ulps, model)
    u, tiny = model.acc_unit(), model.accumulate.tiny
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        v = t.value
        value = xp.sqrt(v)

        def prop(r: Any) -> Any:
            lo = xp.sqrt(xp.maximum(v - r, 0.0))
            return xp.where(r > 0, xp.minimum(r / (value + lo), xp.sqrt(r)), 0.0)

        det, prob, ref_prop = prop(t.det), prop(t.prob), prop(t.ref_err)
        ref_err = ref_prop + U64 * value
        scaled = _evaluation(ulps, xp.abs(v) + t.det + t.ref_err, value + det + ref_err, u, tiny)
        det, prob = det + scaled, prob + scaled
        exact_here = None
        if keeps_subnormals(xp) and may_be_exact(t):
            square_exact = (value * value == v) & (two_product_error(value, value) == 0)
            exact_here = (_exact_inputs(t) & square_exact
                          & representable(value, model.accumulate))
    return _finish(value, det, prob, ref_err, t.n, exact_here)


def _check_ulps(name: str, ulps: float | Ulps | None, model: PrecisionModel) -> Ulps:
    """The error ``name`` is evaluated to: ``ulps`` where given, else what the
    model claims (its accuracy profile over the defaults of :data:`ULPS`)."""
    if ulps is None:
        ulps = model.error_of(name, ULPS[name])
    if isinstance(ulps, Ulps):
        return ulps
    if not (isinstance(ulps, (int, float)) and not isinstance(ulps, bool) and ulps >= 0
            and np.isfinite(ulps)):
        raise InvalidArgument(f"{name}: {ulps=} must be a finite number >= 0, the kernel's "
                              f"maximum error in ulps (default {ULPS.get(name, 'none')})")
    return Ulps(float(ulps))


def _evaluation(spec: Ulps, x_abs: Any, scale: Any, u: float, tiny: float) -> Any:
    """The evaluation error of a function claimed to within ``spec`` at arguments of
    magnitude ``x_abs``, relative to ``scale``: ``2 k u scale + k tiny`` with
    ``k = ulps + per_x |x|`` (one ulp is at most ``2 u`` of the result), plus
    ``of_one`` ulps of 1."""
    k = spec.at(x_abs)
    out = 2.0 * k * u * scale + k * tiny
    return out + 2.0 * u * spec.of_one if spec.of_one else out


def elementary(t: Tracked, model: PrecisionModel, *, f: Callable[[Any], Any],
               lipschitz: Callable[[Any, Any], Any], ulps: float | Ulps,
               scale: Callable[[Any], Any] | None = None,
               maybe_zero: Callable[[Any], Any] | None = None) -> Tracked:
    """A function ``f`` applied elementwise, evaluated by the kernel to within
    ``ulps`` units of the accumulation format.

    Parameters
    ----------
    f : callable
        ``f(v)`` in float64 (the oracle's value).
    lipschitz : callable
        ``lipschitz(lo, hi)``: an upper bound of ``|f'|`` over ``[lo, hi]``.
    ulps : float or Ulps
        The kernel's maximum evaluation error, in ulps of the accumulation format
        (an :class:`~numoracle.oracle.accuracy.Ulps` may grow with ``|x|``).
    scale : callable, optional
        ``scale(v)``: what the evaluation error is relative to (default ``|f(v)|``).
    maybe_zero : callable, optional
        ``maybe_zero(v)``: where the kernel's formula may underflow or overflow
        an intermediate and return 0 (or a huge value collapses): there the
        radius grows by ``|f(v)|``.

    The radius is ``L r + 2 ulps u (scale + L r) + ulps tiny`` (module docstring).
    """
    spec = ulps if isinstance(ulps, Ulps) else _check_ulps("elementary", ulps, model)
    t = folded(t)
    xp = _xp(t.value)
    u, tiny = model.acc_unit(), model.accumulate.tiny
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        v = t.value
        value = f(v)
        has_ref = not surely_zero(t.ref_err)  # (else its passes are left out: adding 0)
        reach = t.det + t.ref_err if has_ref else t.det
        L = lipschitz(v - reach, v + reach)
        if xp is np and fused_cpu.elementwise(v):  # the rest in one loop, the same bits
            z = None if maybe_zero is None else maybe_zero(v - reach) | maybe_zero(v + reach)
            det, prob, ref_err, mag = fused_cpu.elementary_radii(
                v, value, L, (t.det, t.det if t.prob is t.det else t.prob,
                              t.ref_err if has_ref else None),
                None if scale is None else scale(v), z, spec, u, tiny, _REF_ULPS * U64,
                model.accumulate.max)
            return bounded(value, det, prob, ref_err=ref_err, mag=mag, n=t.n)
        det = _rmul(L, t.det)
        prob = det if t.prob is t.det else _rmul(L, t.prob)
        value_abs = xp.abs(value)
        ref_err = _REF_ULPS * U64 * value_abs
        if has_ref:
            ref_err = _rmul(L, t.ref_err) + ref_err
        base = value_abs if scale is None else scale(v)
        evaluation = _evaluation(spec, xp.abs(v) + reach, base + det + ref_err, u, tiny)
        det, prob = det + evaluation, prob + evaluation
        if maybe_zero is not None:
            z = maybe_zero(v - reach) | maybe_zero(v + reach)
            det = xp.where(z, det + xp.abs(value), det)
            prob = xp.where(z, prob + xp.abs(value), prob)
        over = (value_abs + det) >= model.accumulate.max
    return _finish(value, det, prob, ref_err, t.n, None, over)


def _exp_f(v: Any) -> Any:
    return _xp(v).exp(v)


def exp(t: Tracked, model: PrecisionModel, *, ulps: float | None = None) -> Tracked:
    """Elementwise ``exp``: ``L = exp(v + r)``; unjudged where it may overflow."""
    return elementary(t, model, f=_exp_f, lipschitz=lambda lo, hi: _exp_f(hi),
                      ulps=_check_ulps("exp", ulps, model))


def log(t: Tracked, model: PrecisionModel, *, ulps: float | None = None) -> Tracked:
    """Elementwise natural ``log``: ``L = 1 / (v - r)``, unjudged where the
    interval reaches 0."""
    xp = _xp(t.value)
    return elementary(t, model, f=xp.log,
                      lipschitz=lambda lo, hi: xp.where(lo > 0, 1.0 / lo, xp.inf),
                      ulps=_check_ulps("log", ulps, model))


def _sigmoid_f(v: Any) -> Any:
    xp = _xp(v)
    e = xp.exp(-xp.abs(v))  # never overflows
    return xp.where(v >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _exp_overflows(model: PrecisionModel) -> Callable[[Any], Any]:
    """Where ``exp(-x)`` overflows the accumulation format (``x < -ln(max)``):
    ``1 / (1 + exp(-x))`` and ``x / (1 + exp(-x))`` then return 0."""
    edge = -float(np.log(model.accumulate.max))
    return lambda x: x < edge


def sigmoid(t: Tracked, model: PrecisionModel, *, ulps: float | None = None) -> Tracked:
    """Elementwise logistic sigmoid ``1 / (1 + exp(-x))``: ``L`` is ``s(m)(1 - s(m))``
    at the point ``m`` of the interval nearest 0 (at most 1/4)."""
    xp = _xp(t.value)

    def lip(lo: Any, hi: Any) -> Any:
        s = _sigmoid_f(xp.minimum(xp.maximum(lo, 0.0), hi))  # the point nearest 0
        return s * (1.0 - s)

    return elementary(t, model, f=_sigmoid_f, lipschitz=lip, ulps=_check_ulps("sigmoid", ulps, model),
                      maybe_zero=_exp_overflows(model))


#: max |silu'| (about 1.0998, at x ~ 2.40) and max |silu''| (1/2, at 0), rounded up
_SILU_LIP = 1.1
_SILU_GRAD_LIP = 0.5


def sigmoid_value(v: Any) -> Any:
    """The float64 logistic sigmoid of plain values (no overflow for any ``v``)."""
    return _sigmoid_f(v)


def silu(t: Tracked, model: PrecisionModel, *, ulps: float | None = None) -> Tracked:
    """Elementwise ``silu(x) = x sigmoid(x)``: ``L`` = 1.1 (``max |silu'|``)."""
    xp = _xp(t.value)
    return elementary(t, model, f=lambda v: v * _sigmoid_f(v),
                      lipschitz=lambda lo, hi: xp.full_like(lo, _SILU_LIP),
                      ulps=_check_ulps("silu", ulps, model), maybe_zero=_exp_overflows(model))


def _silu_grad_f(v: Any) -> Any:
    s = _sigmoid_f(v)
    return s * (1.0 + v * (1.0 - s))


def silu_grad(t: Tracked, model: PrecisionModel, *, ulps: float | None = None) -> Tracked:
    """Elementwise ``silu'(x) = s (1 + x (1 - s))`` with ``s = sigmoid(x)``:
    ``L = 1/2`` (``max |silu''|``); the evaluation error is relative to
    ``s (1 + |x| (1 - s))``, the magnitude of its terms (it cancels near
    ``x = -1.28``, where ``silu'`` has its root)."""
    xp = _xp(t.value)

    def scale(v: Any) -> Any:
        s = _sigmoid_f(v)
        return s * (1.0 + xp.abs(v) * (1.0 - s))

    return elementary(t, model, f=_silu_grad_f,
                      lipschitz=lambda lo, hi: xp.full_like(lo, _SILU_GRAD_LIP),
                      ulps=_check_ulps("silu_grad", ulps, model), scale=scale,
                      maybe_zero=_exp_overflows(model))


def maximum(a: Tracked, b: Tracked) -> Tracked:
    """Elementwise ``max(a, b)``: no rounding; each radius is the larger of the two."""
    a, b = (folded(t) for t in aligned(a, b))
    xp = _xp(a.value)
    with np.errstate(invalid="ignore"):
        value = xp.maximum(a.value, b.value)
    return _finish(value, xp.maximum(a.det, b.det), xp.maximum(a.prob, b.prob),
                   xp.maximum(a.ref_err, b.ref_err), _max_n(a, b))


def amax(t: Tracked, axis: int, keepdims: bool = False) -> Tracked:
    """The maximum over ``axis``: no rounding; the radius is the largest radius
    along the axis (``|max x^ - max x| <= max |x^ - x|``)."""
    t = folded(t)
    xp = _xp(t.value)
    red = {"axis": axis, "keepdims": keepdims}
    value = xp.max(t.value, **red)
    return _finish(value, xp.max(t.det, **red), xp.max(t.prob, **red),
                   xp.max(t.ref_err, **red), t.max_n)


def where(cond: Any, a: Tracked, b: Tracked) -> Tracked:
    """``a`` where ``cond`` (a boolean array known exactly), else ``b``."""
    a, b = (folded(t) for t in aligned(a, b))
    xp = _xp(a.value)
    cond = like(cond, a.value)
    pick = lambda x, y: xp.where(cond, x, y)  # noqa: E731
    return _finish(pick(a.value, b.value), pick(a.det, b.det), pick(a.prob, b.prob),
                   pick(a.ref_err, b.ref_err), _max_n(a, b))


def widen(t: Tracked, extra: Any) -> Tracked:
    """``t`` with ``extra`` (>= 0, broadcastable) added to both kernel radii: a
    term the arithmetic does not see (an uncertain branch, a perturbed input)."""
    xp = _xp(t.value)
    extra = xp.asarray(extra, dtype=xp.float64)
    if bool(xp.any(extra < 0)) or bool(xp.any(xp.isnan(extra))):
        raise InvalidArgument("widen: extra radius must be >= 0 and not NaN")
    return replace(t, det=t.det + extra, prob=t.prob + extra)
