"""Cases: the strategy that draws whole :class:`~numoracle.cases.case.Case` objects.

One strategy serves every op: the op registry says which parameters an op has,
its shapes and its reduction lengths; the op's plan (its ``plan`` attribute,
:mod:`numoracle.oracle.ops.plan`) says how to draw each parameter. Dimensions
are drawn one at a time, each within the budget the limits leave given what
is drawn so far (the rest at their smallest), so no draw is filtered away.
Shrinking moves towards small shapes, batch 1, the exact family, fp32, ``C``
layouts and no overlays.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from hypothesis import reject
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from ..cases.case import Case
from ..errors import InvalidArgument
from ..oracle.formats import get_format
from ..oracle.ops import Op, get_op
from ..oracle.ops.plan import (
    REGIMES,
    Choice,
    Derived,
    Dim,
    Flag,
    Multiple,
    Pair,
    Shape,
    Spec,
    Widths,
    smallest,
)
from ._validate import as_strategy, check_int, choice_strategy, is_strategy
from .formats import STORAGE_FORMATS
from .layouts import LayoutArg, _layouts_strategy, normal_layout
from .sizes import MAX_SIZE, _dims
from .values import DEFAULT_FAMILIES, KNOWN_FAMILIES, _overlays

__all__ = ["cases", "edges", "DEFAULT_MAX_ELEMENTS", "REALISTIC_MAX_ELEMENTS", "DIM_MAX",
           "REDUCTION_MAX", "SEED_MAX"]

#: default bound on the total number of input elements of a case: small enough
#: for about a hundred cases a second on a CPU
DEFAULT_MAX_ELEMENTS = 1 << 16
#: default bound on the input elements of a case in the ``realistic`` regime
#: (a float64 copy of 256 MiB; the oracle holds a few such arrays per output)
REALISTIC_MAX_ELEMENTS = 1 << 25
#: default largest dimension
DIM_MAX = 1024
#: largest dimension when ``max_reduction`` asks for longer reductions than DIM_MAX
REDUCTION_MAX = 1 << 16
#: seeds are drawn from ``[0, SEED_MAX]``
SEED_MAX = 2**32 - 1
#: one case in LONG_SHARE of the ``small`` regime has a long reduction: one
#: dimension beyond :data:`DIM_MAX` (up to :data:`REDUCTION_MAX` and the limits),
#: the others at most :data:`LONG_OTHERS`, so it costs what other cases cost
LONG_SHARE = 6
#: the largest other dimension of a case with a long reduction
LONG_OTHERS = 16

Params = dict[str, Any]


@dataclass(frozen=True)
class _Limits:
    """What a case may cost: total input elements, total output elements (each
    output element costs the oracle several float64 radii) and longest reduction."""

    max_elements: int
    max_reduction: int | None
    #: parameters that follow others (a square map's width; a multiple drawn from
    #: factors, which follows its base until it is drawn): recomputed before each
    #: check, so a trial value is judged with what it implies
    derived: tuple[Derived | Multiple, ...] = ()
    #: the dimension drawn long in a case with a long reduction (None: no such case)
    long: str | None = None

    def fits(self, op: Op, params: Mapping[str, Any]) -> bool:
        if self.derived:
            params = dict(params)
            for spec in self.derived:
                if not isinstance(spec, Multiple) or int(params[spec.name]) % int(
                        params[spec.of]):
                    params[spec.name] = spec.least(params)
        for shapes in (op.input_shapes(params), op.output_shapes(params)):
            if sum(math.prod(s) for s in shapes.values()) > self.max_elements:
                return False
        longest = max(op.reductions(params).values(), default=0)
        return self.max_reduction is None or longest <= self.max_reduction

    @property
    def dim_cap(self) -> int:
        """Largest dimension by default: :data:`DIM_MAX`, or up to
        :data:`REDUCTION_MAX` where ``max_reduction`` allows longer reductions."""
        return min(REDUCTION_MAX, max(DIM_MAX, self.max_reduction or 0))

    def cap(self, name: str) -> int:
        """Largest value of the dimension ``name``: :attr:`dim_cap`, or, in a case
        with a long reduction, :data:`REDUCTION_MAX` for the long dimension and
        :data:`LONG_OTHERS` for the others."""
        if self.long is None:
            return self.dim_cap
        return REDUCTION_MAX if name == self.long else min(self.dim_cap, LONG_OTHERS)


@lru_cache(maxsize=1024)
def _limits(op: Op, max_elements: int, max_reduction: int | None, regime: str,
            long: str | None = None) -> _Limits:
    """The limits of a case of ``op``, made once per op, limits, regime and long
    dimension."""
    return _Limits(max_elements, max_reduction, _followers(op, regime), long)


def _followers(op: Op, regime: str) -> tuple[Derived | Multiple, ...]:
    """The parameters of ``op``'s plan that follow others (:attr:`_Limits.derived`)."""
    return tuple(s for s in op.draw_plan(regime)
                 if isinstance(s, Derived) or (isinstance(s, Multiple) and s.factors))


