"""Error-tracking reference arithmetic (DESIGN §2).

A :class:`Tracked` array carries, per element,

* ``value`` (+ ``lo``): the oracle's estimate of the exact result (a float64,
  or a double-double ``value + lo`` once escalated to the exact context);
* ``ref_err``: a bound on the oracle's own error, ``|value + lo - exact|``;
* ``det``: a deterministic bound on ``|kernel - exact|`` under the kernel's
  precision model (always sound);
* ``prob``: the probabilistic bound (Higham & Mary 2019), tighter, for
  round-to-nearest adders;
* ``mag``: ``S``, the sum of the magnitudes of the terms of the contraction
  that made the element (0 for inputs);
* ``n``: the accumulation length: an int, or an integer array of the
  output's shape where it varies per element (structural zeros, such as a
  convolution's padding, are not terms).

Every primitive (contraction :func:`matmul`, :func:`sum_`, output rounding
:func:`store`, elementwise :func:`add`, :func:`sub`, :func:`mul_scalar`,
:func:`relu`, :func:`relu_mask_mul`) maps tracked inputs to a tracked output under a
:class:`~numoracle.oracle.precision.PrecisionModel`; ops are written once
against them and get their bounds by composition.

The exact regime is built in: where every input is exact and lies on a grid
``2^e`` such that ``S <= 2^(p_acc + e)``, every product and every partial sum
is representable in the accumulation format, so in any order the kernel's
result is exact and the bound is 0.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from typing import Any, NamedTuple

import numpy as np

from .exact_dot import exact_matmul
from . import fused_cpu, fused_cuda, fused_torch, single_products, tensor_sums
from .formats import FP32, FP64, Format, chunk_size, quantize, representable
from .fused import (
    NOT_FINITE,
    OFF_SINGLE,
    OperandFacts,
    SUBNORMAL,
    UNREPRESENTABLE,
    add_rounding,
    contraction_radii,
    device_row_sums,
    device_scalars,
    exact_contraction_radii,
    exact_products,
    fused,
    fused_exact,
    fused_single_parts,
    in_single_range,
    lowest_set_bit,
    magnitude_sum,
    operand_facts,
    rounded,
    single_growth,
    store_rounding,
)
from .precision import PrecisionModel, gamma, gamma_prob
from .xp import array_module as _xp
from .xp import (
    TORCH_ARRAYS,
    as_namespace,
    device_of,
    fill_where,
    filled,
    is_torch,
    keeps_subnormals,
    reads_are_free,
    same_memory,
    thorough,
    to_numpy,
)

__all__ = ["Tracked", "exact", "bounded", "moved", "aligned", "negated", "scaled_exactly",
           "folded", "any_nonzero", "any_nonzeros", "surely_zero", "has_zero", "may_be_exact",
           "two_product_error", "unjudged", "concat", "tmap", "tcat",
           "add", "sub", "relu", "relu_mask_mul", "mul_scalar", "either", "matmul", "sum_",
           "keep_operand_facts", "sum_of_parts", "parts_coefficients", "scalar_coefficients",
           "store", "lsb_exponent",
           "ESCALATE_SHARE", "SINGLE_SUMS"]

U64 = FP64.u
#: escalate to the exact context when the float64 reference error is not below
#: this share of the kernel's bound
ESCALATE_SHARE = 0.01
#: whether a contraction's magnitudes ``S`` may be summed in float32 (:func:`_single`: on
#: the CPU, and on a GPU's tensor cores in TF32; ``NUMORACLE_SINGLE_SUMS=0`` in the
#: environment keeps them float64, the bounds 2^-11 sharper on the CPU, 2^-8 on a GPU)
SINGLE_SUMS = os.environ.get("NUMORACLE_SINGLE_SUMS", "1") != "0"


@dataclass(frozen=True)
class Tracked:
    """An array of exact values with error radii (see the module docstring)."""

    value: np.ndarray
    ref_err: np.ndarray
    det: np.ndarray
    prob: np.ndarray
    mag: np.ndarray
    n: int | np.ndarray = 1
    lo: np.ndarray | None = None
    escalated: bool = False

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape)

    @property
    def xp(self) -> Any:
        """The array namespace its arrays belong to (NumPy, CuPy or torch's; see
        :mod:`~numoracle.oracle.xp`)."""
        return _xp(self.value)

    @property
    def T(self) -> Tracked:  # noqa: N802 - mirrors ndarray.T (last two axes)
        """Transpose of the last two axes."""
        det = _swap_last(self.det)

        def sw(a: Any) -> Any:  # (one view of a radius that others share: exact's zero)
            return det if a is self.det else _swap_last(a)
        out = replace(
            self,
            value=sw(self.value), ref_err=sw(self.ref_err), det=det,
            prob=sw(self.prob), mag=sw(self.mag), lo=None if self.lo is None else sw(self.lo),
        )
        memo = getattr(self, _MEMO, None)
        if memo is not None:  # the same input's facts, transposed
            object.__setattr__(out, _MEMO, memo)
        return out

    def bound(self, probabilistic: bool = False) -> np.ndarray:
        """The bound a kernel's result is judged by: kernel radius + oracle error."""
        return (self.prob if probabilistic else self.det) + self.ref_err

    def to_host(self) -> Tracked:
        """The same on the host (NumPy), when it lives elsewhere (CuPy, torch)."""
        if _xp(self.value) is np:
            return self
        return replace(self, value=to_numpy(self.value), ref_err=to_numpy(self.ref_err),
                       det=to_numpy(self.det), prob=to_numpy(self.prob), mag=to_numpy(self.mag),
                       lo=None if self.lo is None else to_numpy(self.lo), n=to_numpy(self.n))

    @property
    def max_n(self) -> int:
        """The longest accumulation length of any element."""
        return int(np.max(self.n)) if np.size(self.n) else 0

    def n_at(self, index: tuple[int, ...]) -> int:
        """The accumulation length of the element at ``index``."""
        n: Any = self.n
        return int(n[index]) if getattr(n, "ndim", 0) else int(n)  # host or device array

    @property
    def is_exact(self) -> bool:
        """True when the kernel must reproduce the value exactly."""
        return bool(not np.any(self.det) and not np.any(self.ref_err))


def any_nonzero(r: Any) -> bool:
    """``any(r)``, without a pass over a broadcast scalar, nor a device read for
    the zero of :func:`exact`'s radii."""
    xp = _xp(r)
    if r.size and not any(r.strides):
        if xp is not np and same_memory(r, _zero(xp, r)):
            return False
        return bool(r[(0,) * r.ndim])
    return bool(xp.any(r))


def any_nonzeros(*rs: Any) -> list[bool]:
    """:func:`any_nonzero` of each radius (False for None), those that need a device
    read read together: one synchronisation for all."""
    out: list[Any] = [False if r is None or surely_zero(r) else None for r in rs]
    todo = [i for i, v in enumerate(out) if v is None]
    if not todo:
        return out
    xp = _xp(rs[todo[0]])
    if reads_are_free(xp) or len(todo) == 1:
        for i in todo:
            out[i] = any_nonzero(rs[i])
        return out
    for i, v in zip(todo, _read_together(xp, [xp.any(rs[i]) for i in todo]), strict=True):
        out[i] = v
    return out


def _read_together(xp: Any, flags: list[Any]) -> list[bool]:
    """0-d device booleans brought to the host in one transfer (one synchronisation)."""
    return [bool(v) for v in to_numpy(xp.stack(flags)).tolist()]


def surely_zero(r: Any) -> bool:
    """Whether radius ``r`` is 0 everywhere, known without reading a device: a
    broadcast of :func:`exact`'s zero (or empty); on NumPy also by one pass. A
    caller leaves out the arithmetic of such a radius (it would add 0)."""
    xp = _xp(r)
    if xp is np:
        return not any_nonzero(r)
    return r.size == 0 or (not any(r.strides) and same_memory(r, _zero(xp, r)))


_ZEROS: dict[tuple[str, Any], Any] = {}


def has_zero(r: Any) -> bool:
    """Whether some element of radius ``r`` is 0 (NaN is not): one reduction, or one
    element of a broadcast scalar."""
    xp = _xp(r)
    if r.size and not any(r.strides):
        if xp is not np and same_memory(r, _zero(xp, r)):
            return True  # exact's zero: known without reading the device
        return bool(r[(0,) * r.ndim] == 0)
    return r.size > 0 and not bool(xp.all(r))


def may_be_exact(*ts: Tracked) -> bool:
    """Whether some element may be exact in every one of ``ts`` (its kernel radius and
    reference error 0 somewhere in each): where not, no elementwise combination of
    them is exact anywhere, and the tests for it (error-free transformations,
    representability: a dozen passes) are skipped."""
    rs = [r for t in ts for r in (t.det, t.ref_err)]
    xp = _xp(rs[0])
    if reads_are_free(xp):
        return all(has_zero(r) for r in rs)
    if thorough():  # (the tests find nothing where nothing is exact: the same bits)
        return True
    # on a device: broadcast radii decided without a read (exact's zero) or from their
    # one element, the others read together
    full = [r for r in rs if not (r.size and not any(r.strides))]
    if not all(has_zero(r) for r in rs if r.size and not any(r.strides)):
        return False
    if any(r.size == 0 for r in full):
        return False
    return not full or not any(_read_together(xp, [xp.all(r) for r in full]))


def _zero(xp: Any, like: Any) -> Any:
    """A 0-d float64 zero of ``xp`` on the device of ``like`` (CuPy: the current
    one), one per device: the radii of exact inputs are read-only broadcasts of it."""
    if is_torch(xp):
        device = xp.tensor(like).device
        key: tuple[str, Any] = ("torch", str(device))
        if key not in _ZEROS:
            _ZEROS[key] = xp.from_tensor(xp._torch.zeros((), dtype=xp._torch.float64,
                                                         device=device))
        return _ZEROS[key]
    key = (xp.__name__, xp.cuda.runtime.getDevice() if xp.__name__ == "cupy" else 0)
    if key not in _ZEROS:
        _ZEROS[key] = xp.zeros((), dtype=xp.float64)
    return _ZEROS[key]


