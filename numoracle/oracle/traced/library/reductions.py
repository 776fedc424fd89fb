"""Rules for ATen's reductions: sums and means, prefix sums, maxima and minima
with their indices, vector norms and variances.

A sum is a contraction with a vector of ones (:func:`~numoracle.oracle.tracked.sum_`):
the bound of its order model over ``S = sum |x_i| + radii``, exact in the exact
regime. A mean divides the sum by its length, in the kernel as a division or a
multiplication by the rounded reciprocal. A prefix sum (``cumsum``) is a
contraction with a triangle of ones whose zeros are structural: element ``k`` has
``k + 1`` terms; under the per-op rounding claim its running value is rounded
to the storage format at every step (:meth:`RuleContext.running_model`), as eager
torch on CUDA keeps it, which bounds a wider running value too.

A maximum selects: no rounding, the radius is the largest along the axis. Its
index is set-valued (:class:`._common.IndexSet`): every position whose value may
be the largest in some kernel (its interval reaches the largest lower end) is an
admissible answer, so a kernel that breaks a tie the other way is not wrong.

A variance is computed as the kernel claims (``ctx.model.variance``): two-pass
(the mean first, then the squared deviations) or one-pass (``E[x²] - E[x]²``,
whose cancellation the composed bound carries).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from ... import elementwise as ew
from ...tracked import Tracked, concat, exact, folded, matmul, negated, sub, sum_, tcat
from ...xp import array_module, to_numpy
from ..rules import NoRule, RuleContext, rule
from ._common import (
    as_tracked,
    check_no_dtype,
    copied,
    decided,
    dims_of,
    index_set,
    is_tracked,
    reach,
    scaled,
    tmap_all,
    torch_array,
    unsure_of,
)

__all__ = ["reduce_sum", "reduce_mean", "variance", "last_axis", "arg_lanes", "arg_extreme"]


def last_axis(x: Tracked, dims: tuple[int, ...]) -> Tracked:
    """``x`` with ``dims`` moved to the end and merged into one axis."""
    nd = x.value.ndim
    keep = [d for d in range(nd) if d not in dims]
    shape = [x.shape[d] for d in keep] + [int(np.prod([x.shape[d] for d in dims]))]
    return tmap_all(x, lambda a: np.transpose(a, keep + list(dims)).reshape(shape))


def _keepdims(t: Any, shape: tuple[int, ...], dims: tuple[int, ...], keepdim: bool) -> Any:
    if not keepdim:
        return t
    kept = tuple(1 if d in dims else s for d, s in enumerate(shape))
    if is_tracked(t):
        return tmap_all(t, lambda a: np.reshape(a, kept))
    return np.reshape(t, kept)


def reduce_sum(ctx: RuleContext, x: Tracked, dims: tuple[int, ...]) -> Tracked:
    """The sum over ``dims`` (no keepdim)."""
    if x.value.ndim == 0:
        return tmap_all(x, copied)
    flat = last_axis(x, dims)
    if flat.shape[-1] == 0:
        return exact(flat.xp.zeros(flat.shape[:-1]))
    return sum_(flat, axis=-1, model=ctx.model)


def reduce_mean(ctx: RuleContext, x: Tracked, dims: tuple[int, ...]) -> Tracked:
    """The mean over ``dims`` (no keepdim): the sum divided by its length."""
    k = int(np.prod([x.shape[d] for d in dims])) if x.value.ndim else 1
    return scaled(ctx, reduce_sum(ctx, x, dims), float(k), divide=True)


@rule("aten.sum.dim_IntList", "aten.sum.default")
def sum_rule(ctx: RuleContext, x: Any, dim: Any = None, keepdim: bool = False, *,
             dtype: Any = None) -> Any:
    dims = dims_of(dim, np.ndim(x.value if is_tracked(x) else x))
    if not is_tracked(x):
        return np.sum(np.asarray(x), axis=dims, keepdims=keepdim)
    check_no_dtype("aten.sum", dtype)
    return _keepdims(reduce_sum(ctx, x, dims), x.shape, dims, keepdim)


@rule("aten.mean.dim", "aten.mean.default")
def mean_rule(ctx: RuleContext, x: Tracked, dim: Any = None, keepdim: bool = False, *,
              dtype: Any = None) -> Tracked:
    check_no_dtype("aten.mean", dtype)
    dims = dims_of(dim, x.value.ndim)
    return _keepdims(reduce_mean(ctx, x, dims), x.shape, dims, keepdim)


def _extreme(x: Tracked, dims: tuple[int, ...], largest: bool) -> Tracked:
    flat = last_axis(folded(x), dims)
    if largest:
        return ew.amax(flat, axis=-1)
    neg = tmap_all(flat, copied)
    return negated(ew.amax(negated(neg), axis=-1))


def _amax(largest: bool) -> Any:
    def amax_rule(ctx: RuleContext, x: Any, dim: Any = (), keepdim: bool = False) -> Any:
        dims = dims_of(dim, np.ndim(x.value if is_tracked(x) else x))
        if not is_tracked(x):
            f = np.max if largest else np.min
            return f(np.asarray(x), axis=dims, keepdims=keepdim)
        return _keepdims(_extreme(x, dims, largest), x.shape, dims, keepdim)
    return amax_rule


def arg_lanes(values: np.ndarray, radius: np.ndarray, *, ties_only: bool = False
              ) -> tuple[np.ndarray, np.ndarray | None]:
    """The index of the largest value of each lane (the last axis; a NaN wins, as
    in torch) and the admissible ones: every position whose interval
    ``value ± radius`` reaches the largest lower end of the lane (``ties_only``:
    None where no lane admits more than one, found where the values are, so that
    a device's admissible positions come to the host only where some lane ties)."""
    v, r = values, radius
    xp = array_module(v)
    nan = xp.isnan(v)
    any_nan = nan.any(-1)
    with np.errstate(invalid="ignore"):
        filled = xp.where(nan, -xp.inf, v)
        best = xp.max(filled, axis=-1) if v.shape[-1] else xp.zeros(v.shape[:-1])
        idx = xp.where(any_nan, xp.argmax(nan, axis=-1),
                       xp.argmax(filled == best[..., None], axis=-1))
        floor = xp.max(xp.where(nan, -xp.inf, v - r), axis=-1, keepdims=True)
        allowed = xp.where(any_nan[..., None], nan | xp.isinf(r), (v + r >= floor) | xp.isinf(r))
    if ties_only and not bool((xp.count_nonzero(allowed, axis=-1) > 1).any()):
        return to_numpy(idx), None
    return to_numpy(idx), to_numpy(allowed)  # indices live on the host


def arg_extreme(x: Tracked, axis: int, largest: bool, *, value: bool = True
                ) -> tuple[Tracked | None, np.ndarray]:
    """The extreme over ``axis`` (None where ``value`` is False: the index alone is
    wanted) and its index, set-valued where values tie within their radii (see the
    module docstring)."""
    flat = last_axis(folded(x), (axis % max(x.value.ndim, 1),))
    idx, allowed = arg_lanes(flat.value if largest else -flat.value, reach(flat),
                             ties_only=True)
    del flat
    index = np.asarray(idx, dtype=np.int64) if allowed is None else index_set(idx, allowed)
    if not value:
        return None, index
    return _extreme(x, (axis % max(x.value.ndim, 1),), largest), index


def _max_dim(largest: bool) -> Any:
    def max_dim_rule(ctx: RuleContext, x: Tracked, dim: int, keepdim: bool = False) -> Any:
        value, idx = arg_extreme(x, dim, largest)
        assert value is not None
        dims = (dim % max(x.value.ndim, 1),)
        return (_keepdims(value, x.shape, dims, keepdim),
                _keep_index(idx, x.shape, dims, keepdim))
    return max_dim_rule


def _keep_index(idx: np.ndarray, shape: tuple[int, ...], dims: tuple[int, ...],
                keepdim: bool) -> np.ndarray:
    if not keepdim:
        return idx
    kept = tuple(1 if d in dims else s for d, s in enumerate(shape))
    cands = getattr(idx, "candidates", None)
    out = np.reshape(np.asarray(idx), kept)
    if cands is None:
        return out
    return index_set(out, cands.reshape(kept + cands.shape[-1:]) >= 0,
                     cands.reshape(kept + cands.shape[-1:]))


def _argmax(largest: bool) -> Any:
    def argmax_rule(ctx: RuleContext, x: Tracked, dim: Any = None, keepdim: bool = False) -> Any:
        if dim is None:
            flat = tmap_all(x, np.ravel)
            _, idx = arg_extreme(flat, 0, largest, value=False)
            if keepdim:
                return _keep_index(idx, x.shape, tuple(range(x.value.ndim)), True)
            return idx
        _, idx = arg_extreme(x, dim, largest, value=False)
        return _keep_index(idx, x.shape, (dim % max(x.value.ndim, 1),), keepdim)
    return argmax_rule


for _name, _largest in (("max", True), ("min", False)):
    rule(f"aten.{_name}.dim")(_max_dim(_largest))
    rule(f"aten.arg{_name}.default")(_argmax(_largest))
    rule(f"aten.a{_name}.default", f"aten.{_name}.default")(_amax(_largest))

#: the widest prefix sum contracted in one block (its triangle of ones is block x n)
_CUMSUM_BLOCK = 512


def _scan(ctx: RuleContext, x: Any, dim: int, dtype: Any, name: str,
          integer: Callable[..., np.ndarray], along_last: Callable[[Tracked], Tracked]) -> Any:
    """A prefix scan of ``x`` along ``dim``: ``integer`` on an integer tensor (exact),
    else ``along_last`` on the tracked values with ``dim`` moved last."""
    if not is_tracked(x):
        return integer(np.asarray(x), axis=dim)
    check_no_dtype(f"aten.{name}", dtype)
    nd = x.value.ndim
    if nd == 0 or x.value.shape[dim % nd] == 0:
        return tmap_all(x, copied)
    axis = dim % nd
    out = along_last(tmap_all(x, lambda a: np.moveaxis(a, axis, -1)))
    return tmap_all(out, lambda a: np.moveaxis(a, -1, axis))


@rule("aten.cumsum.default")
def cumsum_rule(ctx: RuleContext, x: Any, dim: int, *, dtype: Any = None) -> Any:
    def prefix_sums(moved: Tracked) -> Tracked:
        n = moved.shape[-1]
        blocks = []
        for j0 in range(0, n, _CUMSUM_BLOCK):
            j1 = min(n, j0 + _CUMSUM_BLOCK)
            tri = np.triu(np.ones((j1, j1 - j0)), -j0)  # [i, j] = 1 where i <= j0 + j
            blocks.append(matmul(tmap_all(moved, _head(j1)), exact(tri), ctx.running_model(),
                                 terms=np.arange(j0 + 1, j1 + 1)))
        return concat(blocks, axis=-1) if len(blocks) > 1 else blocks[0]
    return _scan(ctx, x, dim, dtype, "cumsum", np.cumsum, prefix_sums)


def _head(k: int) -> Any:
    def head(a: np.ndarray) -> np.ndarray:
        return a[..., :k]
    return head


@rule("aten.cumprod.default")
def cumprod_rule(ctx: RuleContext, x: Any, dim: int, *, dtype: Any = None) -> Any:
    """Prefix products, one rounded multiplication after another (a product of ``k``
    factors in any association has the same first-order bound, ``(k - 1) u``)."""
    def prefix_products(moved: Tracked) -> Tracked:
        parts = [tmap_all(moved, lambda a: a[..., 0])]
        model = ctx.running_model()
        for k in range(1, moved.shape[-1]):
            parts.append(ew.mul(parts[-1], tmap_all(moved, _column(k)), model))
        return tcat([tmap_all(p, lambda a: a[..., None]) for p in parts], axis=-1)
    return _scan(ctx, x, dim, dtype, "cumprod", np.cumprod, prefix_products)


def _column(k: int) -> Any:
    def column(a: np.ndarray) -> np.ndarray:
        return a[..., k]
    return column


@rule("aten.linalg_vector_norm.default")
def vector_norm_rule(ctx: RuleContext, x: Tracked, ord: Any = 2, dim: Any = None,
                     keepdim: bool = False, *, dtype: Any = None) -> Tracked:
    check_no_dtype("aten.linalg_vector_norm", dtype)
    dims = dims_of(dim, x.value.ndim)
    o = float(ord)
    a = folded(x)
    mag = replace(a, value=np.abs(a.value))
    if o == 2.0:
        out = ew.sqrt(reduce_sum(ctx, ew.mul(a, a, ctx.model), dims), ctx.model)
    elif o == 1.0:
        out = reduce_sum(ctx, mag, dims)
    elif o == float("inf"):
        out = _extreme(mag, dims, True)
    else:
        raise NoRule(f"no rule for aten.linalg_vector_norm with ord={ord}: rules exist for "
                     "ord 1, 2 and inf")
    return _keepdims(out, x.shape, dims, keepdim)


def variance(ctx: RuleContext, x: Tracked, dims: tuple[int, ...], correction: float = 0.0,
             mean: Tracked | None = None) -> tuple[Tracked, Tracked]:
    """The variance over ``dims`` with ``correction`` (no keepdim) and the mean,
    as the claimed variance algorithm computes them."""
    m = ctx.model
    k = int(np.prod([x.shape[d] for d in dims]))
    mu = reduce_mean(ctx, x, dims) if mean is None else mean
    denom = max(k - correction, 0.0)
    if ctx.model.variance == "two-pass":
        kept = tuple(1 if d in dims else s for d, s in enumerate(x.shape))
        d = sub(x, tmap_all(mu, lambda a: np.reshape(a, kept)), m)
        ss = reduce_sum(ctx, ew.mul(d, d, m), dims)
    else:
        sq = reduce_sum(ctx, ew.mul(x, x, m), dims)
        s = reduce_sum(ctx, x, dims)
        ss = sub(sq, scaled(ctx, ew.mul(s, s, m), float(k), divide=True), m)
    if denom == 0.0:
        return ew.div(ss, as_tracked(0.0, m), m), mu
    return scaled(ctx, ss, float(denom), divide=True), mu


@rule("aten.var.correction", "aten.var.dim")
def var_rule(ctx: RuleContext, x: Tracked, dim: Any = None, *args: Any, correction: Any = None,
             keepdim: bool = False, **kw: Any) -> Tracked:
    dims = dims_of(dim, x.value.ndim)
    if args:  # var.dim(x, dim, unbiased, keepdim)
        correction = 1.0 if args[0] else 0.0
        keepdim = bool(args[1]) if len(args) > 1 else keepdim
    corr = 1.0 if correction is None else float(correction)
    return _keepdims(variance(ctx, x, dims, corr)[0], x.shape, dims, keepdim)


@rule("aten.std.correction", "aten.std.dim")
def std_rule(ctx: RuleContext, x: Tracked, dim: Any = None, *args: Any, correction: Any = None,
             keepdim: bool = False, **kw: Any) -> Tracked:
    v = var_rule(ctx, x, dim, *args, correction=correction, keepdim=keepdim)
    return ew.sqrt(v, ctx.model)


def _any(ctx: RuleContext, x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    if is_tracked(x):
        x = decided(folded(x).value != 0, (np.abs(x.value) <= reach(x)) & (reach(x) > 0))
    arr = x.astype(bool) if torch_array(x) else np.asarray(x, dtype=bool)
    dims = dims_of(dim, arr.ndim)
    value = np.any(arr, axis=dims, keepdims=keepdim)
    u = unsure_of(x)
    if u is None:
        return value
    sure_true = np.any(arr & ~u, axis=dims, keepdims=keepdim)
    return decided(value, np.any(u, axis=dims, keepdims=keepdim) & ~sure_true)


rule("aten.any.dim", "aten.any.default", "aten.any.dims")(_any)
