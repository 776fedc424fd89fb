"""Rules for ATen's data-movement ops: views, copies, joins, padding, gathers,
casts and tensor factories.

None of them does arithmetic, so each maps the value and every radius through
the same indexing (:func:`._common.tmap_all`): an element moved keeps its bound,
a padded or created element is an exact constant. Integer and boolean tensors
(NumPy arrays; a comparison's mask in torch's namespace, on its device) are moved
the same way; a boolean tensor's unsure elements (:class:`._common.Decision`)
move with it. The one rounding here is a cast to a
narrower floating type (``_to_copy``), a
:func:`~numoracle.oracle.tracked.store` to that format.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
import torch

from ...formats import format_of
from ...tracked import bounded, exact, moved, store, tcat
from ...xp import like, to_numpy
from ..rules import NoRule, RuleContext, rule
from ._common import (
    as_tracked,
    copied,
    decided,
    dims_of,
    is_tracked,
    on_host,
    reach,
    surely_decided,
    tmap_all,
    torch_array,
    unsure_of,
)

__all__ = ["move", "identity_rule", "handed_over", "viewed"]



def move(x: Any, fn: Callable[[np.ndarray], np.ndarray]) -> Any:
    """``fn`` (a pure rearrangement) applied to a tracked value, or to an integer or
    boolean array (keeping a :class:`Decision`'s unsure elements with their values)."""
    if is_tracked(x):
        return tmap_all(x, fn)
    u = unsure_of(x)
    if torch_array(x):  # a mask of torch's namespace: moved on its device
        return decided(copied(fn(x)), None if u is None else copied(fn(u)))
    out = np.array(fn(np.asarray(x)))
    return out if u is None else decided(out, np.array(fn(u)))


def _shape(size: Sequence[int], numel: int) -> tuple[int, ...]:
    size = [int(s) for s in size]
    if -1 in size:
        known = int(np.prod([s for s in size if s != -1])) or 1
        size[size.index(-1)] = numel // known
    return tuple(size)


@rule("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default",
      "aten.view_copy.default", moves=True)
def view_rule(ctx: RuleContext, x: Any, size: Sequence[int]) -> Any:
    shape = _shape(size, int(np.prod(np.shape(_values(x)))))
    return move(x, lambda a: np.reshape(a, shape))


def _values(x: Any) -> np.ndarray:
    return x.value if is_tracked(x) or torch_array(x) else np.asarray(x)


@rule("aten.alias.default", "aten.clone.default", "aten.lift_fresh_copy.default",
      "aten.detach.default", "aten.contiguous.default", moves=True)
def identity_rule(ctx: RuleContext, x: Any, **_: Any) -> Any:
    return move(x, copied)


def _handed(a: Any) -> Any:
    """``a`` itself where :func:`copied` would give a copy laid out as it (C or
    Fortran order), else that copy."""
    flags = getattr(a, "flags", None)
    return a if flags is not None and (flags.c_contiguous or flags.f_contiguous) else copied(a)


def handed_over(ctx: RuleContext, x: Any) -> Any:
    """:func:`identity_rule`'s value where nothing reads ``x`` after it (the
    interpreter knows, :mod:`~numoracle.oracle.traced.interpret`): a tracked
    value's own arrays, not copies (no other value will hold them), the same
    values and layouts; anything else as the rule gives it."""
    return tmap_all(x, _handed) if is_tracked(x) else identity_rule(ctx, x)


def _viewing(a: Any) -> Any:
    """What :func:`copied` gives, as a view of ``a`` (a NumPy array object of its own
    over the same memory) where the copy would be laid out as ``a`` is (C or Fortran
    order), else that copy."""
    if not isinstance(a, np.ndarray) or not (a.flags.c_contiguous or a.flags.f_contiguous):
        return copied(a)
    return a if not a.flags.writeable and 0 in a.strides else a.view()


def viewed(ctx: RuleContext, x: Any) -> Any:
    """:func:`identity_rule`'s value as views of ``x``'s arrays where ``x`` lives in
    NumPy (ATen's ``alias`` is a view): the same values, layouts and sharing of one
    array between radii as the copies, no element copied. A view is not an array of
    its own (:func:`~numoracle.oracle.fused.own_array`), so no rounding in place of a
    later result writes into ``x``'s memory. Anything else as the rule gives it."""
    if is_tracked(x) and isinstance(x.value, np.ndarray):
        return tmap_all(x, _viewing)
    return identity_rule(ctx, x)


@rule("aten.permute.default", "aten.permute_copy.default", moves=True)
def permute_rule(ctx: RuleContext, x: Any, dims: Sequence[int]) -> Any:
    return move(x, lambda a: np.transpose(a, [d % max(a.ndim, 1) for d in dims]))


@rule("aten.transpose.int", moves=True)
def transpose_rule(ctx: RuleContext, x: Any, dim0: int, dim1: int) -> Any:
    return move(x, lambda a: np.swapaxes(a, dim0, dim1))


@rule("aten.t.default", moves=True)
def t_rule(ctx: RuleContext, x: Any) -> Any:
    return move(x, lambda a: a.T)


@rule("aten.expand.default", "aten.expand_copy.default", moves=True)
def expand_rule(ctx: RuleContext, x: Any, size: Sequence[int], *, implicit: bool = False) -> Any:
    shape0 = np.shape(_values(x))
    lead = len(size) - len(shape0)
    shape = tuple(int(shape0[i - lead]) if s == -1 else int(s) for i, s in enumerate(size))
    return move(x, lambda a: np.broadcast_to(a, shape))


@rule("aten.squeeze.dims", "aten.squeeze.dim", "aten.squeeze.default", moves=True)
def squeeze_rule(ctx: RuleContext, x: Any, dim: Any = None) -> Any:
    shape = np.shape(_values(x))
    dims = dims_of(dim, len(shape))
    drop = tuple(d for d in dims if d < len(shape) and shape[d] == 1)
    def squeeze(a: Any) -> Any:
        return a.reshape(tuple(n for i, n in enumerate(a.shape) if i not in drop))
    return move(x, squeeze if drop else lambda a: a)


@rule("aten.unsqueeze.default", moves=True)
def unsqueeze_rule(ctx: RuleContext, x: Any, dim: int) -> Any:
    nd = np.ndim(_values(x)) + 1
    return move(x, lambda a: np.expand_dims(a, dim % nd))


@rule("aten.slice.Tensor", "aten.slice_copy.Tensor", moves=True)
def slice_rule(ctx: RuleContext, x: Any, dim: int = 0, start: Any = None, end: Any = None,
               step: int = 1) -> Any:
    nd = np.ndim(_values(x))
    index = [slice(None)] * nd
    index[dim % nd] = slice(start, end, step)
    return move(x, lambda a: a[tuple(index)])


@rule("aten.select.int", "aten.select_copy.int", moves=True)
def select_rule(ctx: RuleContext, x: Any, dim: int, index: int) -> Any:
    return move(x, lambda a: np.take(a, index, axis=dim))


@rule("aten.flip.default", moves=True)
def flip_rule(ctx: RuleContext, x: Any, dims: Sequence[int]) -> Any:
    return move(x, lambda a: np.flip(a, axis=tuple(dims)))


@rule("aten.roll.default", moves=True)
def roll_rule(ctx: RuleContext, x: Any, shifts: Sequence[int], dims: Sequence[int] = ()) -> Any:
    return move(x, lambda a: np.roll(a, tuple(shifts), axis=tuple(dims) if dims else None))


def _triangle(upper: bool) -> Callable[..., Any]:
    def tri(ctx: RuleContext, x: Any, diagonal: int = 0) -> Any:
        a = _values(x)
        rows, cols = a.shape[-2], a.shape[-1]
        keep = np.triu(np.ones((rows, cols), bool), diagonal) if upper else np.tril(
            np.ones((rows, cols), bool), diagonal)
        return move(x, lambda v: np.where(like(keep, v), v,
                                          0.0 if is_tracked(x) else np.zeros((), v.dtype)))
    return tri


rule("aten.triu.default")(_triangle(True))
rule("aten.tril.default")(_triangle(False))


@rule("aten.cat.default")
def cat_rule(ctx: RuleContext, xs: Sequence[Any], dim: int = 0) -> Any:
    xs = [x for x in xs if np.size(_values(x)) or np.ndim(_values(x)) > 1]
    if any(is_tracked(x) for x in xs):
        return tcat([as_tracked(x, ctx.model) for x in xs], axis=dim)
    return np.concatenate([on_host(x) for x in xs], axis=dim)


@rule("aten.stack.default")
def stack_rule(ctx: RuleContext, xs: Sequence[Any], dim: int = 0) -> Any:
    if any(is_tracked(x) for x in xs):
        nd = np.ndim(_values(xs[0])) + 1
        return tcat([as_tracked(x, ctx.model) for x in xs], axis=dim % nd, stack=True)
    return np.stack([on_host(x) for x in xs], axis=dim)


@rule("aten.constant_pad_nd.default")
def pad_rule(ctx: RuleContext, x: Any, pad: Sequence[int], value: Any = 0) -> Any:
    a = _values(x)
    widths = [(0, 0)] * a.ndim
    for i in range(len(pad) // 2):
        widths[a.ndim - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
    if any(lo < 0 or hi < 0 for lo, hi in widths):
        def crop(v: np.ndarray) -> np.ndarray:
            return v[tuple(slice(max(-lo, 0), v.shape[i] - max(-hi, 0))
                           for i, (lo, hi) in enumerate(widths))]
        x = move(x, crop)
        widths = [(max(lo, 0), max(hi, 0)) for lo, hi in widths]
    if not is_tracked(x):
        return np.pad(on_host(x), widths, constant_values=value)
    t = tmap_all(x, partial(np.pad, pad_width=widths))  # radii padded with 0
    v = np.pad(x.value, widths, constant_values=float(value))
    c = as_tracked(value, ctx.model)
    if c.det.any():  # a constant the kernel rounds: its radius where it was put
        inner = np.pad(np.zeros(x.shape, bool), widths, constant_values=True)
        r = np.where(like(inner, t.det), float(c.det), t.det)
        return bounded(v, r, ref_err=t.ref_err, n=t.n)
    return bounded(v, t.det, t.prob, ref_err=t.ref_err, n=t.n)


@rule("aten.index_select.default", moves=True)
def index_select_rule(ctx: RuleContext, x: Any, dim: int, index: np.ndarray) -> Any:
    idx = np.asarray(index, dtype=np.int64)
    return move(x, lambda a: np.take(a, like(idx, a), axis=dim))


@rule("aten.gather.default", moves=True)
def gather_rule(ctx: RuleContext, x: Any, dim: int, index: np.ndarray,
                sparse_grad: bool = False) -> Any:
    idx = np.asarray(index, dtype=np.int64)

    def pick(a: np.ndarray) -> np.ndarray:
        sl = tuple(slice(0, s) for s in idx.shape)
        sub = a[tuple(slice(None) if i == dim % a.ndim else sl[i] for i in range(a.ndim))]
        return np.take_along_axis(sub, like(idx, sub), axis=dim)
    return move(x, pick)


@rule("aten.index.Tensor", moves=True)
def index_rule(ctx: RuleContext, x: Any, indices: Sequence[Any]) -> Any:
    key = tuple(slice(None) if i is None else on_host(i) for i in indices)
    if not all(surely_decided(i) for i in indices if i is not None):
        raise NoRule("no rule for aten.index.Tensor with a mask a kernel may decide "
                     "otherwise (its values lie within their bound of the threshold)")
    return move(x, lambda a: a[key])


# -- casts and copies ---------------------------------------------------------------

def _cast(ctx: RuleContext, x: Any, dtype: Any) -> Any:
    if dtype is None:
        return move(x, copied)
    if dtype.is_floating_point:
        t = as_tracked(x, ctx.model)
        if not is_tracked(x):  # an integer or boolean tensor made floating: in the namespace
            t = moved(t, ctx.xp, ctx.device)
        fmt = format_of(dtype)  # float64: the oracle's own, no rounding
        return tmap_all(t, copied) if fmt.t >= 52 else store(t, ctx.model, fmt)
    np_dtype = torch.empty((), dtype=dtype, device="cpu").numpy().dtype
    if not is_tracked(x):
        if dtype == torch.bool and torch_array(x):  # a mask kept on its device
            return move(x, copied)
        return on_host(x).astype(np_dtype)
    v, r = x.value, reach(x)
    xp = x.xp
    if dtype == torch.bool:
        return decided(v != 0, (xp.abs(v) <= r) & (r > 0))
    lo, hi = xp.trunc(v - r), xp.trunc(v + r)
    if bool(xp.any(lo != hi)):
        raise NoRule(f"no rule for a cast to {dtype} of values a kernel may truncate to a "
                     "different integer (they lie within their bound of an integer)")
    return to_numpy(xp.trunc(v)).astype(np_dtype)


@rule("aten._to_copy.default")
def to_copy_rule(ctx: RuleContext, x: Any, *, dtype: Any = None, **_: Any) -> Any:
    return _cast(ctx, x, dtype)


@rule("aten.copy.default", "aten.copy_.default")
def copy_rule(ctx: RuleContext, dst: Any, src: Any, non_blocking: bool = False) -> Any:
    shape = np.shape(_values(dst))
    if is_tracked(dst) and not is_tracked(src):
        src = as_tracked(src, ctx.model)
    elif not is_tracked(dst) and is_tracked(src):
        src = _cast(ctx, src, _dtype_of(dst))
    return move(src, lambda a: copied(np.broadcast_to(a, shape)))


# -- factories ---------------------------------------------------------------------

def _filled(ctx: RuleContext, shape: Sequence[int], value: Any, dtype: Any) -> Any:
    shape = tuple(int(s) for s in shape)
    if dtype is None or dtype.is_floating_point:
        c = as_tracked(value, ctx.model)
        xp = ctx.xp
        v = xp.full(shape, float(value), dtype=xp.float64)
        if c.det.any():
            r = xp.full(shape, float(c.det), dtype=xp.float64)
            return bounded(v, r)
        return exact(v)
    return np.full(shape, value, dtype=torch.empty((), dtype=dtype, device="cpu").numpy().dtype)


@rule("aten.full.default")
def full_rule(ctx: RuleContext, size: Sequence[int], fill_value: Any, *, dtype: Any = None,
              **_: Any) -> Any:
    if dtype is None and isinstance(fill_value, (bool, int)):
        dtype = torch.bool if isinstance(fill_value, bool) else torch.int64
    return _filled(ctx, size, fill_value, dtype)


def _like_dtype(x: Any, dtype: Any) -> Any:
    if dtype is not None:
        return dtype
    return None if is_tracked(x) else _dtype_of(x)


def _dtype_of(x: Any) -> Any:
    """The torch dtype of an integer or boolean array of any namespace (not read)."""
    return torch.from_numpy(np.zeros((), np.dtype(x.dtype.name))).dtype


@rule("aten.full_like.default")
def full_like_rule(ctx: RuleContext, x: Any, fill_value: Any, *, dtype: Any = None,
                   **_: Any) -> Any:
    return _filled(ctx, np.shape(_values(x)), fill_value, _like_dtype(x, dtype))


@rule("aten.zeros_like.default", "aten.empty_like.default")
def zeros_like_rule(ctx: RuleContext, x: Any, *, dtype: Any = None, **_: Any) -> Any:
    return _filled(ctx, np.shape(_values(x)), 0, _like_dtype(x, dtype))


@rule("aten.ones_like.default")
def ones_like_rule(ctx: RuleContext, x: Any, *, dtype: Any = None, **_: Any) -> Any:
    return _filled(ctx, np.shape(_values(x)), 1, _like_dtype(x, dtype))


@rule("aten.zeros.default", "aten.empty.memory_format")
def zeros_rule(ctx: RuleContext, size: Sequence[int], *, dtype: Any = None, **_: Any) -> Any:
    return _filled(ctx, size, 0, dtype)


@rule("aten.empty_permuted.default")
def empty_permuted_rule(ctx: RuleContext, size: Sequence[int], physical_layout: Any, *,
                        dtype: Any = None, **_: Any) -> Any:
    return _filled(ctx, size, 0, dtype)


@rule("aten.new_zeros.default", "aten.new_empty.default")
def new_zeros_rule(ctx: RuleContext, x: Any, size: Sequence[int], *, dtype: Any = None,
                   **_: Any) -> Any:
    return _filled(ctx, size, 0, _like_dtype(x, dtype))


@rule("aten.ones.default")
def ones_rule(ctx: RuleContext, size: Sequence[int], *, dtype: Any = None, **_: Any) -> Any:
    return _filled(ctx, size, 1, dtype)


@rule("aten.scalar_tensor.default")
def scalar_tensor_rule(ctx: RuleContext, s: Any, *, dtype: Any = None, **_: Any) -> Any:
    return _filled(ctx, (), s, dtype)


@rule("aten.arange.start_step", "aten.arange.default", "aten.arange.start")
def arange_rule(ctx: RuleContext, *args: Any, dtype: Any = None, **_: Any) -> Any:
    values = np.arange(*args)
    if (dtype is not None and dtype.is_floating_point) or values.dtype.kind == "f":
        return moved(as_tracked(values.astype(np.float64), ctx.model), ctx.xp, ctx.device)
    return values.astype(np.int64)