def _swap_last(a: np.ndarray) -> np.ndarray:
    if a.ndim < 2:
        return a
    if type(a).__module__ == TORCH_ARRAYS:  # (on the tensor: not torch's NumPy API)
        return type(a)(a.tensor.swapaxes(-1, -2))
    return a.swapaxes(-1, -2)  # (the method: no NumPy dispatch)


def unjudged(t: Tracked, bad: Any) -> Tracked:
    """``t`` with the elements where ``bad`` holds left unjudged (NaN radius):
    where a kernel may legitimately give more than one answer (NaN or an
    infinity, a result past the format's range), the comparison skips them."""
    xp = _xp(t.value)
    bad = xp.broadcast_to(xp.asarray(bad), t.value.shape)
    if reads_are_free(xp) and not bool(bad.any()):
        return t
    det = xp.array(xp.broadcast_to(t.det, t.value.shape), dtype=xp.float64)
    prob = xp.array(xp.broadcast_to(t.prob, t.value.shape), dtype=xp.float64)
    return replace(t, det=fill_where(det, bad, xp.nan), prob=fill_where(prob, bad, xp.nan))


def concat(ts: list[Tracked], axis: int) -> Tracked:
    """Tracked arrays joined along ``axis``: the blocks of one output computed
    apart (each element keeps its own value, low part, radii and length)."""
    if len(ts) == 1:
        return ts[0]
    ts = list(aligned(*ts))
    xp = _xp(ts[0].value)

    def join(get: Any) -> Any:
        return xp.concatenate([xp.broadcast_to(get(t), t.value.shape) for t in ts], axis=axis)
    zero = xp.zeros((), dtype=xp.float64)
    lo = join(lambda t: zero if t.lo is None else t.lo) if any(
        t.lo is not None for t in ts) else None
    if all(np.ndim(t.n) == 0 for t in ts) and len({int(t.n) for t in ts}) == 1:
        n: int | np.ndarray = int(ts[0].n)
    else:  # lengths per element live on the host (see matmul)
        n = np.concatenate([np.broadcast_to(np.asarray(t.n), t.value.shape) for t in ts],
                           axis=axis)
    return Tracked(value=join(lambda t: t.value), ref_err=join(lambda t: t.ref_err),
                   det=join(lambda t: t.det), prob=join(lambda t: t.prob),
                   mag=join(lambda t: t.mag), n=n, lo=lo,
                   escalated=any(t.escalated for t in ts))


def tmap(t: Tracked, fn: Callable[[Any], Any], *, lengths: bool = False) -> Tracked:
    """``fn`` (indexing, reshaping, rolling: no arithmetic) applied to every array of
    ``t`` (radii broadcast to its shape first), its low part folded into the
    oracle's error; length 1, or with ``lengths`` its lengths kept (mapped by ``fn``
    where they vary per element)."""
    t = folded(t)
    shape = t.value.shape
    n: Any = 1
    if lengths:
        n = t.n if np.ndim(t.n) == 0 else fn(_full(np.asarray(t.n), shape))
    return Tracked(value=fn(t.value), ref_err=fn(_full(t.ref_err, shape)),
                   det=fn(_full(t.det, shape)), prob=fn(_full(t.prob, shape)),
                   mag=fn(_full(t.mag, shape)), n=n)


def tcat(ts: list[Tracked], axis: int, stack: bool = False) -> Tracked:
    """Tracked arrays concatenated (or stacked) along ``axis``: fresh arrays, low
    parts folded into the radii, length 1 (:func:`concat` keeps both)."""
    xp = ts[0].xp
    if len(ts) == 1:
        t = tmap(ts[0], partial(xp.expand_dims, axis=axis)) if stack else folded(ts[0])
        return tmap(t, xp.array)  # a copy, as concatenating one array makes
    parts = [folded(t) for t in aligned(*ts)]
    xp = parts[0].xp
    join = xp.stack if stack else xp.concatenate

    def joined(get: Callable[[Tracked], np.ndarray]) -> np.ndarray:
        return join([_full(get(t), t.value.shape) for t in parts], axis=axis)
    # as concat() joins them (a stacked part has no low part and is not escalated)
    return Tracked(value=joined(lambda t: t.value), ref_err=joined(lambda t: t.ref_err),
                   det=joined(lambda t: t.det), prob=joined(lambda t: t.prob),
                   mag=joined(lambda t: t.mag), n=1,
                   escalated=not stack and any(t.escalated for t in parts))


def _full(a: Any, shape: tuple[int, ...]) -> Any:
    """``a`` broadcast to ``shape`` (as it is when it has that shape already)."""
    return a if tuple(a.shape) == tuple(shape) else _xp(a).broadcast_to(a, shape)


def exact(x: Any) -> Tracked:
    """Wrap exact input values (radius 0). Their values are never changed: the
    facts of a contraction's pass over them (magnitudes, flags) are kept with them
    (see :func:`_memo`), for the next contraction they enter (its transpose's too)."""
    xp = _xp(x)
    # (a float64 CuPy array as it is: CuPy's asarray costs a call of its own)
    on_device = fused(xp) and type(x) is xp.ndarray and x.dtype == np.float64
    v = x if on_device else xp.asarray(x, dtype=xp.float64)
    z = xp.broadcast_to(_zero(xp, v), v.shape)  # read-only, no memory
    t = Tracked(value=v, ref_err=z, det=z, prob=z, mag=z, n=1)
    object.__setattr__(t, _MEMO, {})  # (not a field: replace() makes a Tracked without it)
    return t


def bounded(value: Any, det: Any, prob: Any = None, *, ref_err: Any = None, mag: Any = None,
            n: Any = 1) -> Tracked:
    """A value with radii: ``det`` the kernel's deterministic radius, ``prob`` its
    probabilistic one (``det`` by default), ``ref_err`` the oracle's own error (0 by
    default), ``mag`` the magnitude of the terms that made it (``|value|`` by
    default), ``n`` the accumulation length (an int or an integer array of the
    value's shape).

    Every array becomes a float64 array of the value's namespace (NumPy, CuPy or
    torch's: :mod:`~numoracle.oracle.xp`), broadcastable to its shape; the one way
    besides :func:`exact` and the primitives that a module outside this one makes a
    :class:`Tracked` (with :func:`dataclasses.replace` of an existing one).
    """
    xp = _xp(value)
    v = xp.asarray(value, dtype=xp.float64)

    def radius(r: Any) -> Any:
        return xp.broadcast_to(_zero(xp, v), v.shape) if r is None else xp.asarray(
            r, dtype=xp.float64)
    d = radius(det)
    if prob is None:  # an array of its own (radii are rounded in place)
        p = xp.array(d, copy=True) if d.ndim and any(d.strides) else d
    else:
        p = radius(prob)
    return Tracked(value=v, ref_err=radius(ref_err), det=d, prob=p,
                   mag=xp.abs(v) if mag is None else radius(mag), n=n)


def moved(t: Tracked, xp: Any, device: Any = None) -> Tracked:
    """``t`` with its arrays in namespace ``xp`` (on ``device``; see
    :func:`~numoracle.oracle.xp.as_namespace`); itself where they are there."""
    if t.xp is xp:
        return t

    def mv(a: Any) -> Any:
        return as_namespace(a, xp, device)
    return replace(t, value=mv(t.value), ref_err=mv(t.ref_err), det=mv(t.det),
                   prob=mv(t.prob), mag=mv(t.mag), lo=None if t.lo is None else mv(t.lo))


def aligned(*ts: Any) -> tuple[Any, ...]:
    """Tracked operands in one namespace: those on the host (NumPy: a constant, a
    scalar, a host value beside device ones) moved to the namespace and device of
    the first that is not; anything not a :class:`Tracked` passes unchanged."""
    kinds = [_xp(t.value) if isinstance(t, Tracked) else None for t in ts]
    at = next((i for i, k in enumerate(kinds) if k is not None and k is not np), None)
    if at is None:
        return ts
    xp = kinds[at]
    if all(k is None or k is xp for k in kinds):
        return ts  # (all there already: nothing to look at further)
    device = xp.tensor(ts[at].value).device if is_torch(xp) else None
    return tuple(moved(t, xp, device) if k is not None else t
                 for t, k in zip(ts, kinds, strict=True))


def negated(t: Tracked) -> Tracked:
    """``-t``: exact, every radius unchanged."""
    return replace(t, value=-t.value, lo=None if t.lo is None else -t.lo)


def scaled_exactly(t: Tracked, c: float) -> Tracked:
    """``c t`` for a power of two ``c`` (or its negative, or 0), which rounds nothing
    while the result stays in float64's normal range: the radii scale by ``|c|``.
    (:func:`mul_scalar` bounds any other factor.)"""
    c = float(c)
    m = math.frexp(abs(c))[0]
    if c != 0.0 and m != 0.5:
        from ..errors import InvalidArgument  # noqa: PLC0415

        raise InvalidArgument(f"scaled_exactly: c={c!r} is not a power of two; use mul_scalar, "
                              "which bounds the rounding of any factor")
    t = folded(t)
    k = abs(c)
    value = t.value * c
    return Tracked(value=value, ref_err=t.ref_err * k, det=t.det * k, prob=t.prob * k,
                   mag=t.xp.abs(value), n=t.n)


#: the attribute of an exact input's kept operand facts: (format, float32 magnitudes,
#: grid) -> (facts, the array they were taken of)
_MEMO = "_operand_facts"
#: inputs smaller than this keep nothing on the CPU (a pass over them costs less than
#: looking; on a GPU the pass and the wait for its facts cost more than looking)
_MEMO_MIN = 1 << 14
#: on a GPU, inputs larger than this keep nothing (their magnitudes, held until the
#: input's last contraction, would raise the reference's peak memory by as much)
_MEMO_MAX_DEVICE = 1 << 27


def _memo(t: Tracked, v: Any) -> dict[Any, Any] | None:
    """Where ``t``'s operand facts of its values ``v`` are kept (an exact input's:
    on the CPU from :data:`_MEMO_MIN` elements, on a GPU up to
    :data:`_MEMO_MAX_DEVICE`), else None."""
    memo: dict[Any, Any] | None = getattr(t, _MEMO, None)
    if memo is None or v is not t.value:
        return None
    xp = _xp(v)
    if xp is np:
        return memo if v.size >= _MEMO_MIN else None
    return memo if (fused(xp) or fused_torch.available(xp)) and v.size <= _MEMO_MAX_DEVICE \
        else None


