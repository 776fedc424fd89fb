"""Special values carried as IEEE 754 carries them.

An infinity, a NaN and a zero are values like any other: ``exp(-inf)`` is 0
exactly, ``-inf - x`` is ``-inf`` exactly for any finite ``x``, ``0 * x`` is 0
and ``0 / x`` is 0 for any finite ``x`` away from 0, ``x / inf`` is 0, and a NaN
spreads. A kernel that evaluates these ops in IEEE arithmetic returns exactly
that value, whatever its rounding, since rounding a 0, an infinity or a NaN
changes nothing. The primitives of :mod:`numoracle.oracle.tracked` and
:mod:`numoracle.oracle.elementwise` bound finite results; on an infinite operand
their relative bounds are infinite, which would leave every result computed
from it unjudged (a masked softmax row, say, and every finite entry of it).

Each function here is the primitive of the same name with that rule on top:
where some operand is a *special point* (radius 0, value 0, an infinity or NaN)
and the op's result is the same special value at every point of the operands'
intervals (``value ± radius``, both signs of a zero), that value is the result,
exact (radius 0). The intervals' corners decide it: each op here is monotone in
each operand between its poles, and a divisor whose interval holds 0 inside is
never decided. Everywhere else the primitive's bound stands.

:func:`summed` does the same for a sum along an axis: a NaN term, or infinities
of both signs, give NaN; infinities of one sign beside finite terms whose sum
cannot overflow give that infinity.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import replace
from itertools import product
from typing import Any

import numpy as np

from ... import elementwise as ew
from ...fused import any_special, carried, special_mask
from ...precision import PrecisionModel
from ...tracked import Tracked, aligned, folded
from ...tracked import add as _add
from ...tracked import sub as _sub
from ...xp import array_module

__all__ = ["add", "sub", "mul", "div", "exp", "log", "sqrt", "carry", "summed", "special_points"]


def _reach(t: Tracked) -> Any:
    """How far a kernel's operand may lie from the exact value (kernel radius plus
    the oracle's error); NaN where the element is unjudged."""
    return t.det + t.ref_err


def special_points(t: Tracked) -> Any:
    """Where ``t`` is a special value known exactly: radius 0 and the value 0 or an
    infinity, or NaN with a finite radius (a NaN radius leaves an element
    unjudged: the kernel may give anything there)."""
    fast = special_mask(t.value, t.det, t.ref_err)  # (one kernel on a GPU)
    if fast is not None:
        return fast
    xp = array_module(t.value)
    v = t.value
    r = _reach(t)
    # (``v * 0.5 == v`` exactly where v is 0 or infinite: halving is exact for any other
    # finite v, and a subnormal's half rounds below it; ``|r| < inf``: r finite. Eight
    # passes where the plain tests take eleven, or fourteen in torch's namespace)
    with np.errstate(invalid="ignore", over="ignore"):
        return xp.where(xp.isnan(v), xp.abs(r) < xp.inf, (r == 0) & (v * 0.5 == v))


def _corners(v: Any, r: Any, xp: Any) -> tuple[Any, Any]:
    """The ends of ``[v - r, v + r]``, a zero end taken with the sign that keeps it
    inside (``[0, 0]`` gives both signs); a NaN value gives NaN at both ends."""
    with np.errstate(invalid="ignore", over="ignore"):
        lo = xp.where(r == 0, v, v - r)
        hi = xp.where(r == 0, v, v + r)
    return xp.where(lo == 0, -0.0, lo), xp.where(hi == 0, 0.0, hi)


def _same(a: Any, b: Any, xp: Any) -> Any:
    """Elementwise: ``a`` and ``b`` are the same value (NaN is NaN; 0 is -0)."""
    return (a == b) | (xp.isnan(a) & xp.isnan(b))


def carry(out: Tracked, f: Callable[..., Any], *operands: Tracked,
          no_pole: int | None = None) -> Tracked:
    """``out`` (the primitive's result of ``f`` on ``operands``) with each element
    that the operands decide exactly (see the module docstring) set to that value
    with radius 0. ``no_pole``: the operand whose interval must not hold 0 inside
    (a divisor)."""
    ops = [folded(t) for t in operands]
    ops = list(aligned(out, *ops))[1:]  # a host operand (a constant) where the result is
    xp = array_module(out.value)
    if all(any_special(t.value, t.det, t.ref_err) is False for t in ops):
        return out  # (one pass each, no masks: the usual case)
    fast = carried(f, ops, out, no_pole)  # (the same in one loop, where it runs)
    if fast is not NotImplemented:
        return fast
    shape = out.value.shape
    special = None
    for t in ops:
        s = xp.broadcast_to(special_points(t), shape)
        special = s if special is None else special | s
    if special is None or not bool(special.any()):
        return out
    where = xp.nonzero(special)
    vals = [xp.broadcast_to(t.value, shape)[where] for t in ops]
    reaches = [xp.broadcast_to(_reach(t), shape)[where] for t in ops]
    ok = xp.ones(vals[0].shape, dtype=bool)
    ends = []
    for i, (v, r) in enumerate(zip(vals, reaches, strict=True)):
        ok &= xp.isfinite(r)  # an unbounded operand may be anything: nothing is decided
        lo, hi = _corners(v, xp.where(xp.isfinite(r) & ~xp.isnan(v), r, 0.0), xp)
        if i == no_pole:
            ok &= ~((lo < 0) & (hi > 0))
        ends.append((lo, hi))
    with np.errstate(all="ignore"):
        results = [f(*corner) for corner in product(*ends)]
    first = results[0]
    for other in results[1:]:
        ok &= _same(first, other, xp)
    ok &= (first == 0) | ~xp.isfinite(first)
    if not bool(ok.any()):
        return out
    idx = tuple(w[ok] for w in where)
    value = xp.array(xp.broadcast_to(out.value, shape), dtype=xp.float64)
    value[idx] = xp.where(first[ok] == 0, 0.0, first[ok])
    return _exact_at(out, idx, value)