@lru_cache(maxsize=4096)
def _long_dims(lo: int, hi: int) -> SearchStrategy[int]:
    """Sizes in ``[lo, hi]`` (``lo`` a power of two) as ``2**e + d``: the exponent
    shrinks towards ``lo``'s and the offset towards 0, so a failure that sets in
    at a length (a kernel switching algorithm or precision at ``K >= 2048``)
    shrinks to the power of two at or below its threshold, then up to the
    threshold itself, instead of stopping wherever the shrinker left off."""
    top = hi.bit_length() - 1

    def offset(e: int) -> SearchStrategy[int]:
        return st.integers(0, min((1 << e) - 1, hi - (1 << e))).map(lambda d: (1 << e) + d)

    return st.integers(lo.bit_length() - 1, top).flatmap(offset)


@lru_cache(maxsize=4096)
def _beyond(lo: int, hi: int, is_batch: bool) -> SearchStrategy[int]:
    """Sizes in ``[lo, hi]`` (``hi > DIM_MAX``, a limit that allows long
    reductions): as :func:`~numoracle.strategies.sizes.dims` up to
    :data:`DIM_MAX`, or as :func:`_long_dims` beyond it."""
    return st.one_of(_dims(lo, DIM_MAX, (lo, DIM_MAX) if is_batch else (lo,)),
                     _long_dims(DIM_MAX, hi))


def _may_be_long(op: Op, regime: str, max_reduction: int | None) -> tuple[str, ...]:
    """The dimensions a case may draw long (past :data:`DIM_MAX`): none where
    no reduction may pass it (the ``realistic`` regime draws its own lengths)."""
    names = tuple(s.name for s in op.draw_plan(regime) if isinstance(s, Dim)
                  and (s.max_value is None or s.max_value > DIM_MAX))
    if regime != "small" or (max_reduction is not None and max_reduction <= DIM_MAX):
        return ()
    return names


def _long_choice(op: Op, regime: str, max_reduction: int | None) -> SearchStrategy[str | None]:
    """None in all but one of :data:`LONG_SHARE` draws, else the name of the
    dimension drawn long (shrinks towards None, then towards the plan's first
    dimension); always None where no dimension may be long."""
    names = _may_be_long(op, regime, max_reduction)
    return _long_names(names) if names else st.none()


@lru_cache(maxsize=256)
def _long_names(names: tuple[str, ...]) -> SearchStrategy[str | None]:
    return st.sampled_from((None,) * ((LONG_SHARE - 1) * len(names)) + names)


#: what the budget of a parameter was, by (kind, op, limits, parameters drawn
#: so far, spec and its arguments): each is a pure function of its key, and
#: every draw would otherwise repeat the same searches over ``_Limits.fits``
_MEMO: dict[Hashable, Any] = {}
#: entries kept before the memo starts over
_MEMO_SIZE = 1 << 15


def _params_key(params: Params) -> tuple[Any, ...] | None:
    """``params`` as a hashable key (each value with its type, so that ``1`` and
    ``True`` differ), or None where a value is not hashable."""
    key = tuple((k, type(v), v) for k, v in params.items())
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _memo(key: tuple[Any, ...] | None, compute: Callable[[], Any]) -> Any:
    """``compute()``, remembered by ``key`` (None: not remembered)."""
    if key is None:
        return compute()
    try:
        return _MEMO[key]
    except KeyError:
        pass
    value = compute()
    if len(_MEMO) >= _MEMO_SIZE:
        _MEMO.clear()
    _MEMO[key] = value
    return value


def _budget_key(kind: str, op: Op, params: Params, limits: _Limits,
                *extra: Any) -> tuple[Any, ...] | None:
    pkey = _params_key(params)
    return None if pkey is None else (kind, op, limits, pkey, *extra)