def keep_operand_facts(ts: Sequence[Tracked | None], model: PrecisionModel) -> None:
    """On a GPU, the operand facts of the exact inputs ``ts`` that contractions under
    ``model`` will take (as they are: no known input rounding applied), one pass each,
    one transfer and one wait for all, kept with them (:func:`_memo`): their
    contractions then launch no pass and wait for no facts of their own."""
    kept = [(t, m) for t in ts if t is not None and (m := _memo(t, t.value)) is not None]
    if not kept:
        return  # (a memo only where a device's pass gives the facts: CuPy's, torch's)
    if model.rounds_inputs and model.input_rounding is not None:
        return  # the contractions take the rounded values, not the inputs
    xp = _xp(kept[0][0].value)
    key = (model.compute, _single(model, kept[0][0].value), True)  # (grid on a GPU)
    if xp is np or (key[1] and not fused(xp)):
        return  # (torch's passes sum magnitudes in float64 only: its contractions decide)
    todo = [(t, m) for t, m in kept if key not in m]
    if not todo:
        return
    pending = operand_facts([t.value for t, _ in todo], model.compute, _NO_GRID,
                            single=key[1])
    assert pending is not None
    for (t, m), f in zip(todo, pending.result(), strict=True):
        m[key] = (f, t.value)


def _recalled(memo: dict[Any, Any] | None, v: Any, key: Any) -> Any:
    """The kept facts of ``v`` (as laid out as it: transposed where it is the kept
    array's transpose), or None."""
    found = memo.get(key) if memo is not None else None
    if found is None:
        return None
    facts, like = found
    for turn in (False, True):
        view = _swap_last(like) if turn else like
        if v.shape == view.shape and v.strides == view.strides and same_memory(v, view):
            return replace(facts, magnitude=_swap_last(facts.magnitude)) if turn else facts
    return None


#: what :func:`lsb_exponent` returns when no element is a nonzero finite number
_NO_GRID = 1 << 20


def lsb_exponent(x: np.ndarray) -> int:
    """Exponent of the lowest set bit over all nonzero finite elements of ``x``
    (the grid ``2^e`` they all lie on); a large number when there are none."""
    on_device = lowest_set_bit(x, _NO_GRID)
    if on_device is not None:
        return on_device
    xp = _xp(x)
    flat = x.reshape(-1)
    best = _NO_GRID
    step = chunk_size(xp)
    for lo in range(0, flat.size, step):  # chunks keep the temporaries small
        part = flat[lo:lo + step]
        v = part[xp.isfinite(part) & (part != 0)]
        if v.size:
            m, e = xp.frexp(v)  # v = m 2^e, |m| in [0.5, 1): m 2^53 is an integer
            tz = _trailing_zeros(xp.abs(m * 2.0**53).astype(xp.int64), xp)
            best = min(best, int(xp.min(e.astype(xp.int64) - 53 + tz)))
    return best


def _trailing_zeros(mi: Any, xp: Any) -> Any:
    low = mi & -mi  # lowest set bit as a power of two (exact in float64)
    # rounded, not truncated: CUDA's log2 may miss an exact power of two by an ulp
    return xp.rint(xp.log2(low.astype(xp.float64))).astype(xp.int64)


def _operand(t: Tracked, model: PrecisionModel) -> tuple[Tracked, float]:
    """The operand as the kernel multiplies it, and the relative error of its
    input rounding that the oracle could not apply itself.

    A known rounding of exact inputs is applied exactly. Subnormal inputs get
    their magnitude as radius where the model may flush them, and where an
    unknown rounding to a narrower format may take them to 0 (the relative
    ``c_in`` does not cover values below the compute format's normal range)."""
    xp = _xp(t.value)
    v, c = t.value, 0.0
    if model.rounds_inputs:
        if model.input_rounding is not None and not any_nonzero(t.det):
            v = quantize(t.value, model.compute, model.input_rounding)
        else:
            c = 0.0 if bool(xp.all(representable(t.value, model.compute))) else \
                model.input_unit()
    t = replace(t, value=v) if v is not t.value else t
    if model.flush_subnormal_inputs or c > 0.0:
        sub = (v != 0) & (xp.abs(v) < model.compute.tiny)
        if bool(sub.any()):
            r = xp.where(sub, xp.abs(v), 0.0)
            t = replace(t, det=t.det + r, prob=t.prob + r)
    return t, c


def matmul(a: Tracked, b: Tracked, model: PrecisionModel, bias: Tracked | None = None, *,
           terms: np.ndarray | None = None, stored: bool = False) -> Tracked:
    """Contraction ``a @ b (+ bias)`` over the last axis of ``a`` under ``model``.

    Bound (deterministic), with ``S = (|a|+ra) @ (|b|+rb) + |bias| + rbias`` and
    ``h`` the order's height for ``n`` terms plus one product rounding::

        (c_in + gamma_h(u_acc) (1 + c_in)) S + propagated radii + (h+1) * 2^emin_acc

    zero in the exact regime. The probabilistic bound replaces gamma by
    gamma~_h(lambda).

    ``n`` is ``k (+1 with a bias)``, or ``terms`` when given: the number of real
    terms of each output element (an integer array broadcastable to the
    output), for contractions whose operands hold structural zeros (padding,
    inserted zeros) that a kernel need not add. Those zeros must be exact
    zeros of ``a`` or ``b``: they add nothing to ``S`` and adding them rounds
    nothing, so only the real terms count towards ``h``.

    ``stored``: the result as :func:`store` makes it (rounded to the storage
    format), for a contraction whose result is an output: the rounding is done in
    the contraction's own pass over its outputs (the CPU's loop, the GPU's kernel).
    """
    return _contraction(a, b, model, bias, terms, _store_format(model) if stored else None)


def _contraction(a: Tracked, b: Tracked, model: PrecisionModel, bias: Tracked | None,
                 terms: np.ndarray | None, fmt: Format | None) -> Tracked:
    """:func:`matmul`, its result rounded to ``fmt`` (as :func:`store` rounds) where given."""
    a, b, bias = aligned(a, b, bias)
    a, b = folded(a), folded(b)  # an escalated operand's low part joins its radius
    bias = None if bias is None else folded(bias)
    with np.errstate(invalid="ignore", over="ignore"):
        if not (model.rounds_inputs and model.inputs_maybe_unrounded):
            return _matmul(a, b, model, bias, terms, fmt)
        plain = model.with_(compute=model.storage, inputs_maybe_unrounded=False)
        out = either(_matmul(a, b, model, bias, terms), _matmul(a, b, plain, bias, terms))
        return out if fmt is None else _store(out, fmt, _xp(out.value))


def either(t1: Tracked, t2: Tracked) -> Tracked:
    """A kernel that computes ``t1`` or ``t2`` (say with and without rounding
    its inputs): centred on ``t1``, radius ``max(r1, |v2 - v1| + ref2 + r2)``.
    Where the two disagree about NaN or Inf the element is not judged (its
    radius is NaN): either result is legitimate."""
    t1, t2 = aligned(t1, t2)
    xp = _xp(t1.value)
    v1, v2 = t1.value, t2.value
    if xp is np and fused_cpu.elementwise(v1, v2):  # one loop, the same bits
        det, prob, mag = fused_cpu.either_radii(v1, v2, t1.det, t2.det, t1.prob, t2.prob,
                                                t2.ref_err, t1.mag, t2.mag, 1.0 + 2 * U64)
        return replace(t1, det=det, prob=prob, mag=mag)
    with np.errstate(invalid="ignore"):  # inf - inf: equal infinities agree (gap 0)
        gap = xp.where(v1 == v2, 0.0, xp.abs(v2 - v1))
    gap *= 1.0 + 2 * U64  # one float64 ulp up (1 + 2^-53 rounds to 1): a kernel that
    gap += t2.ref_err     # computes t2 exactly lies strictly inside the bound
    det = xp.maximum(t1.det, gap + t2.det)
    prob = xp.maximum(t1.prob, gap + t2.prob)
    split = (xp.isnan(v1) != xp.isnan(v2)) | ((xp.isinf(v1) | xp.isinf(v2)) & (v1 != v2))
    if not reads_are_free(xp) or bool(split.any()):
        fill_where(det, split, xp.nan)
        fill_where(prob, split, xp.nan)
    return replace(t1, det=det, prob=prob, mag=xp.maximum(t1.mag, t2.mag))


def _coef(c: np.ndarray, xp: Any, device: Any = None) -> Any:
    """A per-element coefficient: a float when it is one number, else an array of ``xp``
    (on ``device``, for torch's namespace)."""
    return float(c) if np.ndim(c) == 0 else as_namespace(c, xp, device)


class _Lengths(NamedTuple):
    """A contraction's accumulation lengths: ``n`` (terms) and ``h`` (its order's
    height + 1) on the host, and as coefficients (floats, or arrays of the device)."""

    n_host: np.ndarray
    h_host: np.ndarray
    terms: Any
    h: Any


def _lengths(k: int, with_bias: bool, n_terms: np.ndarray | None, model: PrecisionModel,
             xp: Any, device: Any = None) -> _Lengths:
    if n_terms is None:  # one length for every element: the same for every contraction
        return _one_length(k + (1 if with_bias else 0), model)
    n_host = np.asarray(n_terms, dtype=np.int64)
    if np.any(n_host < 0) or np.any(n_host > k + (1 if with_bias else 0)):
        from ..errors import InvalidArgument  # noqa: PLC0415

        raise InvalidArgument(
            f"terms must lie in [0, {k + with_bias}] (the contraction length "
            f"{k}{' + 1 for the bias' if with_bias else ''}); got "
            f"[{int(n_host.min())}, {int(n_host.max())}]"
        )
    h_host = model.order.height(n_host) + 1  # + one rounding of the product
    return _Lengths(n_host, h_host, _coef(n_host, xp, device), _coef(h_host, xp, device))


@lru_cache(maxsize=4096)
def _one_length(n: int, model: PrecisionModel) -> _Lengths:
    """:class:`_Lengths` of ``n`` terms for every element (kept, read-only: a
    contraction's host work is a few dictionary lookups, not numpy calls)."""
    n_host = np.asarray(n, dtype=np.int64)
    h_host = np.asarray(model.order.height(n_host) + 1)  # + one rounding of the product
    for a in (n_host, h_host):
        a.setflags(write=False)
    return _Lengths(n_host, h_host, float(n_host), float(h_host))