def _exact_at(out: Tracked, idx: Any, value: Any) -> Tracked:
    """``out`` with ``value`` and radius 0 at ``idx`` (its magnitude that of the
    value; NaN counts as 0)."""
    xp = array_module(value)
    shape = value.shape

    def zeroed(a: Any) -> Any:
        a = xp.array(xp.broadcast_to(a, shape), dtype=xp.float64)
        a[idx] = 0.0
        return a
    mag = xp.array(xp.broadcast_to(out.mag, shape), dtype=xp.float64)
    picked = xp.abs(value[idx])
    mag[idx] = xp.where(xp.isnan(picked), 0.0, picked)
    return replace(out, value=value, det=zeroed(out.det), prob=zeroed(out.prob),
                   ref_err=zeroed(out.ref_err), mag=mag, lo=None)


def _in_namespace(name: str) -> Callable[[Any], Any]:
    """The function ``name`` of its argument's array namespace."""
    return lambda v: getattr(array_module(v), name)(v)


def add(a: Tracked, b: Tracked, model: PrecisionModel) -> Tracked:
    """:func:`numoracle.oracle.tracked.add` carrying special values."""
    return carry(_add(a, b, model), operator.add, a, b)


def sub(a: Tracked, b: Tracked, model: PrecisionModel) -> Tracked:
    """:func:`numoracle.oracle.tracked.sub` carrying special values."""
    return carry(_sub(a, b, model), operator.sub, a, b)


def mul(a: Tracked, b: Tracked, model: PrecisionModel) -> Tracked:
    """:func:`numoracle.oracle.elementwise.mul` carrying special values."""
    return carry(ew.mul(a, b, model), operator.mul, a, b)


def div(a: Tracked, b: Tracked, model: PrecisionModel) -> Tracked:
    """:func:`numoracle.oracle.elementwise.div` carrying special values (never
    where the divisor's interval holds 0 inside)."""
    return carry(ew.div(a, b, model), operator.truediv, a, b, no_pole=1)


def exp(t: Tracked, model: PrecisionModel, *, ulps: float | None = None) -> Tracked:
    """:func:`numoracle.oracle.elementwise.exp` carrying special values."""
    return carry(ew.exp(t, model, ulps=ulps), _in_namespace("exp"), t)


def log(t: Tracked, model: PrecisionModel, *, ulps: float | None = None) -> Tracked:
    """:func:`numoracle.oracle.elementwise.log` carrying special values
    (``log(0) = -inf``, ``log(inf) = inf``)."""
    return carry(ew.log(t, model, ulps=ulps), _in_namespace("log"), t)


def sqrt(t: Tracked, model: PrecisionModel, *, ulps: float | None = None) -> Tracked:
    """:func:`numoracle.oracle.elementwise.sqrt` carrying special values."""
    return carry(ew.sqrt(t, model, ulps=ulps), _in_namespace("sqrt"), t)


def summed(out: Tracked, terms: Tracked, model: PrecisionModel) -> Tracked:
    """``out`` (the sum of ``terms`` along their last axis, by a primitive) with
    each sum that its special terms decide set exactly: 0 where every term is an
    exact 0; NaN where a term is NaN or infinities of both signs meet; an
    infinity where the others are finite and their magnitudes, with their radii,
    stay below half the accumulation format's largest number (no partial sum of
    them overflows)."""
    terms = folded(terms)
    xp = array_module(out.value)
    v = terms.value
    points = xp.broadcast_to(special_points(terms), v.shape)
    sp = points & (v != 0)
    zeros = points.all(axis=-1) & ~sp.any(axis=-1)
    lanes = sp.any(axis=-1)
    if not bool(lanes.any()) and not bool(zeros.any()):
        return out
    r = xp.broadcast_to(_reach(terms), v.shape)
    nan = xp.isnan(v).any(axis=-1)
    pos, neg = (v == xp.inf).any(axis=-1), (v == -xp.inf).any(axis=-1)
    with np.errstate(invalid="ignore", over="ignore"):
        rest = xp.where(sp, 0.0, xp.abs(v) + r).sum(axis=-1)
    wild = (~sp & ~xp.isfinite(v)).any(axis=-1) | xp.isnan(rest)
    fits = rest < model.accumulate.max / 2
    decided = zeros | (lanes & ~wild & (nan | (pos & neg) | fits))
    if not bool(decided.any()):
        return out
    shape = out.value.shape
    result = xp.where(nan | (pos & neg), xp.nan,
                      xp.where(pos, xp.inf, xp.where(neg, -xp.inf, 0.0)))
    result = xp.broadcast_to(result, shape) if result.shape != shape else result
    decided = xp.broadcast_to(decided, shape) if decided.shape != shape else decided
    idx = xp.nonzero(decided)
    value = xp.array(xp.broadcast_to(out.value, shape), dtype=xp.float64)
    value[idx] = result[idx]
    return _exact_at(out, idx, value)