def _largest(fits: Callable[[int], bool], hi: int, lo: int = 1) -> int:
    """Largest ``v`` in ``[lo, hi]`` with ``fits(v)`` (``fits`` monotone, ``fits(lo)``)."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


#: ``st.integers(lo, hi)``, built once per range
_integers = lru_cache(maxsize=4096)(st.integers)
#: ``st.sampled_from(options)``, built once per tuple of options
_sampled = lru_cache(maxsize=256)(st.sampled_from)
_BOOLEANS = st.booleans()


def _dim_cap(spec: Dim, limits: _Limits) -> tuple[int, int]:
    """The least and the largest value of ``spec`` before the element budget."""
    cap = limits.cap(spec.name)
    if spec.max_value is not None:
        cap = spec.max_value if limits.long is None else min(spec.max_value, cap)
    lo = int(spec.smallest)  # the least the dimension may be (1 unless the op says more)
    return lo, max(cap, lo)


def _dim_range(spec: Dim, op: Op, params: Params, limits: _Limits) -> tuple[int, int]:
    """The least and the largest value of ``spec`` within the limits, the
    parameters drawn so far as they are and the rest at their least."""
    lo, cap = _dim_cap(spec, limits)
    hi = _memo(_budget_key("dim", op, params, limits, spec.name, cap, lo),
               lambda: _largest(lambda v: limits.fits(op, {**params, spec.name: v}), cap, lo))
    return lo, hi


def _draw_dim(spec: Dim, draw: st.DrawFn, op: Op, params: Params, limits: _Limits) -> int:
    lo, hi = _dim_range(spec, op, params, limits)
    if hi > DIM_MAX >= lo:  # lengths past DIM_MAX shrink as 2**e + d (see _long_dims)
        if spec.name == limits.long:
            return draw(_long_dims(DIM_MAX, hi))
        return draw(_beyond(lo, hi, spec.is_batch))
    # batch_sizes(max_value=hi) and dims(max_value=hi), without checking the arguments again
    return draw(_dims(lo, hi, (lo, hi)) if spec.is_batch else _dims(lo, hi, (lo,)))


# -- edges: the sizes a row reaches first -----------------------------------------
def edges(op: str | Op, regime: str = "small") -> tuple[str, ...]:
    """The edges of ``op``'s sizes, as :func:`cases` takes them (``edge=``):
    ``"top:NAME"`` for every dimension of its plan (NAME at the top of its
    range: past :data:`DIM_MAX` where long reductions are allowed, within the
    limits; the other dimensions at their least), then ``"odd"`` (every
    dimension at one size ``2**k - 1``, the largest that fits: a partial tile
    of every power-of-two tiling, in every dimension at once).

    Examples
    --------
    >>> edges("linear")
    ('top:batch', 'top:in_features', 'top:out_features', 'odd')
    """
    plan = get_op(op).draw_plan(regime) if isinstance(op, str) else op.draw_plan(regime)
    return tuple(f"top:{s.name}" for s in plan if isinstance(s, Dim)) + ("odd",)


def _below_odd(v: int) -> int:
    """The largest ``2**k - 1`` at most ``v`` (``v >= 1``)."""
    return (1 << ((v + 1).bit_length() - 1)) - 1


def _odd_size(op: Op, params: Params, limits: _Limits, regime: str) -> int:
    """The largest ``m = 2**k - 1`` such that every dimension at ``m`` (or at
    the largest ``2**j - 1`` within its own range) fits the limits."""
    dims = [s for s in op.draw_plan(regime) if isinstance(s, Dim)]

    def at(m: int) -> Params:
        trial = dict(params)
        for spec in dims:
            lo, cap = _dim_cap(spec, limits)
            trial[spec.name] = max(lo, _below_odd(min(m, cap)))
        return trial

    m = _below_odd(limits.dim_cap)
    while m > 1 and not limits.fits(op, at(m)):
        m >>= 1
    return m


def _edge_dim(spec: Dim, edge: str, odd: int, op: Op, params: Params, limits: _Limits) -> int:
    """The size of ``spec`` at ``edge`` (see :func:`edges`)."""
    lo, hi = _dim_range(spec, op, params, limits)
    if edge == "odd":
        return max(lo, _below_odd(min(odd, hi)))
    return hi if edge == f"top:{spec.name}" else lo


def _draw_flag(spec: Flag, draw: st.DrawFn, op: Op, params: Params, limits: _Limits) -> bool:
    if not _memo(_budget_key("flag", op, params, limits, spec.name),
                 lambda: limits.fits(op, {**params, spec.name: True})):
        return False
    return draw(_BOOLEANS)


def _draw_entries(name: str, length: int, max_entry: int, draw: st.DrawFn, op: Op,
                  params: Params, limits: _Limits) -> tuple[int, ...]:
    """``length`` dimensions of at most ``max_entry``, each within the limits with
    the rest at 1."""
    entries: tuple[int, ...] = ()
    for i in range(length):
        def fits(v: int, head: tuple[int, ...] = entries, tail: int = length - i - 1) -> bool:
            return limits.fits(op, {**params, name: head + (v,) + (1,) * tail})

        hi = _memo(_budget_key("entries", op, params, limits, name, entries, length, max_entry),
                   lambda: _largest(fits, max_entry))
        entries += (draw(_dims(1, hi, (1,))),)  # dims(max_value=hi)
    return entries


def _draw_shape(spec: Shape, draw: st.DrawFn, op: Op, params: Params,
                limits: _Limits) -> tuple[int, ...]:
    length = draw(_integers(0, spec.max_len))
    return _draw_entries(spec.name, length, spec.max_entry, draw, op, params, limits)


def _draw_widths(spec: Widths, draw: st.DrawFn, op: Op, params: Params,
                 limits: _Limits) -> tuple[int, ...]:
    length = int(params[spec.count]) + 1
    return _draw_entries(spec.name, length, spec.max_entry, draw, op, params, limits)


def _draw_multiple(spec: Multiple, draw: st.DrawFn, op: Op, params: Params,
                   limits: _Limits) -> int:
    base = int(params[spec.of])
    top = spec.max_value // base

    def budget() -> int:
        if top < 1 or not limits.fits(op, {**params, spec.name: base}):
            return 0
        return _largest(lambda v: limits.fits(op, {**params, spec.name: base * v}), top)

    k = _memo(_budget_key("multiple", op, params, limits, spec.name, spec.max_value), budget)
    if k < 1:
        reject()  # fixed parameters that leave no multiple: try another draw
    if spec.factors:
        allowed = tuple(f for f in spec.factors if f <= k)
        if not allowed:
            reject()
        return base * draw(_sampled(allowed))
    return base * draw(_integers(1, k))


def _draw_pair(spec: Pair, draw: st.DrawFn, op: Op, params: Params,
               limits: _Limits) -> tuple[int, int]:
    pair = [spec.min_value, spec.min_value]
    for axis in (0, 1):
        top = spec.max_value if spec.cap is None else min(spec.max_value, spec.cap(params, axis))

        def budget(axis: int = axis, top: int = top, pair: tuple[int, ...] = tuple(pair)) -> int:
            best = spec.min_value - 1
            for v in range(spec.min_value, top + 1):
                trial = list(pair)
                trial[axis] = v
                if not limits.fits(op, {**params, spec.name: tuple(trial)}):
                    break
                best = v
            return best

        best = _memo(_budget_key("pair", op, params, limits, spec.name, spec.min_value,
                                 axis, top, tuple(pair)), budget)
        if best < spec.min_value:
            reject()  # fixed parameters that leave no room: try another draw
        pair[axis] = draw(_integers(spec.min_value, best))
    return (pair[0], pair[1])


def _option_fits(spec: Choice, option: Any, op: Op, params: Params, limits: _Limits) -> bool:
    """Whether ``option`` keeps the case within the limits; True where the
    parameters drawn so far cannot tell (an option that reshapes parameters a
    later spec draws to follow it, such as a chain's depth and its widths)."""
    try:
        return limits.fits(op, {**params, spec.name: option})
    except (IndexError, KeyError, ValueError, InvalidArgument):
        return True


def _draw_choice(spec: Choice, draw: st.DrawFn, op: Op, params: Params, limits: _Limits) -> Any:
    if spec.when is not None and not spec.when(params):
        return spec.options[0]
    def fitting() -> SearchStrategy[Any]:
        options = [o for o in spec.options if _option_fits(spec, o, op, params, limits)]
        return st.sampled_from(options or spec.options[:1])

    # the spec by identity: its options need be neither hashable nor told apart by
    # equality (1 == True); the op in the key keeps the spec alive
    return draw(_memo(_budget_key("choice", op, params, limits, id(spec)), fitting))


def _draw_derived(spec: Derived, draw: st.DrawFn, op: Op, params: Params,
                  limits: _Limits) -> Any:
    return spec.least(params)


#: how each kind of spec of an op's plan (:mod:`numoracle.oracle.ops.plan`) is drawn
_DRAWERS: dict[type, Callable[..., Any]] = {
    Dim: _draw_dim, Flag: _draw_flag, Shape: _draw_shape, Multiple: _draw_multiple,
    Pair: _draw_pair, Choice: _draw_choice, Widths: _draw_widths, Derived: _draw_derived,
}


def _draw_spec(spec: Spec, draw: st.DrawFn, op: Op, params: Params, limits: _Limits) -> Any:
    return _DRAWERS[type(spec)](spec, draw, op, params, limits)


def _smallest(op: Op, fixed: Mapping[str, Any] | None = None, regime: str = "small") -> Params:
    """The smallest parameters of ``op``'s plan, with those in ``fixed`` as given."""
    return smallest(op.draw_plan(regime), fixed)


# -- argument checks ---------------------------------------------------------------
def _check_op(op: Any) -> str:
    return get_op(op).name


def _check_max_reduction(max_reduction: Any) -> int | None:
    if max_reduction is None:
        return None
    if isinstance(max_reduction, bool) or not isinstance(max_reduction, (int, np.integer)) \
            or max_reduction < 1:
        raise InvalidArgument(f"{max_reduction=} must be a positive int or None (no limit)")
    return int(max_reduction)


def _check_max_elements(max_elements: Any) -> int:
    return check_int("max_elements", max_elements, min_value=1)


def _check_seed(seed: Any) -> int:
    return check_int("seed", seed, min_value=0, max_value=SEED_MAX)


def _check_max_overlays(max_overlays: Any) -> int:
    return check_int("max_overlays", max_overlays, min_value=0)


def _overrides(op: Op, params: Mapping[str, Any], batch: Any,
               regime: str = "small") -> dict[str, Any]:
    """The parameters the caller fixed (values or strategies), by name."""
    fixed = dict(params)
    unknown = sorted(set(fixed) - set(op.param_names))
    if unknown:
        raise InvalidArgument(
            f"params names {unknown}, which {op.name} does not take; its parameters are "
            f"{op.param_names}"
        )
    if batch is not None:
        names = [s.name for s in op.draw_plan(regime) if isinstance(s, Dim) and s.is_batch]
        if not names:
            raise InvalidArgument(
                f"{batch=} is given but {op.name} has no batch parameter; fix its "
                f"parameters through params= instead"
            )
        if names[0] in fixed:
            raise InvalidArgument(
                f"{batch=} and params[{names[0]!r}] both fix the batch; give one of them"
            )
        fixed[names[0]] = batch
    return fixed


def _check_fixed(op: Op, fixed: Mapping[str, Any], limits: _Limits, regime: str) -> None:
    """The smallest case with ``fixed`` is valid and within ``limits``."""
    params = _smallest(op, fixed, regime)
    op.validate(params)
    if not limits.fits(op, params):
        raise InvalidArgument(
            f"the smallest {op.name} case with params {dict(fixed)} does not fit "
            f"max_elements={limits.max_elements} and max_reduction={limits.max_reduction}; "
            "raise the limits or fix smaller parameters"
        )


# -- the strategy --------------------------------------------------------------------
@dataclass(frozen=True)
class _Request:
    """The arguments of :func:`cases`, each as a strategy."""

    op: SearchStrategy[str]
    storage: SearchStrategy[str]
    family: SearchStrategy[str]
    layout: LayoutArg
    max_reduction: SearchStrategy[int | None]
    max_elements: SearchStrategy[int]
    params: Mapping[str, Any]
    batch: Any
    max_overlays: SearchStrategy[int]
    seed: SearchStrategy[int]
    regime: str
    edge: str | None = None


def _draw_params(draw: st.DrawFn, op: Op, req: _Request, limits: _Limits) -> Params:
    fixed = {k: draw(v) if is_strategy(v) else v
             for k, v in _overrides(op, req.params, req.batch, req.regime).items()}
    params = _smallest(op, fixed, req.regime)
    if not _memo(_budget_key("smallest", op, params, limits), lambda: limits.fits(op, params)):
        reject()  # drawn overrides that leave no room: try another draw
    odd = 1
    if req.edge == "odd":
        start = dict(params)
        odd = _memo(_budget_key("odd", op, start, limits, req.regime),
                    lambda: _odd_size(op, start, limits, req.regime))
    for spec in op.draw_plan(req.regime):
        if spec.name in fixed:
            continue
        if req.edge is not None and isinstance(spec, Dim):
            params[spec.name] = _edge_dim(spec, req.edge, odd, op, params, limits)
        else:
            params[spec.name] = _draw_spec(spec, draw, op, params, limits)
    if fixed:
        try:
            op.validate(params)
        except InvalidArgument:
            reject()  # fixed parameters the drawn ones do not agree with (groups, channels)
    return params


@st.composite
def _cases(draw: st.DrawFn, req: _Request) -> Case:
    op = get_op(draw(req.op))
    max_reduction = _check_max_reduction(draw(req.max_reduction))
    if req.edge is None:
        long = draw(_long_choice(op, req.regime, max_reduction))
    else:  # the top of a dimension that may be long is past DIM_MAX
        top = req.edge[len("top:"):]
        long = top if top in _may_be_long(op, req.regime, max_reduction) else None
    if long is not None and long in _overrides(op, req.params, req.batch, req.regime):
        long = None  # a fixed dimension is not drawn long
    limits = _limits(op, _check_max_elements(draw(req.max_elements)), max_reduction,
                     req.regime, long)
    storage = draw(req.storage)
    family = draw(req.family)
    params = _draw_params(draw, op, req, limits)
    shapes = op.input_shapes(op.validate(params))
    # input_layouts(shapes, ...) and overlays(shapes, ...), without checking the
    # arguments again: strategies built once per input ranks (sizes) and options
    layouts = draw(_layouts_strategy(tuple((n, len(s)) for n, s in shapes.items()),
                                     req.layout, tuple(op.input_axes.items())))
    count = _check_max_overlays(draw(req.max_overlays))
    integers = op.integer_inputs(op.validate(params))  # no special values on them
    sizes = tuple((n, k) for n, k in ((n, math.prod(s)) for n, s in shapes.items())
                  if k > 0 and n not in integers)
    specials = draw(_overlays(sizes, get_format(storage), count))
    return Case(op=op.name, params=params, storage=storage, family=family,
                seed=_check_seed(draw(req.seed)), layouts=layouts, overlays=specials)


def cases(
    *,
    op: str | SearchStrategy[str],
    storage: str | Iterable[str] | SearchStrategy[str] = STORAGE_FORMATS,
    families: str | Iterable[str] | SearchStrategy[str] = DEFAULT_FAMILIES,
    layouts: str | Iterable[str] | SearchStrategy[str]
    | Mapping[str, str | Iterable[str] | SearchStrategy[str]] | None = None,
    max_reduction: int | SearchStrategy[int | None] | None = None,
    max_elements: int | SearchStrategy[int] | None = None,
    batch: int | SearchStrategy[int] | None = None,
    params: Mapping[str, Any] | None = None,
    max_overlays: int | SearchStrategy[int] = 0,
    seed: int | SearchStrategy[int] | None = None,
    regime: str = "small",
    edge: str | None = None,
) -> SearchStrategy[Case]:
    """Cases of ``op``.

    Every argument takes a value or a strategy; values are checked now.

    Parameters
    ----------
    op : str or strategy
        Op name from the registry (``"linear"``, ``"matmul"``).
    storage : str, collection of str or strategy
        Storage format(s) (default: any of fp32, bf16, fp16, fp64; shrinks
        towards fp32).
    families : str, collection of str or strategy
        Value family or families (default: every family but ``special``;
        shrinks towards ``exact``).
    layouts : str, collection of str, strategy, mapping or None
        Layout(s) each input is drawn from, independently, or those per input
        name (a target's ``layouts``); each input draws from the given ones
        valid for it (see :func:`~numoracle.strategies.input_layouts`).
        Default: every layout valid for the input, the axis orders of a
        convolution's inputs included; shrinks towards ``C``.
    max_reduction : int, None or strategy
        Longest accumulation length of any output (None: no limit); a
        target's ``max_reduction``. Dimensions are at most :data:`DIM_MAX`,
        or up to ``max_reduction`` when it is larger (at most
        :data:`REDUCTION_MAX` = 2**16). In the ``small`` regime one case in
        :data:`LONG_SHARE` has one dimension beyond :data:`DIM_MAX` (within
        ``max_reduction`` and ``max_elements``) and the others at most
        :data:`LONG_OTHERS`: long reductions with few outputs, drawn and shrunk
        as ``2**e + d`` so that a failure setting in at a length shrinks to it.
    max_elements : int, strategy or None
        Most input elements in all, and most output elements in all (default
        2**16; 2**25 in the ``realistic`` regime).
    batch : int or strategy, optional
        The op's batch size (linear's ``batch``; default :func:`batch_sizes`
        within the limits). An error for ops without a batch parameter.
    params : mapping, optional
        Parameters to fix, by name, each a value or a strategy; the others are
        drawn by the op's plan (``op.plan``) within the limits.
    max_overlays : int or strategy
        Most special values overlaid on the inputs (default 0: none; see
        :func:`~numoracle.strategies.values.overlays`).
    seed : int or strategy, optional
        Seed of the bulk values (default: any in ``[0, 2**32 - 1]``).
    regime : str
        ``"small"`` (default: the op's ``plan``, cheap cases) or ``"realistic"``
        (the op's ``realistic_plan``: the layer shapes practitioners train at,
        conv2d from real CNNs, linear up to 8,192 features, reductions up to
        2**20; for GPUs). Both shrink towards their smallest shapes.
    edge : str or None
        Sizes at an edge instead of drawn (the other parameters, the
        family, the format, the layouts and the seed drawn as ever): one of
        :func:`edges` ``(op)``, ``"top:NAME"`` (dimension NAME at the top of
        its range, the others at their least) or ``"odd"`` (every dimension
        at the largest ``2**k - 1`` that fits). A run puts a case at every
        edge among its first cases of each row.

    Returns
    -------
    strategy of Case

    Examples
    --------
    >>> from hypothesis import find
    >>> case = find(cases(op="linear", max_elements=64), lambda c: c.params["in_features"] > 4)
    >>> case.op, case.params["in_features"] > 4, sorted(case.inputs())
    ('linear', True, ['grad_output', 'weight', 'x'])
    """
    fixed = dict(params or {})
    if regime not in REGIMES:
        raise InvalidArgument(f"{regime=} is unknown; use one of {REGIMES}")
    if max_elements is None:
        max_elements = REALISTIC_MAX_ELEMENTS if regime == "realistic" else DEFAULT_MAX_ELEMENTS
    req = _Request(
        op=as_strategy(op, _check_op),
        storage=choice_strategy("storage", storage, STORAGE_FORMATS),
        family=choice_strategy("families", families, KNOWN_FAMILIES),
        layout=_check_layouts(layouts),
        max_reduction=as_strategy(max_reduction, _check_max_reduction),
        max_elements=as_strategy(max_elements, _check_max_elements),
        params=fixed,
        batch=batch,
        max_overlays=as_strategy(max_overlays, _check_max_overlays),
        seed=st.integers(0, SEED_MAX) if seed is None else as_strategy(seed, _check_seed),
        regime=regime,
        edge=edge,
    )
    if edge is not None and (not isinstance(op, str) or edge not in edges(op, regime)):
        known = edges(op, regime) if isinstance(op, str) else ("odd", "top:NAME")
        raise InvalidArgument(f"{edge=} is not an edge of {op!r}; use one of {known}")
    if batch is not None and not is_strategy(batch):
        check_int("batch", batch, min_value=1, max_value=MAX_SIZE)
    if isinstance(op, str):
        _check_request(get_op(op), fixed, batch, max_elements, max_reduction, regime)
    return _cases(req)


def _check_layouts(layouts: Any) -> LayoutArg:
    """``layouts`` checked now (names known), in the hashable form the layout
    strategies are cached on; None stays None (every valid layout)."""
    return normal_layout(layouts, "layouts")


def _check_request(op: Op, params: Mapping[str, Any], batch: Any, max_elements: Any,
                   max_reduction: Any, regime: str) -> None:
    """What can be checked of :func:`cases`' arguments before any draw."""
    fixed = _overrides(op, params, batch, regime)
    if is_strategy(max_elements) or is_strategy(max_reduction):
        return
    plain = {k: v for k, v in fixed.items() if not is_strategy(v)}
    _check_fixed(op, plain, _Limits(max_elements, max_reduction, _followers(op, regime)),
                 regime)