def _coefficients(lengths: _Lengths, c_in: float, model: PrecisionModel,
                  xp: Any) -> tuple[Any, Any, Any, Any]:
    """``gamma_n(u64)``, the radii's coefficients of ``S`` (deterministic,
    probabilistic) and their absolute slack for underflow (flush to zero included)."""
    if lengths.n_host.ndim == 0 and np.ndim(lengths.h_host) == 0:
        return _one_length_coefficients(int(lengths.n_host), c_in, model)
    return _coefficients_of(lengths, c_in, model, xp)


@lru_cache(maxsize=4096)
def _one_length_coefficients(n: int, c_in: float,
                             model: PrecisionModel) -> tuple[float, float, float, float]:
    return _coefficients_of(_one_length(n, model), c_in, model, np)


def _coefficients_of(lengths: _Lengths, c_in: float, model: PrecisionModel,
                     xp: Any) -> tuple[Any, Any, Any, Any]:
    device = None if isinstance(lengths.terms, float) else device_of(lengths.terms)
    g64, g_det, g_prob = _gammas(lengths.n_host, lengths.h_host, model, xp, device)
    eta = (lengths.h + 1) * model.accumulate.tiny
    return g64, c_in + g_det * (1 + c_in), c_in + g_prob * (1 + c_in), eta


def _matmul(a: Tracked, b: Tracked, model: PrecisionModel, bias: Tracked | None,
            n_terms: np.ndarray | None = None, fmt: Format | None = None) -> Tracked:
    """The contraction, and with ``fmt`` its rounding to it (:func:`_store`)."""
    xp = _xp(a.value)
    lengths = _lengths(a.shape[-1], bias is not None, n_terms, model, xp,
                       None if n_terms is None else device_of(a.value))
    if fused_exact(xp):
        done = _exact_fused_matmul(a, b, model, bias, lengths, fmt)
        if done is not None:
            return done
    a, ca = _operand(a, model)
    b, cb = _operand(b, model)
    av, bv = a.value, b.value
    c_in = ca + cb + ca * cb
    n_host, terms = lengths.n_host, lengths.terms

    value = av @ bv
    rad_a, rad_b, rad_bias, ref_a, ref_b, ref_bias = any_nonzeros(
        a.det, b.det, None if bias is None else bias.det, a.ref_err, b.ref_err,
        None if bias is None else bias.ref_err)
    single = _single(model, av, bv)
    parts = fused_single_parts(av, bv) if single else None
    mags_a = mags_b = None
    if parts is None:
        abs_a, abs_b = xp.abs(av), xp.abs(bv)
        single = single and in_single_range(abs_a, abs_b)
        S = magnitude_sum(abs_a, abs_b, single)
    else:  # (a magnitude only where a radius of the other operand multiplies it: float64
        S = parts[0]  # on demand, where the float32 product of the radius does not run)
        mags_a, mags_b = (_Magnitudes(v, single_products.Magnitudes(m))
                          for v, m in zip((av, bv), parts[1:], strict=True))
        abs_a = mags_a if rad_b or ref_b else None
        abs_b = mags_b if rad_a or ref_a else None
    del parts
    if bias is not None and xp is np and value.shape == np.broadcast_shapes(
            value.shape, bias.shape):  # (value and S this contraction's own: in place)
        value += bias.value
        S += np.abs(bias.value)
    elif bias is not None:
        value = value + bias.value
        S = S + xp.abs(bias.value)
    has_rad = rad_a or rad_b or rad_bias
    has_ref = ref_a or ref_b or ref_bias
    prop: Any = 0.0
    prop_p: Any = 0.0
    ref_prop: Any = 0.0
    if has_rad:
        prop = _propagated(abs_a, a.det, rad_a, abs_b, b.det, rad_b)
        same = _same_radii(a) and _same_radii(b)  # (a radius shared: the same sum)
        prop_p = prop if same else _propagated(abs_a, a.prob, rad_a, abs_b, b.prob, rad_b)
    if has_ref:
        ref_prop = _propagated(abs_a, a.ref_err, ref_a, abs_b, b.ref_err, ref_b)
    del abs_a, abs_b, mags_a, mags_b  # input-sized: not held through the exact context
    # S itself was summed in floating point: it is made an upper bound, the radii affine in it
    g64, det_coef, prob_coef, eta = _coefficients(lengths, c_in, model, xp)
    acc = model.accumulate
    tiny_sum = terms * 2.0**-1074
    coefs = (*_growth(av, single, g64, tiny_sum), tiny_sum, det_coef, prob_coef, eta, g64)
    if has_rad and not (rad_bias or ref_bias) and _loop_takes(S, prop, prop_p, ref_prop,
                                                              coefs):
        # one loop: S + prop grown in place, the radii into the products' arrays
        det, prob, ref_err, not_finite, unknown = fused_cpu.propagated_radii(
            S, prop, prop_p, ref_prop if has_ref else None,
            tuple(float(c) for c in coefs), acc.max)
        if not_finite or unknown:  # (the test below, where the loop found something)
            det, prob = _overflow_to_inf(
                (_finite_magnitude(S, a, b, bias) > acc.max) | np.isnan(det), det, prob)
        out = Tracked(value=value, ref_err=ref_err, det=det, prob=prob, mag=S,
                      n=_n_of(n_host, value))
        out = _settle(out, av, bv, bias, model, lengths, (g64, det_coef, prob_coef, eta),
                      certain=not has_ref, ref_prop=ref_prop)
        return out if fmt is None else _store(out, fmt, xp)
    if has_rad:
        S = S + prop
        if bias is not None:
            prop, prop_p, S = prop + bias.det, prop_p + bias.prob, S + bias.det
    if has_ref and bias is not None:
        ref_prop = ref_prop + bias.ref_err
    det_acc, prob_acc, ref_err = contraction_radii(S, *coefs)
    if has_ref:
        ref_err += ref_prop

    # exact regime: exact inputs on a grid 2^e, all partial sums fit
    det_alone = False  # the kernel's bound zeroed where the reference's is not
    e, top_fits = _grid_and_top(S, av, bv, bias, not has_rad and c_in == 0.0,
                                max(acc.p, FP64.p), acc.max)
    if e is not None and e < (1 << 19):
        fits_acc = (S <= _pow2(acc.p + e)) & (e >= acc.emin)
        fill_where(det_acc, fits_acc, 0.0)
        fill_where(prob_acc, fits_acc, 0.0)
        if not has_ref and e >= FP64.emin - 52:
            fill_where(ref_err, S <= _pow2(FP64.p + e), 0.0)
        else:
            det_alone = True
    if has_rad:
        det_acc += prop
        prob_acc += prop_p
    # unjudgeable: the kernel may overflow, or an inf meets an uncertain input
    # (inf times a subnormal that may be flushed: inf or NaN)
    if has_rad or not top_fits:
        unknown = (_finite_magnitude(S, a, b, bias) > acc.max) | xp.isnan(det_acc)
        det, prob = _overflow_to_inf(unknown, det_acc, prob_acc)
    else:  # S finite and in range, no radius: det_acc = coef S + eta has no NaN
        det, prob = det_acc, prob_acc
    out = Tracked(value=value, ref_err=ref_err, det=det, prob=prob, mag=S,
                  n=_n_of(n_host, value))
    out = _settle(out, av, bv, bias, model, lengths, (g64, det_coef, prob_coef, eta),
                  certain=not has_ref and not det_alone, ref_prop=ref_prop)
    return out if fmt is None else _store(out, fmt, xp)


def _same_radii(t: Tracked) -> bool:
    """Whether ``t``'s probabilistic radius is its deterministic one: the same array,
    or on NumPy equal arrays (a rule that computed both alike; a NaN makes them
    differ), so that a contraction computes their products once."""
    if t.prob is t.det:
        return True
    return (type(t.det) is np.ndarray and type(t.prob) is np.ndarray
            and t.det.shape == t.prob.shape and bool(np.array_equal(t.det, t.prob)))


def _loop_takes(S: Any, prop: Any, prop_p: Any, ref_prop: Any, coefs: tuple[Any, ...]) -> bool:
    """Whether :func:`~numoracle.oracle.fused_cpu.propagated_radii` takes a contraction's
    ``S`` and propagated radii (fresh arrays of this contraction, or 0.0): NumPy's
    float64 arrays of one shape, C-contiguous, numba's loops there, one accumulation
    length (float coefficients)."""
    arrays = (S, prop, prop_p) + ((ref_prop,) if isinstance(ref_prop, np.ndarray) else ())
    return (all(type(x) is np.ndarray and x.dtype == np.float64 and x.shape == S.shape
                and x.flags.c_contiguous and x.flags.writeable for x in arrays)
            and (isinstance(ref_prop, np.ndarray) or ref_prop == 0.0)
            and fused_cpu.elementwise(S) and all(np.ndim(c) == 0 for c in coefs))


class _Magnitudes:
    """An operand's magnitudes for the products of radii: rounded up to float32 (the
    magnitude sum's), and ``|v|`` in float64 on first use (where the float32 product
    does not run: :func:`~numoracle.oracle.single_products.upper_product`)."""

    def __init__(self, value: np.ndarray, single: single_products.Magnitudes) -> None:
        self.value, self.single = value, single
        self._abs: np.ndarray | None = None

    def abs(self) -> np.ndarray:
        if self._abs is None:
            self._abs = np.abs(self.value)
        return self._abs


def _propagated(abs_a: Any, ra: Any, rad_a: bool, abs_b: Any, rb: Any, rad_b: bool) -> Any:
    """What radii ``ra``, ``rb`` of the operands add to a contraction's:
    ``|a| @ rb + ra @ |b| + ra @ rb``, leaving out the products of a radius that is 0
    everywhere (``rad_a``, ``rad_b`` say which is not); 0.0 where both are. A
    magnitude given as :class:`_Magnitudes` multiplies a radius in float32 GEMMs
    where they run (an upper bound, above the float64 product by less than ``2^-11``
    of itself: :mod:`~numoracle.oracle.single_products`), and then so does the
    product of the radii (:func:`~numoracle.oracle.single_products.radii_product`)."""
    out: Any = 0.0
    if rad_b:
        out = _radius_product(abs_a, rb, mags_first=True)
    if rad_a:
        out = out + _radius_product(abs_b, ra, mags_first=False)
    if rad_a and rad_b:
        product = single_products.radii_product(ra, rb) if (
            SINGLE_SUMS and isinstance(abs_a, _Magnitudes)) else None
        out = out + (ra @ rb if product is None else product)
    return out


