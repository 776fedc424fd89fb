"""Checking one rule of the traced oracle's library against torch and mpmath.

A :class:`RuleCase` names an ATen overload, its arguments (float32 tensors for
the floating ones) and an mpmath reference of its floating outputs. :func:`check`

* runs the op in torch float32 (the kernel) and the rule on the same inputs
  (exact float64 values), and asserts that every floating output of torch lies
  within the rule's bound of the rule's value (an index output among the
  admissible ones, a boolean output equal where the rule is sure);
* evaluates the mpmath reference at 120 bits on the same inputs and asserts that
  it lies within the rule's own error (``ref_err``) of the rule's value;
* asserts that the bound is sharp enough to catch a wrong result: torch's output
  moved by ``1e-3`` of the largest magnitude leaves the bound somewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import mpmath
import numpy as np
import torch

import numoracle.oracle.traced.library  # noqa: F401  (registers the rules)
from numoracle.oracle.precision import get_model
from numoracle.oracle.traced import Claims, RuleContext, lookup
from numoracle.oracle.tracked import Tracked, exact

MP_PREC = 120


@dataclass
class RuleCase:
    """One checked call: ``name(*args, **kwargs)``; ``mp`` maps the inputs as
    mpmath object arrays (floating tensors) or plain values to the floating
    outputs (one object array, or a tuple lined up with them); None where every
    output is an exact selection of the inputs (checked against float64 torch)."""

    name: str
    args: Sequence[Any]
    kwargs: dict[str, Any] = field(default_factory=dict)
    mp: Callable[..., Any] | None = None
    claims: Claims = field(default_factory=Claims)
    model: str = "fp32"
    sharp: bool = True
    id: str = ""

    def __str__(self) -> str:
        return f"{self.name}{'-' + self.id if self.id else ''}"


def aten_op(name: str) -> Any:
    _, packet, overload = name.split(".")
    return getattr(getattr(torch.ops.aten, packet), overload)


def _to_rule(a: Any) -> Any:
    if isinstance(a, torch.Tensor):
        if a.is_floating_point():
            return exact(a.detach().double().numpy())
        return a.numpy().copy()
    if isinstance(a, (list, tuple)) and a and any(isinstance(x, torch.Tensor) for x in a):
        return [_to_rule(x) for x in a]
    return a


def mp_array(a: Any) -> Any:
    """A float tensor as an object array of exact mpmath numbers."""
    v = a.detach().double().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    out = np.empty(v.shape, dtype=object)
    for i, x in np.ndenumerate(v):
        out[i] = mpmath.mpf(float(x))
    return out


def _to_mp(a: Any) -> Any:
    if isinstance(a, torch.Tensor):
        return mp_array(a) if a.is_floating_point() else a.numpy()
    if isinstance(a, (list, tuple)) and a and any(isinstance(x, torch.Tensor) for x in a):
        return [_to_mp(x) for x in a]
    return a


def mpmap(f: Callable[[Any], Any], a: Any) -> Any:
    """``f`` elementwise over an object array."""
    out = np.empty(np.shape(a), dtype=object)
    for i, x in np.ndenumerate(a):
        out[i] = f(x)
    return out


def msum(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """An exact sum of mpmath numbers (object arrays sum with mpmath's adds)."""
    return np.sum(a, axis=axis, keepdims=keepdims)


def _tuple(x: Any) -> tuple[Any, ...]:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def check(case: RuleCase) -> tuple[Any, ...]:
    """Run ``case`` (see the module docstring); returns the rule's outputs."""
    ctx = RuleContext(get_model(case.model), case.claims)
    with torch.no_grad():
        got = _tuple(aten_op(case.name)(*case.args, **case.kwargs))
    rule_args = [_to_rule(a) for a in case.args]
    out = _tuple(lookup(case.name)(ctx, *rule_args, **case.kwargs))
    assert len(out) >= len([g for g in got if isinstance(g, torch.Tensor)])
    floats = []
    for g, r in zip(got, out, strict=False):
        if isinstance(r, Tracked):
            floats.append(r)
            k = g.detach().double().numpy()
            assert r.value.shape == k.shape, (case.name, r.value.shape, k.shape)
            lo = 0.0 if r.lo is None else r.lo
            bound = r.det + r.ref_err
            with np.errstate(invalid="ignore"):
                err = np.abs(k - (r.value + lo))
                err = np.where(k == r.value, 0.0, err)  # equal infinities
                judged = ~np.isnan(bound) & ~np.isinf(bound)
                bad = judged & ~(err <= bound)
            assert not bad.any(), (
                f"{case}: torch float32 outside the bound at {np.argwhere(bad)[:3].tolist()}: "
                f"err {err[bad][:3]}, bound {bound[bad][:3]}, value {r.value[bad][:3]}")
            if case.sharp and k.size:
                finite = judged & np.isfinite(k)
                scale = float(np.max(np.abs(k[finite]))) if finite.any() else 0.0
                if scale > 0:
                    with np.errstate(invalid="ignore"):  # -inf - -inf: not judged
                        moved = np.abs(k + 1e-3 * scale - (r.value + lo))
                    assert (finite & (moved > bound)).any(), (
                        f"{case}: a result off by 1e-3 of its scale passes everywhere: the "
                        f"bound (max {float(np.max(bound[finite]))}) catches nothing")
        elif isinstance(g, torch.Tensor):
            k = g.numpy()
            allowed = getattr(r, "admits", None)
            if allowed is not None:
                assert allowed(k).all(), f"{case}: torch's index is not admissible"
            else:
                sure = ~getattr(r, "unsure", np.zeros(np.shape(r), bool))
                assert np.shape(r) == k.shape, (case.name, np.shape(r), k.shape)
                assert np.array_equal(np.asarray(r)[sure], k[sure]), f"{case}: {r} != {k}"
    if case.mp is not None:
        with mpmath.workprec(MP_PREC):
            refs = _tuple(case.mp(*[_to_mp(a) for a in case.args], **case.kwargs))
        assert len(refs) == len(floats), (case.name, len(refs), len(floats))
        for ref, r in zip(refs, floats, strict=True):
            ref = np.asarray(ref, dtype=object).reshape(r.value.shape)
            lo = np.zeros(r.value.shape) if r.lo is None else np.broadcast_to(r.lo, r.value.shape)
            ref_err = np.broadcast_to(r.ref_err, r.value.shape)
            for i in np.ndindex(r.value.shape):
                exact_v = ref[i]
                v = r.value[i]
                if not np.isfinite(v) or not mpmath.isfinite(exact_v):
                    continue
                diff = abs(mpmath.mpf(float(v)) + mpmath.mpf(float(lo[i])) - exact_v)
                assert diff <= mpmath.mpf(float(ref_err[i])) * (1 + mpmath.mpf(2) ** -40) + \
                    mpmath.mpf(2) ** -1070, (f"{case}: the exact value at {i} is {exact_v}, "
                                             f"the rule's {v} with ref_err {ref_err[i]}")
    return out
