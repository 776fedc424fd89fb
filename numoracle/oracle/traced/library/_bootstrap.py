"""Fallback rules for the few ATen ops the interpreter's own tests need.

Each is registered only where the library's family modules (imported first,
here) define no rule of the same name, so the family modules always win.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

import numpy as np

from ...elementwise import mul as _mul
from ...elementwise import widen
from ...formats import quantize
from ...tracked import Tracked, add, exact, matmul, mul_scalar, relu, sub, sum_, tmap
from ..rules import RULES, RuleContext

__all__: list[str] = []

from .. import library as _library

for _info in pkgutil.iter_modules(_library.__path__):
    if _info.name != __name__.rsplit(".", 1)[1]:
        importlib.import_module(f"{_library.__name__}.{_info.name}")


def _fallback(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        for name in names:
            RULES.setdefault(name, fn)
        return fn
    return register


def _constant(ctx: RuleContext, c: float) -> Tracked:
    """A Python scalar as the kernel uses it: rounded to the accumulation format."""
    q = float(quantize(np.float64(c), ctx.model.accumulate))
    t = exact(np.asarray(float(c)))
    return widen(t, abs(q - float(c))) if q != float(c) else t


def _operand(ctx: RuleContext, a: Any) -> Tracked:
    return a if isinstance(a, Tracked) else _constant(ctx, a)


@_fallback("aten.mm.default", "aten.bmm.default")
def _mm(ctx: RuleContext, a: Tracked, b: Tracked) -> Tracked:
    return matmul(a, b, ctx.model)


@_fallback("aten.addmm.default")
def _addmm(ctx: RuleContext, bias: Tracked, a: Tracked, b: Tracked, *, beta: float = 1,
           alpha: float = 1) -> Tracked:
    if beta != 1 or alpha != 1:
        out = matmul(a, b, ctx.model)
        return add(mul_scalar(out, alpha, ctx.model), mul_scalar(bias, beta, ctx.model),
                   ctx.model)
    full = tmap(bias, lambda v: np.broadcast_to(v, (a.shape[0], b.shape[1])))
    return matmul(a, b, ctx.model, bias=full)


@_fallback("aten.add.Tensor")
def _add(ctx: RuleContext, a: Any, b: Any, *, alpha: float = 1) -> Tracked:
    bb = _operand(ctx, b)
    if alpha != 1:
        bb = mul_scalar(bb, alpha, ctx.model)
    return add(_operand(ctx, a), bb, ctx.model)


@_fallback("aten.sub.Tensor")
def _sub(ctx: RuleContext, a: Any, b: Any, *, alpha: float = 1) -> Tracked:
    bb = _operand(ctx, b)
    if alpha != 1:
        bb = mul_scalar(bb, alpha, ctx.model)
    return sub(_operand(ctx, a), bb, ctx.model)


@_fallback("aten.mul.Tensor")
def _mul_rule(ctx: RuleContext, a: Any, b: Any) -> Tracked:
    if not isinstance(b, Tracked) or not isinstance(a, Tracked):
        t, c = (a, b) if isinstance(a, Tracked) else (b, a)
        q = float(quantize(np.float64(c), ctx.model.accumulate))
        rel = abs(q - float(c)) / abs(float(c)) if c else 0.0
        return mul_scalar(t, float(c), ctx.model, c_rel_err=rel)
    return _mul(a, b, ctx.model)


@_fallback("aten.relu.default")
def _relu(ctx: RuleContext, a: Tracked) -> Tracked:
    return relu(a)


@_fallback("aten.sum.dim_IntList")
def _sum(ctx: RuleContext, a: Tracked, dims: Any, keepdim: bool = False, *,
         dtype: Any = None) -> Tracked:
    axes = sorted({d % a.value.ndim for d in (dims or range(a.value.ndim))}, reverse=True)
    moved = tmap(a, lambda v: np.moveaxis(v, axes, list(range(v.ndim - len(axes), v.ndim))))
    lead = moved.shape[:moved.value.ndim - len(axes)]
    flat = tmap(moved, lambda v: v.reshape((*lead, -1)))
    out = sum_(flat, axis=-1, model=ctx.model)
    if keepdim:
        shape = tuple(1 if i in axes else s for i, s in enumerate(a.shape))
        out = tmap(out, lambda v: v.reshape(shape))
    return out


def _view(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[Any], Any]:
    def apply(a: Any) -> Any:
        return tmap(a, fn) if isinstance(a, Tracked) else fn(a)
    return apply


@_fallback("aten.view.default", "aten._unsafe_view.default", "aten.view_copy.default",
           "aten.reshape.default")
def _reshape(ctx: RuleContext, a: Any, shape: Any) -> Any:
    return _view(lambda v: v.reshape(tuple(shape)))(a)


@_fallback("aten.permute.default", "aten.permute_copy.default")
def _permute(ctx: RuleContext, a: Any, dims: Any) -> Any:
    return _view(lambda v: np.transpose(v, tuple(dims)))(a)


@_fallback("aten.t.default")
def _t(ctx: RuleContext, a: Any) -> Any:
    return _view(lambda v: v.T)(a)


@_fallback("aten.expand.default")
def _expand(ctx: RuleContext, a: Any, shape: Any, *, implicit: bool = False) -> Any:
    def grow(v: np.ndarray) -> np.ndarray:
        lead = len(shape) - v.ndim
        full = tuple(v.shape[i - lead] if s == -1 else s for i, s in enumerate(shape))
        return np.broadcast_to(v, full)
    return _view(grow)(a)


@_fallback("aten.clone.default", "aten.alias.default", "aten.detach.default",
           "aten.lift_fresh_copy.default")
def _clone(ctx: RuleContext, a: Any, *, memory_format: Any = None) -> Any:
    return _view(np.array)(a)


class _Mask(np.ndarray):
    """A boolean result of a comparison, with ``unsure``: where the kernel's
    operands may compare the other way (within their radii)."""

    unsure: np.ndarray


def _compare(op: Callable[[Any, Any], Any], a: Any, b: Any) -> np.ndarray:
    av = a.value if isinstance(a, Tracked) else np.asarray(a)
    bv = b.value if isinstance(b, Tracked) else np.asarray(b)
    slack = sum((t.det + t.ref_err if isinstance(t, Tracked) else 0.0) for t in (a, b))
    with np.errstate(invalid="ignore"):
        mask = np.asarray(op(av, bv)).view(_Mask)
        mask.unsure = np.broadcast_to(~(np.abs(av - bv) > slack) & (slack != 0) | (
            np.isnan(slack) if isinstance(slack, np.ndarray) else False), mask.shape)
    return mask


@_fallback("aten.le.Scalar", "aten.le.Tensor")
def _le(ctx: RuleContext, a: Any, b: Any) -> np.ndarray:
    return _compare(np.less_equal, a, b)


@_fallback("aten.gt.Scalar", "aten.gt.Tensor")
def _gt(ctx: RuleContext, a: Any, b: Any) -> np.ndarray:
    return _compare(np.greater, a, b)


@_fallback("aten.scalar_tensor.default")
def _scalar_tensor(ctx: RuleContext, c: Any, **kwargs: Any) -> Tracked:
    return _constant(ctx, float(c))


@_fallback("aten.where.self")
def _where(ctx: RuleContext, cond: Any, a: Any, b: Any) -> Tracked:
    ta, tb = _operand(ctx, a), _operand(ctx, b)
    shape = np.broadcast_shapes(np.shape(cond), ta.shape, tb.shape)
    ta = tmap(ta, lambda v: np.broadcast_to(v, shape))
    tb = tmap(tb, lambda v: np.broadcast_to(v, shape))
    c = np.broadcast_to(np.asarray(cond, dtype=bool), shape)
    pick = Tracked(value=np.where(c, ta.value, tb.value),
                   ref_err=np.where(c, ta.ref_err, tb.ref_err),
                   det=np.where(c, ta.det, tb.det), prob=np.where(c, ta.prob, tb.prob),
                   mag=np.where(c, ta.mag, tb.mag), n=1)
    unsure = getattr(cond, "unsure", None)
    if unsure is not None and np.any(unsure):
        # the kernel may take the other branch: both answers lie within the radius
        gap = np.where(np.broadcast_to(unsure, shape),
                       np.abs(ta.value - tb.value) + np.maximum(ta.det, tb.det), 0.0)
        pick = widen(pick, gap)
    return pick