def _radius_product(mags: Any, r: Any, mags_first: bool) -> Any:
    """``mags @ r`` (``mags_first``) or ``r @ mags`` of a magnitude and a radius."""
    if isinstance(mags, _Magnitudes):
        out = single_products.upper_product(mags.single, r, mags_first) if (
            SINGLE_SUMS) else None
        if out is not None:
            return out
        mags = mags.abs()
    return _rmm(mags, r) if mags_first else _rmm(r, mags)


def _n_of(n_host: np.ndarray, value: Any) -> int | np.ndarray:
    return int(n_host) if n_host.ndim == 0 else np.broadcast_to(n_host, value.shape)


def _settle(out: Tracked, av: Any, bv: Any, bias: Tracked | None, model: PrecisionModel,
            lengths: _Lengths, coefs: tuple[Any, Any, Any, Any], *, certain: bool,
            ref_prop: Any = 0.0) -> Tracked:
    """``out``, or where the float64 reference may not be precise enough, its
    escalation to the exact context. It surely is (``certain`` of every element's
    reference radius, one accumulation length) where its coefficient and its
    underflow slack lie below ESCALATE_SHARE of the kernel's."""
    if _precise(lengths, coefs, certain=certain):
        return out
    return _escalate(out, av, bv, bias, model, ref_prop)


def _precise(lengths: _Lengths, coefs: tuple[Any, Any, Any, Any], *, certain: bool) -> bool:
    """Whether the float64 reference surely is precise enough (see :func:`_settle`)."""
    g64, det_coef, prob_coef, eta = coefs
    if not (certain and np.ndim(lengths.h_host) == 0
            and float(g64) <= ESCALATE_SHARE * min(float(det_coef), float(prob_coef))):
        return False
    n_max = lengths.n_host if lengths.n_host.ndim == 0 else np.max(lengths.n_host)
    return bool(float(n_max) * 2.0**-1074
                <= ESCALATE_SHARE * (eta if isinstance(eta, float) else float(np.min(eta))))


def _exact_fused_matmul(a: Tracked, b: Tracked, model: PrecisionModel, bias: Tracked | None,
                        lengths: _Lengths, fmt: Format | None = None) -> Tracked | None:
    """:func:`_matmul` of exact operands, one pass over each operand
    (:func:`~numoracle.oracle.fused.operand_facts`; an exact input's kept from its
    last contraction) and one over the output after the GEMMs (with ``fmt``, the
    rounding to it too): the same bits as the general path. On CuPy its one
    synchronisation waits for the operands' facts while the GEMMs run. ``None``
    where the general path is needed (its GEMMs run again there; rare): operands
    with radii, non-finite elements, subnormals the model may flush, a grid below
    float64's (its reference radius is not zeroed with the kernel's), operands
    outside float32's normal range (TF32's on a GPU) where ``S`` would be summed in
    float32 (TF32); on NumPy also lengths that vary per element."""
    operands = (a, b) + ((bias,) if bias is not None else ())
    # (an exact input, or its transpose, keeps its facts' memo and exact's zero radii)
    if any(getattr(t, _MEMO, None) is None and (any_nonzero(t.det) or any_nonzero(t.ref_err))
           for t in operands):
        return None
    if _xp(a.value) is np and np.ndim(lengths.n_host):
        return None
    av, bv = a.value, b.value
    if model.rounds_inputs and model.input_rounding is not None:
        # a known rounding of exact inputs is applied exactly (as _operand)
        av, bv = (quantize(v, model.compute, model.input_rounding) for v in (av, bv))
    # an unknown one is charged where an operand is off the compute format (as _operand)
    unknown_rounding = model.rounds_inputs and model.input_rounding is None
    xp = _xp(av)
    single = _single(model, av, bv)
    # (the facts' pass gives the grid: CuPy's kernels, torch's tensor operations)
    cupy = fused(xp)
    on_device = cupy or (xp is not np and fused_torch.available(xp))
    if single and on_device and not cupy:
        return None  # (torch's passes sum magnitudes in float64 only)
    operand_values = [av, bv] + ([bias.value] if bias is not None else [])
    # the grid on the host only where some element may be exact (see below)
    grid = on_device or unknown_rounding
    memos = [_memo(t, v) for t, v in zip(operands, operand_values, strict=True)]
    key = (model.compute, single, grid)
    known = [_recalled(m, v, key) for m, v in zip(memos, operand_values, strict=True)]
    value, S, pending = exact_products(
        av, bv, operand_values, model.compute, _NO_GRID, grid=grid, single=single,
        known=known, keep=[m is not None and k is None for m, k in zip(memos, known,
                                                                        strict=True)])
    facts = pending.result()
    del pending
    for m, k, f, v in zip(memos, known, facts, operand_values, strict=True):
        if m is not None and k is None:
            m[key] = (f, v)
    if any(f.flags & NOT_FINITE for f in facts) or (
            single and any(f.flags & OFF_SINGLE for f in facts[:2])):
        return None
    c = [model.input_unit() if unknown_rounding and f.flags & UNREPRESENTABLE else 0.0
         for f in facts[:2]]
    if any((model.flush_subnormal_inputs or ci > 0.0) and f.flags & SUBNORMAL
           for ci, f in zip(c, facts, strict=False)):
        return None
    c_in = c[0] + c[1] + c[0] * c[1]
    acc = model.accumulate
    fits_acc = fits_64 = -1.0  # S >= 0: no element fits
    if c_in == 0.0 and (on_device or _may_fit(S, av, bv, bias, max(acc.p, FP64.p))):
        # (S here is not yet grown: where no element of it fits, none grown does)
        if on_device and not cupy:  # (torch's: the grid kept on the device)
            too_fine, fits_acc, fits_64 = fused_torch.grid_thresholds(
                [f.lsb if f.low is None else f.low for f in facts], _NO_GRID, acc.p,
                acc.emin, FP64.p, FP64.emin - 52, xp.tensor(S).device,
                deep=any(f.deep if f.low is not None else f.lsb < fused_torch.DEEP_EXPONENT
                         for f in facts))
            if too_fine:
                return None
            e = None
        else:
            e = _grid_exponent(*(f.exponent(_NO_GRID) if on_device else lsb_exponent(v)
                                 for f, v in zip(facts, operand_values, strict=True)))
            if e < FP64.emin - 52:
                return None
        if e is not None and e < (1 << 19):
            fits_acc = _pow2(acc.p + e) if e >= acc.emin else -1.0
            fits_64 = _pow2(FP64.p + e)
    del facts
    g64, det_coef, prob_coef, eta = coefs = _coefficients(lengths, c_in, model, xp)
    tiny_sum = lengths.terms * 2.0**-1074
    precise = _precise(lengths, coefs, certain=True)  # (else the rounding after escalating)
    S, det, prob, ref_err = exact_contraction_radii(
        value, S, None if bias is None else bias.value,
        *_growth(av, single, g64, tiny_sum), tiny_sum, det_coef, prob_coef, eta,
        g64, fits_acc, fits_64, acc.max, fmt if precise else None)
    out = Tracked(value=value, ref_err=ref_err, det=det, prob=prob, mag=S,
                  n=_n_of(lengths.n_host, value))
    if precise:
        return out
    out = _escalate(out, av, bv, bias, model)
    return out if fmt is None else _store(out, fmt, xp)


def _single(model: PrecisionModel, *operands: Any) -> bool:
    """Whether a contraction of ``operands`` sums its magnitudes ``S`` in float32
    (where its operands' nonzero magnitudes lie in float32's normal range), for an
    accumulator within float32's range (its underflow slack ``eta`` dwarfs
    float32's): on NumPy (the CPU's float32 GEMM takes half the time of float64's)
    in float32 GEMMs of at most SINGLE_CHUNK terms
    (:func:`~numoracle.oracle.fused.single_sum`), ``S`` grown by ``2
    gamma_{c+1}(2^-24)`` (``c`` terms a GEMM) instead of ``2 gamma_n(2^-53)``: the
    bound grows by less than ``2^-11`` of itself. On a GPU (CuPy's arrays, torch's
    with CuPy installed; matrices and stacks of them) on the tensor cores, the
    magnitudes rounded up to TF32 (:mod:`~numoracle.oracle.tensor_sums`): the bound
    grows by less than ``2^-8`` of itself. ``SINGLE_SUMS`` switches both off."""
    acc = model.accumulate
    if not (SINGLE_SUMS and acc.tiny >= FP32.tiny and acc.max <= FP32.max):
        return False
    x = operands[0]
    if _xp(x) is np:
        return True
    return all(v.ndim >= 2 for v in operands) and tensor_sums.available(x)


def _growth(av: Any, single: bool, g64: Any, tiny_sum: Any) -> tuple[Any, Any]:
    """What makes ``S`` (of a contraction of ``av``'s length) an upper bound of the
    sum of its magnitudes: ``S grow + tiny_mag``. Summed in float64 ``1 + 2
    gamma_n(u64)`` and ``n 2^-1074`` (``g64``, ``tiny_sum``); in float32 or TF32
    (:func:`_single`) :func:`~numoracle.oracle.fused.single_growth`."""
    if not single:
        return 1.0 + 2.0 * g64, tiny_sum
    return single_growth(av.shape[-1], tensor=_xp(av) is not np)


def _gammas(n_host: np.ndarray, h_host: np.ndarray, model: PrecisionModel,
            xp: Any, device: Any = None) -> tuple[Any, Any, Any]:
    """``gamma_n(u64)``, ``gamma_h(u_acc)`` and ``gamma~_h(u_acc)``: floats (cached)
    for one accumulation length, else arrays of ``xp`` (on ``device``)."""
    if n_host.ndim == 0 and np.ndim(h_host) == 0:
        return _scalar_gammas(int(n_host), int(h_host), model.acc_unit(), model.alpha,
                              int(model.order.chain(n_host)))
    u_acc = model.acc_unit()
    return (_coef(gamma(n_host, U64), xp, device), _coef(gamma(h_host, u_acc), xp, device),
            _coef(model.gamma_prob(h_host, n_host), xp, device))


