"""What the rule families share: turning ATen arguments into tracked operands,
shape-only maps over every array of a tracked value, and the set-valued answers
of comparisons (:class:`Decision`) and of arg-max selections (:class:`IndexSet`).

A comparison of inexact values may come out either way in a kernel where the
oracle's value lies within the radius of the threshold: its boolean result is a
:class:`Decision`, a NumPy boolean array that also names the elements where the
kernel may answer the other way (``unsure``). In torch's namespace the result
stays on the device of the compared values: a boolean array of that namespace
whose ``unsure`` attribute, an array beside it, names those elements, every one
of them, unread (:func:`decided`): no comparison brings values to the host, so a
recorded evaluation (:mod:`..recording`) keeps no guard on them. Every rule
consuming a boolean tensor (``where``, a cast to a floating type, a logical op)
covers both answers there. An arg-max over values that tie within their radii has
more than one right index: :class:`IndexSet` holds the oracle's index and, per
element, every index the kernel may return.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ....errors import InvalidArgument
from ...formats import quantize, representable
from ...precision import PrecisionModel
from ...tracked import Tracked, bounded, exact, folded, mul_scalar, tmap
from ...xp import array_module, is_torch, like, to_numpy
from ..rules import NoRule, RuleContext

__all__ = ["Decision", "IndexSet", "as_tracked", "scalar", "tmap_all", "copied", "dims_of", "decided",
           "unsure_of", "torch_array", "on_host", "surely_decided", "as_judged", "is_tracked",
           "reach", "check_no_dtype", "scaled", "factor_error",
           "index_set"]


class Decision(np.ndarray):
    """A boolean array whose elements in ``unsure`` may be the other way in a
    kernel (the compared values lie within their radii of each other)."""

    unsure: np.ndarray

    def __array_finalize__(self, obj: Any) -> None:
        if obj is not None and not hasattr(self, "unsure"):
            u = getattr(obj, "unsure", None)
            self.unsure = u if u is not None and u.shape == self.shape else np.zeros(
                self.shape, dtype=bool)


def torch_array(x: Any) -> bool:
    """Whether ``x`` is an array of torch's namespace (a mask left on its device)."""
    return not isinstance(x, np.ndarray) and is_torch(array_module(x))


def decided(value: Any, unsure: Any = None) -> np.ndarray:
    """``value`` as a boolean array; a :class:`Decision` where any element is unsure.
    An array of torch's namespace stays in it, ``unsure`` (moved beside it) kept as
    its attribute whatever it holds: whether any element is unsure is not read."""
    if torch_array(value):
        return _decided_in_place(value, unsure)
    value = np.asarray(to_numpy(value), dtype=bool)  # (another device's: to the host)
    if unsure is None:
        return value
    unsure = np.broadcast_to(np.asarray(to_numpy(unsure), dtype=bool), value.shape)
    if not unsure.any():
        return value
    out = value.view(Decision)
    out.unsure = np.array(unsure)
    return out


def _decided_in_place(value: Any, unsure: Any) -> Any:
    """A boolean array of torch's namespace, a new one (its attribute its own), with
    ``unsure`` as an array of its namespace and shape."""
    xp = array_module(value)
    out = xp.ndarray(value.astype(bool).tensor)
    if unsure is not None:
        out.unsure = xp.broadcast_to(like(unsure, out).astype(bool), out.shape)
    return out


def unsure_of(x: Any) -> np.ndarray | None:
    """The elements of a boolean tensor that a kernel may decide the other way: None
    for a host array where there is none; a mask of torch's namespace as it is kept
    (none may be set: it is not read)."""
    u = getattr(x, "unsure", None)
    if u is None or torch_array(u):
        return u
    return None if not u.any() else u


def on_host(x: Any, dtype: Any = None) -> np.ndarray:
    """An integer or boolean tensor (of any namespace) as a host array of its values
    (a mask's unsure elements left behind: for a rule that reads them on the host)."""
    return np.asarray(to_numpy(x), dtype=dtype)


def surely_decided(x: Any) -> bool:
    """Whether no element of a boolean tensor may be decided otherwise by a kernel
    (on a device, one read of it)."""
    u = unsure_of(x)
    return u is None or not bool(u.any())


class IndexSet(np.ndarray):
    """Indices (an int64 array) with, per element, the set of admissible ones:
    ``candidates`` has the index array's shape plus one trailing axis listing the
    indices a kernel may return (``-1`` pads the shorter lists)."""

    candidates: np.ndarray

    def admits(self, got: Any) -> np.ndarray:
        """Elementwise: is the kernel's index ``got`` one of the admissible ones?"""
        got = np.asarray(got, dtype=np.int64)
        return np.any(self.candidates == got[..., None], axis=-1) & (got >= 0)


def index_set(index: np.ndarray, allowed: np.ndarray, positions: Any = None) -> np.ndarray:
    """``index`` as an :class:`IndexSet` where some element has more than one
    admissible index; else the plain array. ``allowed`` (the index's shape plus the
    reduced axis) marks the admissible positions along the reduced axis, whose
    index values are ``positions`` (default ``0, 1, ...``; broadcastable)."""
    index = np.asarray(index, dtype=np.int64)
    if not (allowed.sum(axis=-1) > 1).any():
        return index
    if positions is None:
        positions = np.arange(allowed.shape[-1])
    out = index.view(IndexSet)
    out.candidates = np.where(allowed, positions, -1).astype(np.int64)
    return out