@lru_cache(maxsize=4096)
def _scalar_gammas(n: int, h: int, u_acc: float, alpha: float,
                   chain: int) -> tuple[float, float, float]:
    return (float(gamma(np.asarray(n), U64)), float(gamma(np.asarray(h), u_acc)),
            float(gamma_prob(np.asarray(h), u_acc, alpha, chain)))


def _grid_and_top(S: Any, av: Any, bv: Any, bias: Tracked | None, exact_inputs: bool,
                  p: int, limit: float) -> tuple[int | None, bool]:
    """The exponent ``e`` of the grid ``2^e`` every product and the bias lie on,
    where some element may be in the exact regime (``exact_inputs`` and ``S``
    within ``2^(p + e)`` somewhere; else None), and whether ``max(S) <= limit``
    (not where ``S`` holds a NaN): a decision, not a value, so that a recorded
    evaluation (:mod:`~numoracle.oracle.traced.recording`) guards only it. On a
    device: full scans, one synchronisation."""
    xp = _xp(S)
    if not S.size:
        return None, True
    if fused(xp):
        scans = (av, bv) + ((bias.value,) if bias is not None else ()) if exact_inputs else ()
        *lsb, s_min, s_max = device_scalars(
            [lowest_set_bit(v, _NO_GRID, sync=False) for v in scans] + [xp.min(S), xp.max(S)])
        if not exact_inputs:
            return None, s_max <= limit
        e = _grid_exponent(*(int(v) for v in lsb))
        return (None if s_min > _pow2(p + e) else e), s_max <= limit  # a NaN in S: may fit
    top_fits = bool(xp.max(S) <= limit)
    if not (exact_inputs and _may_fit(S, av, bv, bias, p)):
        return None, top_fits
    return _grid_exponent(lsb_exponent(av), lsb_exponent(bv),
                          *((lsb_exponent(bias.value),) if bias is not None else ())), top_fits


def _grid_exponent(ea: int, eb: int, e_bias: int | None = None) -> int:
    """The grid of the products (``ea + eb``) and the bias, from their lowest set bits."""
    # an operand without a nonzero finite element makes every product 0: on any grid
    e = ea + eb if max(ea, eb) < _NO_GRID else 0
    return e if e_bias is None else min(e, e_bias)


def _may_fit(S: Any, av: Any, bv: Any, bias: Tracked | None, p: int) -> bool:
    """False when no element can be in the exact regime: the smallest ``S``
    exceeds ``2^(p + e)`` for an upper bound ``e`` of the grid exponent (the
    lowest set bit of a few sampled elements: the grid is never coarser), so
    the full scan of :func:`lsb_exponent` is skipped."""
    if not S.size:
        return False
    if av.size + bv.size <= 1 << 14:  # small: the full scan costs no more than sampling
        return True
    e_up = 0
    for arr in (av, bv) + ((bias.value,) if bias is not None else ()):
        corner = arr[(0,) * (arr.ndim - 2)][:8, :8] if arr.ndim >= 2 else arr[:64]
        e = lsb_exponent(_xp(arr).ascontiguousarray(corner))
        if e >= _NO_GRID:  # no nonzero finite element sampled: no upper bound
            return True
        e_up = e_up + e if arr is not (bias.value if bias is not None else None) else min(
            e_up, e)
    return not float(_xp(S).min(S)) > _pow2(p + e_up)


def _pow2(e: int) -> float:
    """``2^e`` as a float: ``inf`` above float64's range (every finite sum fits)."""
    return math.inf if e > 1023 else math.ldexp(1.0, max(e, -1100))


def _rmm(x: Any, y: Any) -> Any:
    """``x @ y`` for magnitudes and radii, with ``0 * inf = 0``: a radius of 0
    adds nothing, even beside an infinite value. A NaN radius (an element left
    unjudged: :func:`unjudged`) makes every sum it enters NaN, whatever it is
    multiplied by: the kernel's element may be NaN there, and ``NaN * 0`` is NaN."""
    xp = _xp(x)
    out = x @ y
    if not bool(xp.isnan(xp.sum(out))):  # (terms >= 0: no NaN, so no 0 * inf, no NaN term)
        return out
    fin = lambda v: xp.where(xp.isfinite(v), v, 0.0)  # noqa: E731
    out = fin(x) @ fin(y)
    hits = ((x != 0) * 1.0) @ (xp.isinf(y) * 1.0) + (xp.isinf(x) * 1.0) @ ((y != 0) * 1.0)
    out = xp.where(hits > 0, xp.inf, out)  # (a vector's product is a scalar: not in place)
    ones_x, ones_y = xp.ones_like(x), xp.ones_like(y)  # (any ranks: matmul's own shapes)
    nans = (xp.isnan(x) * 1.0) @ ones_y + ones_x @ (xp.isnan(y) * 1.0)
    return xp.where(nans > 0, xp.nan, out)


def _finite_magnitude(S: Any, a: Tracked, b: Tracked, bias: Tracked | None) -> Any:
    """``S`` over the finite terms only: where it exceeds the accumulator's range
    the kernel may overflow (and then make NaN of inf - inf) legitimately."""
    xp = _xp(S)
    if bool(xp.isfinite(S).all()):
        return S
    fin = lambda v: xp.where(xp.isfinite(v), xp.abs(v), 0.0)  # noqa: E731
    av, bv = a.value, b.value
    bias_v = None if bias is None else bias.value
    exact_operands = not any(any_nonzero(t.det) for t in (a, b) + ((bias,) if bias else ()))
    if exact_operands and av.ndim == 2 and bv.ndim == 2 and (bias_v is None or bias_v.ndim <= 1):
        # only rows of a and columns of b (or the bias) with a non-finite value
        # change: elsewhere every term is finite and S is already their sum (made
        # an upper bound: at most 2 gamma_n larger, on the safe side)
        rows = xp.nonzero(~xp.isfinite(av).all(axis=1))[0]
        bad_cols = ~xp.isfinite(bv).all(axis=0)
        if bias_v is not None:
            bad_cols = bad_cols | ~xp.isfinite(xp.broadcast_to(bias_v, bad_cols.shape))
        cols = xp.nonzero(bad_cols)[0]
        m, n = S.shape
        if int(rows.size) * n + m * int(cols.size) < m * n // 2:
            fb = None if bias_v is None else fin(xp.broadcast_to(bias_v, (n,)))
            out = S.copy()
            if rows.size:
                out[rows, :] = fin(av[rows]) @ fin(bv) + (0.0 if fb is None else fb)
            if cols.size:
                out[:, cols] = fin(av) @ fin(bv[:, cols]) + (0.0 if fb is None else fb[cols])
            return out
    out = fin(av) @ fin(bv)
    return out + fin(bias_v) if bias_v is not None else out


def _overflow_to_inf(mask: Any, *arrays: Any) -> tuple[Any, ...]:
    """Bounds become infinite (unjudgeable) where the result may overflow."""
    if reads_are_free(_xp(mask)) and not bool(mask.any()):
        return arrays
    for a in arrays:
        fill_where(a, mask, math.inf)
    return arrays


def add(a: Tracked, b: Tracked, model: PrecisionModel) -> Tracked:
    """Elementwise ``a + b`` rounded once in the accumulation format: adds
    ``u_acc (|a + b| + radii) + 2^emin``; exact where both are exact and the sum
    is representable."""
    a, b = aligned(a, b)
    xp = _xp(a.value)
    if xp is np and fused_cpu.elementwise(a.value, b.value):  # one loop, the same bits
        return _add_loop(a, b, model, 1.0)
    with np.errstate(invalid="ignore", over="ignore"):
        value = xp.asarray(a.value + b.value)  # 0-d operands: an array, not a scalar
        acc = model.accumulate
        ref_err = xp.asarray(a.ref_err + b.ref_err + U64 * xp.abs(value))
        scaled = xp.abs(value) + ref_err
        scaled *= model.acc_unit()
        scaled += acc.tiny
        det = rounded(a.det + b.det, scaled, model.acc_unit())
        prob = rounded(a.prob + b.prob, scaled, model.acc_unit())
        # arrays, also for 0-d operands (whose arithmetic gives NumPy scalars)
        det, prob, ref_err = (xp.asarray(r, dtype=xp.float64) for r in (det, prob, ref_err))
        if may_be_exact(a, b):  # (else no element is: the passes below are skipped)
            # TwoSum's error term: 0 exactly when the float64 sum is exact
            bb = value - a.value
            hi_err = (a.value - (value - bb)) + (b.value - bb)
            exact_here = ((a.det == 0) & (b.det == 0) & (a.ref_err == 0) & (b.ref_err == 0)
                          & (hi_err == 0) & representable(value, acc))
            for r in (det, prob, ref_err):
                fill_where(r, exact_here, 0.0)
        n = a.n + b.n
        mag = xp.abs(a.value) + xp.abs(b.value)
    return Tracked(value=value, ref_err=ref_err, det=det, prob=prob, mag=mag, n=n)


def sub(a: Tracked, b: Tracked, model: PrecisionModel) -> Tracked:
    """Elementwise ``a - b`` rounded once in the accumulation format: :func:`add`
    of ``a`` and ``-b`` (negation is exact)."""
    a, b = aligned(a, b)
    if _xp(a.value) is np and fused_cpu.elementwise(a.value, b.value):  # one loop, -b in it
        return _add_loop(a, b, model, -1.0)
    return add(a, negated(b), model)


def _add_loop(a: Tracked, b: Tracked, model: PrecisionModel, sign: float) -> Tracked:
    """:func:`add` of ``a`` and ``sign b`` in numba's one loop (NumPy operands)."""
    value, ref_err, det, prob, mag = fused_cpu.add_radii(
        a.value, b.value, (a.det, b.det, a.prob, b.prob, a.ref_err, b.ref_err),
        model.accumulate, model.acc_unit(), U64, may_be_exact(a, b), sign)
    return Tracked(value=value, ref_err=ref_err, det=det, prob=prob, mag=mag, n=a.n + b.n)


def folded(t: Tracked) -> Tracked:
    """``t`` without its low part: ``value`` alone, ``|lo|`` moved into ``ref_err``."""
    if t.lo is None:
        return t
    xp = _xp(t.value)
    return replace(t, ref_err=t.ref_err + xp.abs(t.lo), lo=None)


def relu(t: Tracked) -> Tracked:
    """Elementwise ``max(t, 0)``: no rounding, and 1-Lipschitz, so every radius
    passes through unchanged (``|relu(a) - relu(b)| <= |a - b|``); NaN stays NaN."""
    t = folded(t)
    xp = _xp(t.value)
    with np.errstate(invalid="ignore"):
        value = xp.where(t.value > 0, t.value, xp.where(xp.isnan(t.value), t.value, 0.0))
    return replace(t, value=value)


def relu_mask_mul(g: Tracked, x: Tracked) -> Tracked:
    """Elementwise ``g * (x > 0)``: the backward pass of :func:`relu` (``x`` its
    input, or its output: the mask is the same).

    Multiplying by 1 or 0 rounds nothing. Where the sign of ``x`` is certain
    (``|x| > x.det + x.ref_err``, or ``x`` is an exact 0) the result is ``g``
    masked exactly, radii included. Where it is not, the kernel's mask may
    differ from the oracle's, so its result is ``0`` or its ``g``: the radii
    grow by ``|g|`` (centred on the oracle's choice, they cover both). A NaN
    radius of ``x`` (not judged) leaves the sign unsure. Where ``g`` may be
    non-finite in the kernel (an infinite or NaN radius or value), a masked
    element is not judged either: ``g * 0`` is NaN in a kernel that multiplies
    by the mask, 0 in one that selects."""
    g, x = folded(g), folded(x)
    xp = _xp(g.value)
    with np.errstate(invalid="ignore", over="ignore"):
        keep = x.value > 0
        slack = x.det + x.ref_err
        unsure = ~(xp.abs(x.value) > slack) & (slack != 0)  # NaN slack: unsure
        zero = xp.zeros_like(g.value)
        value = xp.where(keep, g.value, zero)
        gabs = xp.abs(g.value)
        wild = ~(xp.isfinite(g.det) & xp.isfinite(g.value))
        zero_or_unknown = xp.where(wild, xp.inf, zero)
        det = xp.where(unsure, g.det + gabs, xp.where(keep, g.det, zero_or_unknown))
        prob = xp.where(unsure, g.prob + gabs, xp.where(keep, g.prob, zero_or_unknown))
        ref_err = xp.where(keep | unsure, g.ref_err, zero)
        mag = xp.where(keep | unsure, g.mag, zero)
    return replace(g, value=value, ref_err=ref_err, det=det, prob=prob, mag=mag)


def two_product_error(a: np.ndarray, b: Any) -> np.ndarray:
    """The rounding error of the float64 product ``a * b`` (Dekker's TwoProduct):
    0 exactly where the product is exact (finite, no underflow)."""
    p = a * b
    a_hi, a_lo = _split(a)
    xp = _xp(a)
    b_hi, b_lo = _split(xp.asarray(b, dtype=xp.float64))
    return ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo


def mul_scalar(t: Tracked, c: float, model: PrecisionModel, *, divide: bool = False,
               c_rel_err: float = 0.0) -> Tracked:
    """Elementwise ``t * c`` (``t / c`` with ``divide=True``) for an exact float64
    scalar ``c``, rounded once in the accumulation format.

    The kernel may use ``c_k`` with ``|c_k - c| <= c_rel_err |c|`` (say ``c``
    rounded to float32: ``c_rel_err = u_storage``). With ``k = |c|`` (``1/|c|``
    when dividing), ``e`` the relative error of the kernel's factor and ``u``
    the accumulation unit, the radius is::

        k r (1 + e)(1 + u) + (u (1 + e) + e) k (|t| + ref_err) + 2^emin_acc

    and 0 where ``t`` is exact, ``e = 0`` and the product is exact and
    representable in the accumulation format (a power-of-two factor, say)."""
    t = folded(t)
    xp = _xp(t.value)
    c = float(c)
    if divide and c == 0.0:
        from ..errors import InvalidArgument  # noqa: PLC0415

        raise InvalidArgument(f"mul_scalar: {c=} with divide=True divides by zero; give a "
                              "nonzero divisor")
    if not (c_rel_err >= 0.0 and c_rel_err < 1.0):
        from ..errors import InvalidArgument  # noqa: PLC0415

        raise InvalidArgument(f"{c_rel_err=} must lie in [0, 1), e.g. the storage format's "
                              "unit roundoff when the kernel rounds the scalar")
    e = c_rel_err / (1.0 - c_rel_err) if divide else c_rel_err
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        coefs = scalar_coefficients(c, model, divide, c_rel_err)
        k, ref_coef, scale_coef, radius_coef, _, tiny = coefs
        acc = model.accumulate
        u = model.acc_unit()
        mag = None
        if xp is np and fused_cpu.elementwise(t.value):  # one loop, the same bits
            value, ref_err, det, prob, mag = fused_cpu.scalar_radii(t, c, divide, coefs)
        else:
            value = t.value / c if divide else t.value * c
            ref_err = t.ref_err * k
            ref_err += ref_coef * xp.abs(value) + 2.0**-1074
            scaled = (xp.abs(t.value) + t.ref_err) * scale_coef
            scaled += tiny
            det = rounded(t.det * radius_coef, scaled, u)
            prob = rounded(t.prob * radius_coef, scaled, u)
            det, prob, ref_err = (xp.asarray(a, dtype=xp.float64) for a in (det, prob,
                                                                            ref_err))
        if keeps_subnormals(xp) and e == 0.0 and may_be_exact(t):
            if divide:  # exact where value * c gives back t.value exactly
                err = xp.where(value * c == t.value, two_product_error(value, c), 1.0)
            else:
                err = two_product_error(t.value, c)
            no_underflow = xp.where(value == 0, t.value == 0, xp.abs(value) >= 2.0**-969)
            exact_here = ((t.det == 0) & (t.ref_err == 0) & (err == 0) & xp.isfinite(value)
                          & no_underflow & representable(value, acc))
            for r in (det, prob, ref_err):
                fill_where(r, exact_here, 0.0)
    return Tracked(value=value, ref_err=ref_err, det=det, prob=prob,
                   mag=xp.abs(value) if mag is None else mag, n=t.n)


def scalar_coefficients(c: float, model: PrecisionModel, divide: bool,
                        c_rel_err: float) -> tuple[float, float, float, float, float, float]:
    """:func:`mul_scalar`'s coefficients (its arguments validated): ``k`` (``|c|``, or
    ``1/|c|`` rounded up), the reference radius's coefficient of ``|value|``, the
    rounding's of ``|t| + ref_err``, the radii's factor, ``1 + u`` and the
    accumulator's smallest normal."""
    e = c_rel_err / (1.0 - c_rel_err) if divide else c_rel_err
    k = 1.0 / abs(c) if divide else abs(c)
    k *= 1.0 + 2 * U64  # 1/|c| rounded: keep it an upper bound
    u = model.acc_unit()
    return (k, U64 * (1.0 + 2 * U64), k * (u * (1.0 + e) + e), k * (1.0 + e), 1.0 + u,
            model.accumulate.tiny)


def sum_(x: Tracked, axis: int, model: PrecisionModel, *, stored: bool = False) -> Tracked:
    """Sum over ``axis``: a contraction with a vector of ones (exact factors), its
    running sums in ``model``'s summation format where claimed
    (:meth:`numoracle.oracle.precision.PrecisionModel.summing`). A sum multiplies nothing, so its terms are not rounded to a narrower compute format
    (tf32 and fp16 multipliers round only the factors of products). Over the last
    axis on CuPy with the row sums' kernels switched on
    (:func:`~numoracle.oracle.fused.device_row_sums`) two kernels and one read
    (:func:`_row_sums`): the contraction's radii, ``S`` summed in float64.

    ``stored``: the result as ``store(sum_(x, axis, model), model)`` makes it (rounded
    to ``model``'s storage format), in the contraction's own pass over its outputs."""
    xp = _xp(x.value)
    fmt = _store_format(model) if stored else None  # (the model's own, not the summing one's)
    model = model.summing()  # a running sum kept in a narrower format, where claimed
    if model.rounds_inputs:
        model = model.with_(compute=model.storage, inputs_maybe_unrounded=False)
    ndim = x.value.ndim
    if ndim and axis % ndim == ndim - 1 and device_row_sums(xp):
        rows = _row_sums(x, model)
        if rows is not None:
            return rows if fmt is None else _store(rows, fmt, xp)
    # (..., n) with the summed axis last: a matrix's first axis by its transpose, which
    # keeps an exact input's operand facts (:func:`_memo`)
    moved = x.T if ndim == 2 and axis in (0, -2) else _moveaxis(x, axis)
    ones = _ones(xp, moved.shape[-1], model, moved.value)
    r = _contraction(moved, ones, model, None, None, fmt)
    return _squeeze_last(r)


def sum_of_parts(parts: np.ndarray, k: int, model: PrecisionModel) -> Tracked | None:
    """:func:`sum_` over the last axis of rows of ``k`` terms from their float64 sums
    (``parts``, NumPy, ``(..., 5)``: the sums of the values, of their magnitudes, of
    det, prob and ref_err, each summed in some order, as a GEMV sums): what the
    contraction with a vector of ones gives with ``S`` summed in float64 (as
    :func:`_row_sums` on a device): ``S`` grown into an upper bound by ``1 + 2
    gamma_k(u64)`` and ``k 2^-1074``, the radii affine in it. A loop that forms the
    terms sums them as it goes, and no array of the terms is made. None where the
    contraction decides: a sum not finite (a term, or the sum itself), no det
    nonzero anywhere (the exact regime), the model rounding its inputs or flushing
    subnormal ones, or the float64 reference not precise enough somewhere."""
    coefs = parts_coefficients(k, model)
    if coefs is None:
        return None
    grow, tiny_mag, det_coef, prob_coef, eta, g64, tiny_sum, acc_max = coefs
    sv, sm, sd, sp, sr = (np.ascontiguousarray(parts[..., q]) for q in range(5))
    with np.errstate(invalid="ignore", over="ignore"):
        if not (np.isfinite(sm).all() and np.isfinite(sd).all() and np.isfinite(sp).all()
                and np.isfinite(sr).all()) or not (sd > 0.0).any():
            return None
        s = sm + sd
        s *= grow
        s += tiny_mag
        det = s * det_coef + eta
        prob = s * prob_coef + eta
        ref_err = s * g64 + tiny_sum
        if (sr > 0.0).any():
            ref_err += sr
        det += sd
        prob += sp
        if bool(np.any(s > acc_max)) or bool(np.isnan(det).any()):
            return None
        if bool(np.any((ref_err > ESCALATE_SHARE * np.minimum(det, prob))
                       & (np.abs(sv) < np.inf))):
            return None
    return Tracked(value=sv, ref_err=ref_err, det=det, prob=prob, mag=s, n=int(k))