def as_judged(v: Any) -> Tracked:
    """An output of a traced reference as a kernel's result is judged by: a tracked
    value itself; an integer or boolean one exact, except where it is set-valued:
    an :class:`IndexSet` element admits any index within its farthest admissible
    one (radius ``max |candidate - index|``, one float64 ulp up), a
    :class:`Decision`'s unsure element either answer (radius 1, one ulp up)."""
    if isinstance(v, Tracked):
        return v
    a = np.asarray(to_numpy(v), dtype=np.float64)
    cands = getattr(v, "candidates", None)
    unsure = getattr(v, "unsure", None)
    unsure = None if unsure is None else to_numpy(unsure)
    r = None
    if cands is not None:
        r = np.max(np.where(cands >= 0, np.abs(cands - a[..., None]), 0.0), axis=-1)
    elif unsure is not None:
        r = np.asarray(unsure, dtype=np.float64)
    if r is None or not r.any():
        return exact(a)
    # the admissible answers form a closed set: the farthest lies strictly inside
    r = np.where(r > 0, np.nextafter(r, np.inf), 0.0)
    return bounded(a, r, r.copy())


def is_tracked(x: Any) -> bool:
    return isinstance(x, Tracked)


def scalar(c: Any, model: PrecisionModel) -> Tracked:
    """A Python number as a tracked 0-d operand: a kernel evaluates it in its
    accumulation format, so a value not representable there carries the distance
    to its rounding as radius."""
    v = np.asarray(float(c), dtype=np.float64)
    t = exact(v)
    if not np.isfinite(v) or bool(representable(v, model.accumulate)):
        return t
    r = np.abs(quantize(v, model.accumulate) - v) * (1.0 + 2.0**-52)
    return bounded(v, r)


def scaled(ctx: RuleContext, t: Tracked, c: float, divide: bool = False) -> Tracked:
    """``t * c`` (``t / c``) for a Python number ``c``: the kernel's factor is ``c``,
    or its reciprocal, rounded to the accumulation format (exact for a power of two)."""
    return mul_scalar(t, c, ctx.model, divide=divide, c_rel_err=factor_error(ctx, c, divide))


def factor_error(ctx: RuleContext, c: float, divide: bool) -> float:
    """The relative error of :func:`scaled`'s factor ``c`` (its reciprocal where
    ``divide``) as the kernel uses it: 0 for a power of two."""
    m = math.frexp(abs(c))[0] if c else 0.5
    exact_c = bool(representable(np.asarray(c), ctx.model.accumulate))
    rel = 0.0 if (m == 0.5 or (exact_c and not divide)) else 2.0 * ctx.model.acc_unit()
    if divide and m != 0.5:  # an approximate division's excess over one rounding
        rel += (ctx.model.div_rel() - 1.0) * ctx.model.acc_unit()
    return rel


def as_tracked(x: Any, model: PrecisionModel) -> Tracked:
    """Any operand of an arithmetic rule as a :class:`Tracked` value: itself, an
    integer or boolean array (exact; a :class:`Decision`'s unsure elements may be
    0 or 1: radius 1), or a Python number (:func:`scalar`)."""
    if isinstance(x, Tracked):
        return x
    if isinstance(x, np.ndarray) or torch_array(x):
        t = exact(x.astype("float64"))
        u = unsure_of(x)
        if u is not None:
            r = u.astype("float64")
            t = replace(t, det=r, prob=r)
        return t
    if isinstance(x, (bool, int, float, np.number)):
        return scalar(x, model)
    raise NoRule(f"an operand of type {type(x).__name__} ({x!r}) is not a tensor or a number")


def copied(a: Any) -> Any:
    """A copy of an array, in its namespace (``np.array`` for any namespace); a NumPy
    broadcast that nothing may write (read-only, a zero stride: the radii of an exact
    input) as it is, as a copy would hold the same values in memory of its own and
    every later pass over them would read it."""
    if isinstance(a, np.ndarray) and not a.flags.writeable and 0 in a.strides:
        return a
    return array_module(a).array(a, copy=True)


def tmap_all(t: Tracked, fn: Callable[[np.ndarray], np.ndarray]) -> Tracked:
    """``fn`` (indexing, reshaping, permuting: no arithmetic) applied to every
    array of ``t`` (radii and per-element lengths broadcast to its shape first),
    the low part folded into the oracle's error."""
    return tmap(t, fn, lengths=True)


def dims_of(dim: Any, ndim: int) -> tuple[int, ...]:
    """ATen's ``dim`` argument (an int, a list, or None/empty for every axis) as
    sorted non-negative axes."""
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return tuple(range(ndim))
    dims = [dim] if isinstance(dim, int) else list(dim)
    out = []
    for d in dims:
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise InvalidArgument(f"dim={d} is out of range for a tensor of {ndim} dims")
        out.append(d % max(ndim, 1))
    return tuple(sorted(set(out)))


def reach(t: Tracked) -> np.ndarray:
    """How far a kernel's value may lie from the oracle's: the kernel radius plus
    the oracle's own error (NaN radii, unjudged elements, count as unbounded)."""
    t = folded(t)
    xp = t.xp
    r = xp.asarray(t.det + t.ref_err, dtype=xp.float64)
    return xp.where(xp.isnan(r), xp.inf, r)


def check_no_dtype(op: str, dtype: Any, allowed: Sequence[Any] = (None,)) -> None:
    """Refuse a ``dtype=`` argument the rule does not model."""
    if dtype not in allowed:
        raise NoRule(f"no rule for {op} with dtype={dtype}: the rule bounds the op in its "
                     "input's floating type; cast before the op instead")