def parts_coefficients(k: int, model: PrecisionModel) -> tuple[float, ...] | None:
    """:func:`sum_of_parts`' coefficients for rows of ``k`` terms under ``model``:
    ``S``'s growth and its underflow slack, the radii's coefficients of ``S`` (det,
    prob) and their slack, ``gamma_k(u64)``, ``k 2^-1074`` and the accumulator's
    largest number; None where the contraction decides (a model that rounds or
    flushes its inputs, no term)."""
    model = model.summing()
    if model.rounds_inputs or model.flush_subnormal_inputs or k < 1:
        return None
    lengths = _lengths(k, False, None, model, np)
    g64, det_coef, prob_coef, eta = _coefficients(lengths, 0.0, model, np)
    tiny_sum = lengths.terms * 2.0**-1074
    grow, tiny_mag = _growth(None, False, g64, tiny_sum)
    return (float(grow), float(tiny_mag), float(det_coef), float(prob_coef), float(eta),
            float(g64), float(tiny_sum), float(model.accumulate.max))


#: on a GPU, the exact column of ones of the last few sums' lengths (with their operand
#: facts): a sum launches nothing to make it, and no pass over it
_ONES: dict[tuple[Any, ...], Tracked] = {}
_ONES_KEPT = 8


def _ones(xp: Any, k: int, model: PrecisionModel, like: Any) -> Tracked:
    """``exact(ones((k, 1)))`` of ``xp``, made where ``like`` is; where contractions take
    their operands' facts from a device's pass (CuPy's kernels, torch's passes: see
    :func:`_memo`) kept for the next sums of length ``k`` on the same device, its
    operand facts for ``model`` known (``|1| = 1``, lowest set bit ``2^0``, no flag)
    without a pass."""
    cupy = fused(xp)
    if not cupy and (xp is np or not fused_torch.available(xp)):
        return exact(filled(xp, (k, 1), 1.0, like))
    device = xp.cuda.runtime.getDevice() if cupy else str(xp.tensor(like).device)
    key = (xp.__name__, device, k)
    ones = _ONES.pop(key, None)
    if ones is None:
        ones = exact(filled(xp, (k, 1), 1.0, like))
    _ONES[key] = ones  # the most recent last
    while len(_ONES) > _ONES_KEPT:
        del _ONES[next(iter(_ONES))]
    memo = _memo(ones, ones.value)
    if memo is not None:  # its facts known: no pass, nothing to wait for
        single = _single(model, ones.value)  # (then the magnitudes are float32)
        fact_key = (model.compute, single, True)
        if fact_key not in memo and (cupy or not single):  # (torch's: float64 only)
            memo[fact_key] = (OperandFacts(ones.value.astype(xp.float32) if single
                                           else ones.value, 0, 0), ones.value)
    return ones


def _row_sums(x: Tracked, model: PrecisionModel) -> Tracked | None:
    """:func:`sum_` over the last axis by the device's row kernels
    (:func:`~numoracle.oracle.fused_cuda.row_sums`): what the contraction with a vector
    of ones gives, ``S`` summed in float64 (an upper bound, as the GEMM's), two kernels
    and one read; None where it does not run (an escalated or empty input, few long rows,
    a value or radius not finite, a float64 reference not precise enough: the
    contraction decides)."""
    shape = x.shape
    k = shape[-1]
    if x.lo is not None or not x.value.size or not fused_cuda.row_sums_fit(x.value.size // k, k):
        return None
    xp = _xp(x.value)
    lengths = _lengths(k, False, None, model, xp)
    g64, det_coef, prob_coef, eta = _coefficients(lengths, 0.0, model, xp)
    tiny_sum = lengths.terms * 2.0**-1074
    grow, tiny_mag = _growth(x.value, False, g64, tiny_sum)
    acc = model.accumulate
    rows = tuple(fused_cuda.as_rows(xp.asarray(a), shape)
                 for a in (x.value, x.det, x.prob, x.ref_err))
    out = fused_cuda.row_sums(
        rows[0], rows[1:], model.compute.tiny if model.flush_subnormal_inputs else 0.0,
        _NO_GRID, (grow, tiny_mag, tiny_sum, det_coef, prob_coef, eta, g64, acc.max,
                   ESCALATE_SHARE),
        (acc.p, acc.emin, FP64.p, FP64.emin - 52, _NO_GRID))
    if out is None:
        return None
    value, det, prob, ref_err, mag = (a.reshape(shape[:-1]) for a in out)
    return Tracked(value=value, ref_err=ref_err, det=det, prob=prob, mag=mag, n=int(k))


def _moveaxis(t: Tracked, axis: int) -> Tracked:
    def mv(a: np.ndarray) -> np.ndarray:
        return np.moveaxis(a, axis, -1)
    return replace(t, value=mv(t.value), ref_err=mv(t.ref_err), det=mv(t.det),
                   prob=mv(t.prob), mag=mv(t.mag), lo=None if t.lo is None else mv(t.lo))


def _squeeze_last(t: Tracked) -> Tracked:
    def sq(a: np.ndarray) -> np.ndarray:
        if type(a).__module__ == TORCH_ARRAYS:  # (on the tensor: not torch's NumPy API)
            return type(a)(a.tensor[..., 0])
        return a[..., 0]
    return replace(t, value=sq(t.value), ref_err=sq(t.ref_err), det=sq(t.det),
                   prob=sq(t.prob), mag=sq(t.mag), lo=None if t.lo is None else sq(t.lo))


def store(t: Tracked, model: PrecisionModel, fmt: Format | None = None) -> Tracked:
    """Round to the output format (the storage format by default):
    adds ``u_out (|value| + radius) + 2^emin_out``; exact where the value is
    exact and representable; unbounded where the output may overflow."""
    xp = _xp(t.value)
    fmt = _store_format(model, fmt)
    if fmt is None:
        return t
    with np.errstate(invalid="ignore", over="ignore"):
        return _store(t, fmt, xp)


def _store_format(model: PrecisionModel, fmt: Format | None = None) -> Format | None:
    """The format :func:`store` rounds to (the storage format by default); None where
    it rounds nothing (float64 storage after float64 accumulation)."""
    fmt = fmt or model.storage
    return None if fmt.t >= 52 and model.accumulate.t >= 52 else fmt


def _store(t: Tracked, fmt: Format, xp: Any) -> Tracked:
    fast = store_rounding(t.value, t.ref_err, t.det, t.prob, fmt)  # one kernel on a device
    if fast is not None:
        return replace(t, det=fast[0], prob=fast[1])
    mag = xp.abs(t.value)
    mag += t.ref_err
    top = float(xp.max(mag)) + float(xp.max(t.det)) if mag.size else 0.0
    over = (mag + t.det) >= fmt.max if not top < fmt.max else None
    exact_here = None
    if not bool(xp.all(t.det)):  # some det == 0 (NaN counts as nonzero)
        exact_here = (t.det == 0) & (t.ref_err == 0)
        exact_here &= representable(t.value, fmt)
    det, prob = add_rounding(t.value, t.ref_err, t.det, t.prob, fmt.u, fmt.tiny, mag)
    del mag
    if exact_here is not None:
        fill_where(det, exact_here, 0.0)
        fill_where(prob, exact_here, 0.0)
    if over is not None:
        det, prob = _overflow_to_inf(over, det, prob)
    return replace(t, det=det, prob=prob)


# -- the exact context ---------------------------------------------------------

def _split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Veltkamp splitting: x = hi + lo with 26-bit halves (products exact)."""
    c = 134217729.0 * x  # 2^27 + 1
    hi = c - (c - x)
    return hi, x - hi


def _escalate(out: Tracked, av: Any, bv: Any, bias: Tracked | None,
              model: PrecisionModel, ref_prop: Any = 0.0) -> Tracked:
    """Recompute elements whose float64 error is not below ESCALATE_SHARE of the
    kernel's bound exactly: error-free slice GEMMs
    (:func:`~numoracle.oracle.exact_dot.exact_matmul`, on the operands' device),
    kept as a double-double ``value + lo`` with its proven error bound as
    ``ref_err``. ``ref_prop`` (the operands' own reference errors, propagated)
    stays in ``ref_err``."""
    xp = _xp(out.value)
    if xp is np and fused_cpu.elementwise(out.value) and not fused_cpu.any_imprecise(
            out.value, out.det, out.prob, out.ref_err, ESCALATE_SHARE):
        return out  # (the test below in one loop, where it finds nothing)
    kernel = xp.minimum(out.det, out.prob)
    need = (out.ref_err > ESCALATE_SHARE * kernel) & xp.isfinite(out.value)
    if not bool(xp.any(need)):
        return out
    hi, lo, err = exact_matmul(av, bv, None if bias is None else bias.value,
                               tol=ESCALATE_SHARE * kernel)
    if not isinstance(ref_prop, float) or ref_prop:
        err += ref_prop
    # where the exact sum is not finite (an overflowing slice product) keep float64
    need &= xp.isfinite(hi) & xp.isfinite(err)
    if not bool(need.all()):  # in place: no more output-sized arrays
        keep = ~need
        hi[keep] = xp.broadcast_to(out.value, hi.shape)[keep]
        lo[keep] = 0.0
        err[keep] = xp.broadcast_to(out.ref_err, err.shape)[keep]
    return replace(out, value=hi, lo=lo, ref_err=err, escalated=True)
