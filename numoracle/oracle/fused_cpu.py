"""The one-pass forms of :mod:`~numoracle.oracle.fused` on the CPU, compiled by numba.

A contraction of exact operands on NumPy costs, beside its GEMMs, a dozen
separate passes over every output (the radii affine in ``S``, the rounding to
the output format) and one over every operand (magnitudes, the exact regime's
grid): the CPU's memory bandwidth, not its arithmetic, sets their pace. Where
numba is installed (``pip install 'numoracle[fast]'``) each group is one loop
(:mod:`~numoracle.oracle._numba_loops`), performing the same float64 operations
in the same order as the NumPy passes (numba, like NumPy, contracts no
``a*b+c`` into one fma): the same bits, tested against them. The loops run
on one core: after a GEMM the BLAS library's threads keep spinning on the
others for a while, so a loop cut in threads right after a GEMM competes with
them. Without numba, or with ``NUMORACLE_NUMBA=0`` in
the environment, the NumPy passes run. The loops compile on first use and are
cached on disk.
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

import numpy as np

# the operand flags and SINGLE_UP are defined with the formats, below both this module
# and its compiled loops (which import them from there, not from here)
from .formats import NOT_FINITE, OFF_SINGLE, SINGLE_UP, SUBNORMAL, UNREPRESENTABLE

__all__ = ["available", "warm_up", "operand_facts", "grid", "exact_radii", "store_round",
           "rounding_params", "contraction_radii", "propagated_radii", "larger_counts", "add_radii", "either_radii", "any_imprecise", "any_special",
           "mul_radii", "scalar_radii", "carry_binary", "elementary_radii", "elementwise", "LOOP_MIN",
           "single_magnitudes", "rows_available", "LONGEST_ROW", "as_rows", "dense_rows", "radius_rows", "read_only", "row_max", "shifted_exp_rows", "softmax_rows",
           "log_softmax_rows", "hot_rows", "softmax_grad_loops",
           "log_softmax_backward_rows", "norm_available",
           "row_top", "deviation_squares", "deviation_square_sums", "normalized_rows",
           "norm_backward_products", "norm_backward_sums", "norm_backward_merged",
           "input_grad_rows", "NOT_FINITE", "SUBNORMAL",
           "UNREPRESENTABLE", "OFF_SINGLE", "SINGLE_UP"]



@cache
def _loops() -> Any:
    """The compiled loops, or None where numba is missing or switched off."""
    if os.environ.get("NUMORACLE_NUMBA", "1") == "0":
        return None
    try:
        from . import _numba_loops  # noqa: PLC0415 - numba is optional
    except ImportError:
        return None
    return _numba_loops


def available() -> bool:
    """Whether the CPU's one-pass forms run here."""
    return _loops() is not None


@cache
def _row_loops() -> Any:
    """The whole-rule loops of the softmax family, or None where numba is missing or
    switched off. Their ``exp`` and ``expm1`` are their own
    (:mod:`~numoracle.oracle._numba_exp`, within its proven error of the functions: the
    reference's own error allows for it), not the C library's: values may differ from
    NumPy's in their last bits."""
    if _loops() is None:
        return None
    from . import _numba_rows  # noqa: PLC0415 - numba is optional

    return _numba_rows


def rows_available() -> bool:
    """Whether the whole-rule loops of the softmax family run here (:func:`_row_loops`)."""
    return _row_loops() is not None


@cache
def softmax_grad_loops() -> Any:
    """The whole-rule loops of the softmax family's backward ops
    (``_numba_softmax_grad``), or None where numba is missing or switched off."""
    if _loops() is None:
        return None
    from . import _numba_softmax_grad  # noqa: PLC0415 - numba is optional

    return _numba_softmax_grad


@cache
def _norm_loops() -> Any:
    """The whole-rule loops of layer norm, or None where numba is missing or switched
    off (they evaluate no function NumPy might evaluate otherwise: no probe)."""
    if _loops() is None:
        return None
    from . import _numba_norm  # noqa: PLC0415 - numba is optional

    return _numba_norm


def norm_available() -> bool:
    """Whether the whole-rule loops of layer norm run here (:func:`_norm_loops`)."""
    return _norm_loops() is not None


#: elements from which an elementwise rule runs as a loop: below, calling the compiled
#: loop (its arguments checked, its operands broadcast) costs more than NumPy's passes
LOOP_MIN = 1 << 14


def elementwise(*arrays: Any) -> bool:
    """Whether an elementwise rule over ``arrays`` (NumPy's) runs as a loop: numba
    there, and the largest of them at least :data:`LOOP_MIN` elements (the same bits
    either way)."""
    return available() and max(np.size(a) for a in arrays) >= LOOP_MIN


def warm_up() -> None:
    """Compile the loops now (or load them from numba's cache), where they run:
    their first use otherwise pays for it (about a second)."""
    if not available():
        return
    from .formats import FP32  # noqa: PLC0415 - a format for the warm-up's one element

    x = np.ones(1)
    prob, det = x.copy(), x.copy()
    operand_facts([x, x], [np.empty(1), np.empty(1, dtype=np.float32)], FP32, 1, True)
    for S in (x.copy(), np.ones(1, dtype=np.float32)):
        for fmt in (None, FP32):
            exact_radii(x.copy(), S, x, (1.0,) * 10, fmt)
            exact_radii(x.copy(), S, None, (1.0,) * 10, fmt)
    store_round(x, x, det, prob, FP32)


def _flat(a: np.ndarray) -> np.ndarray:
    """The elements of an array in memory order where it is Fortran-contiguous, else
    in C order (a view where the array is contiguous, a copy where it is not)."""
    fortran = a.flags.f_contiguous and not a.flags.c_contiguous
    return a.reshape(-1, order="F" if fortran else "C")


def operand_facts(arrays: list[np.ndarray], mags: list[np.ndarray], fmt: Any, none: int,
                  grid_too: bool) -> np.ndarray:
    """``|x|`` of each array into ``mags`` (laid out as it; rounded up where ``mags``
    is float32), and per array ``none`` minus its lowest set bit (0 without
    ``grid_too``) and its flags, as the rows of an int64 array
    (:func:`~numoracle.oracle.fused.operand_facts`)."""
    out = np.zeros((len(arrays), 2), dtype=np.int64)
    for i, (x, m) in enumerate(zip(arrays, mags, strict=True)):
        lowest, unrepresentable = grid(x, fmt, none) if grid_too else (none, 0)
        out[i] = none - lowest, unrepresentable | _magnitudes(x, m, fmt.tiny)
    return out


def single_magnitudes(x: np.ndarray) -> np.ndarray | None:
    """``|x|`` rounded up to float32 in one pass (the bits of
    :func:`~numoracle.oracle.fused.single_magnitude`); None where a nonzero magnitude lies outside float32's normal
    range (then the sum stays float64). Laid out as NumPy's passes lay out ``|x|``
    (``np.empty_like``'s order: a transposed view's as its own), the elements
    visited in that memory order (a permuted view's axes sorted by stride)."""
    mags = np.empty_like(x, dtype=np.float32)
    order = sorted(range(x.ndim), key=lambda k: -abs(mags.strides[k]))
    m_view = mags.transpose(order)
    if not m_view.flags.c_contiguous:  # (broadcast or empty axes: not expected)
        return None
    flags = _loops().magnitudes_single(_flat(x.transpose(order)), m_view.reshape(-1), 0.0)
    return None if flags & OFF_SINGLE else mags


def _magnitudes(x: np.ndarray, mags: np.ndarray, tiny: float) -> int:
    loops = _loops()
    fill = loops.magnitudes_single if mags.dtype == np.float32 else loops.magnitudes
    return int(fill(_flat(x), _flat(mags), tiny))


def grid(x: np.ndarray, fmt: Any, none: int) -> tuple[int, int]:
    """The exponent of the lowest set bit of the nonzero finite elements of ``x``
    (``none`` where there are none), and the flag UNREPRESENTABLE as to ``fmt``."""
    lowest, flags = _loops().grid(_flat(x), fmt.t, fmt.emin, fmt.max, none)
    return int(lowest), int(flags)


def exact_radii(value: np.ndarray, S: np.ndarray, bias: np.ndarray | None,
                scalars: tuple[float, ...],
                fmt: Any = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`~numoracle.oracle.fused.exact_contraction_radii` in one loop, with
    ``fmt`` the rounding to it too (:func:`store_round`) (``value`` and ``S``
    C-contiguous, ``S`` float64, in place, or float32; a bias along their last
    axis in a loop before, any other broadcast by NumPy: the same two additions)."""
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != value.shape[-1]):
        value += bias
        S = S.astype(np.float64)  # (a float32 S in float64 first, as NumPy's passes)
        S += np.abs(bias)
        bias = None
    grown = S if S.dtype == np.float64 else np.empty(S.shape)
    det, prob, ref = (np.empty(S.shape) for _ in range(3))
    loops, flat = _loops(), [a.reshape(-1) for a in (value, S, grown, det, prob, ref)]
    if bias is not None:  # then S is grown's
        b = np.ascontiguousarray(bias, dtype=np.float64)
        if grown is S:
            loops.add_bias_in_place(flat[0], flat[1], b)
        else:
            loops.add_bias(flat[0], flat[1], b, flat[2])
        flat[1] = flat[2]
    coefs = tuple(float(c) for c in scalars)
    if fmt is None and (grown is S or bias is not None):  # (the loop's S is grown: passed
        loops.exact_in_place(flat[2], *coefs, *flat[3:])  # once, the loop vectorises)
    elif fmt is None:
        loops.exact(*flat[1:2], *coefs, *flat[2:])
    else:
        loops.exact_stored(*flat[:2], *coefs, *flat[2:], *rounding_params(fmt))
    return grown, det, prob, ref


def contraction_radii(S: np.ndarray, coefs: tuple[float, ...]
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`~numoracle.oracle.fused.contraction_radii` in one loop (``S`` float64,
    C-contiguous, grown in place; ``coefs``: grow, tiny_mag, tiny_sum, det_coef,
    prob_coef, eta, g64): the same float64 operations as the NumPy passes."""
    det, prob, ref = (np.empty(S.shape) for _ in range(3))
    _loops().contraction(S.reshape(-1), *coefs, det.reshape(-1), prob.reshape(-1),
                         ref.reshape(-1))
    return det, prob, ref


_NO_REF = np.zeros(1)  # (a propagated reference radius the loop does not read)


def propagated_radii(S: np.ndarray, prop: np.ndarray, prop_p: np.ndarray,
                     ref_prop: np.ndarray | None, coefs: tuple[float, ...], acc_max: float
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool, bool]:
    """:func:`contraction_radii` of a contraction whose operands carry radii, in one
    loop: ``S`` (float64, C-contiguous, its own) becomes ``(S + prop)`` grown, in
    place; returns ``det`` (``prop``'s array, in place), ``prob`` (``prop_p``'s, or
    a fresh one where ``prop_p`` is ``prop``), ``ref`` (fresh, plus ``ref_prop`` where
    given: it stays as it is) and the loop's two flags (:func:`~numoracle.oracle.
    _numba_loops.propagated`): the same float64 operations as the NumPy passes
    (``S + prop``, :func:`contraction_radii`, ``det += prop``, ``prob += prop_p``,
    ``ref += ref_prop``)."""
    shared = prop_p is prop
    prob = np.empty(S.shape) if shared else prop_p
    ref = np.empty(S.shape)
    flat = [a.reshape(-1) for a in (S, prop, prob, ref)]
    not_finite, unknown = _loops().propagated(
        flat[0], *coefs, acc_max, flat[1], flat[2],
        _NO_REF if ref_prop is None else ref_prop.reshape(-1), shared, ref_prop is not None,
        flat[3])
    return prop, prob, ref, bool(not_finite), bool(unknown)


def store_round(value: np.ndarray, ref: np.ndarray, det: np.ndarray, prob: np.ndarray,
                fmt: Any) -> None:
    """:func:`~numoracle.oracle.fused.store_rounding` in one loop, ``det`` and
    ``prob`` in place (all four C-contiguous of one shape)."""
    _loops().store(*(a.reshape(-1) for a in (value, ref, det, prob)), *rounding_params(fmt))


def rounding_params(fmt: Any) -> tuple[float, float, float, float, np.int32, np.int32]:
    """The parameters of a rounding to ``fmt`` for the loops and the CuPy kernels:
    ``u``, ``1 + u``, its smallest normal and largest finite number, ``t``, ``emin``."""
    return fmt.u, 1.0 + fmt.u, fmt.tiny, fmt.max, np.int32(fmt.t), np.int32(fmt.emin)


def larger_counts(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per entry of each row of ``lo`` (2-D, no NaN): how many entries of the same row
    of ``hi`` exceed it (a tie does not), from NumPy's sorts of the two and one merge
    per row (:func:`~numoracle.oracle.fused.larger_counts`)."""
    hi_sorted = np.sort(hi, axis=-1)
    order = np.argsort(lo, axis=-1)
    out = np.empty(lo.shape, dtype=np.int64)
    _loops().larger_counts(hi_sorted, np.ascontiguousarray(lo), order, out)
    return out


def _rows(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``a`` (float64) broadcast to ``shape`` as rows of its last axis, a 2-D view
    where the layout allows (a broadcast radius stays unwritten), else a copy."""
    a = np.broadcast_to(np.asarray(a, dtype=np.float64), shape)
    return a.reshape(-1, shape[-1] if shape else 1)


def add_radii(av: Any, bv: Any, radii: tuple[Any, ...], fmt: Any, u: float, u64: float,
              test_exact: bool, sign: float = 1.0) -> tuple[np.ndarray, ...]:
    """:func:`~numoracle.oracle.tracked.add`'s arithmetic in one loop (of ``a`` and
    ``sign b``, ``sign`` 1 or -1): ``radii`` the operands' ``det``, ``prob`` and
    ``ref_err`` (a's, b's), ``fmt`` the accumulation format, ``u`` its unit; returns
    value, ref_err, det, prob and magnitude (fresh arrays of the broadcast shape)."""
    shape = np.broadcast_shapes(np.shape(av), np.shape(bv), *(np.shape(r) for r in radii))
    outs = tuple(np.empty(shape) for _ in range(5))
    rows = tuple(o.reshape(-1, shape[-1] if shape else 1) for o in outs)
    a, b = _rows(av, shape), _rows(bv, shape)
    ad, bd, ap, bp, ar, br = (_rows(r, shape) for r in radii)
    loops = _loops()
    loops.add_radii(a, b, ad, bd, ap, bp, ar, br, sign, u, fmt.tiny, u64, *rows)
    if test_exact:
        loops.add_exact(a, b, ad, bd, ar, br, sign, fmt.t, fmt.emin, fmt.max, *rows[:4])
    return outs


def _shape_of(*arrays: Any) -> tuple[int, ...]:
    return np.broadcast_shapes(*(np.shape(a) for a in arrays))


def _out_rows(shape: tuple[int, ...], count: int) -> tuple[tuple[np.ndarray, ...],
                                                          tuple[np.ndarray, ...]]:
    """``count`` fresh float64 arrays of ``shape``, and the same as rows."""
    outs = tuple(np.empty(shape) for _ in range(count))
    return outs, tuple(o.reshape(-1, shape[-1] if shape else 1) for o in outs)


def either_radii(v1: Any, v2: Any, d1: Any, d2: Any, p1: Any, p2: Any, r2: Any, m1: Any,
                 m2: Any, grow: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`~numoracle.oracle.tracked.either`'s arithmetic in one loop: the radii
    ``det``, ``prob`` and the magnitude (fresh arrays of the broadcast shape)."""
    ins = (v1, v2, d1, d2, p1, p2, r2, m1, m2)
    shape = _shape_of(*ins)
    outs, rows = _out_rows(shape, 3)
    _loops().either_radii(*(_rows(a, shape) for a in ins), grow, *rows)
    return outs[0], outs[1], outs[2]


def any_imprecise(value: Any, det: Any, prob: Any, ref: Any, share: float) -> bool:
    """Whether some finite element's reference radius exceeds ``share`` (positive) of
    its smaller kernel radius (one loop, no temporary array)."""
    shape = _shape_of(value, det, prob, ref)
    return bool(_loops().any_imprecise(*(_rows(a, shape) for a in (value, det, prob, ref)),
                                       float(share)))


def any_special(value: Any, det: Any, ref: Any) -> bool:
    """Whether some element is a special value known exactly (one loop, stopping at
    the first)."""
    shape = _shape_of(value, det, ref)
    return bool(_loops().any_special(*(_rows(a, shape) for a in (value, det, ref))))


def mul_radii(av: Any, bv: Any, radii: tuple[Any, ...], fmt: Any, u: float, u64: float,
              test_exact: bool) -> tuple[np.ndarray, ...]:
    """:func:`~numoracle.oracle.elementwise.mul`'s arithmetic in one loop (``radii``
    and the returns as :func:`add_radii`'s)."""
    shape = _shape_of(av, bv, *radii)
    outs, rows = _out_rows(shape, 5)
    a, b = _rows(av, shape), _rows(bv, shape)
    ad, bd, ap, bp, ar, br = (_rows(r, shape) for r in radii)
    loops = _loops()
    loops.mul_radii(a, b, ad, bd, ap, bp, ar, br, u, fmt.tiny, u64, fmt.max, *rows)
    if test_exact:
        loops.mul_exact(a, b, ad, bd, ar, br, fmt.t, fmt.emin, fmt.max, *rows[:4])
    return outs


def scalar_radii(t: Any, c: float, divide: bool, coefs: tuple[float, ...]
                 ) -> tuple[np.ndarray, ...]:
    """:func:`~numoracle.oracle.tracked.mul_scalar`'s arithmetic in one loop (``t`` a
    :class:`~numoracle.oracle.tracked.Tracked`; ``coefs``: ``k``, the reference
    radius's coefficient of ``|value|``, the rounding's of ``|t| + ref_err``, the
    radii's factor, ``1 + u`` and the accumulator's smallest normal): value, ref_err,
    det, prob and magnitude (fresh arrays of the broadcast shape)."""
    ins = (t.value, t.det, t.prob, t.ref_err)
    shape = _shape_of(*ins)
    outs, rows = _out_rows(shape, 5)
    _loops().scalar_radii(*(_rows(a, shape) for a in ins), c, divide, *coefs, *rows)
    return outs


def carry_binary(op: int, operands: tuple[Any, ...], out: tuple[Any, ...],
                 b_no_pole: bool) -> tuple[np.ndarray, ...] | None:
    """ieee's ``carry`` of a binary operation in numba's loops (``op`` 0 to 3: add,
    sub, mul, div): ``operands`` the values and reaches (a's, b's), ``out`` the
    result's value, det, prob, ref_err and magnitude; its arrays with the decided
    elements set (copies, of the result's shape), or None where no element is
    decided (then one pass over the operands, nothing written)."""
    shape = np.shape(out[0])
    ins = tuple(_rows(a, shape) for a in operands)
    loops = _loops()
    if not loops.carry_count(op, *ins, b_no_pole):
        return None
    outs = tuple(np.array(np.broadcast_to(a, shape), dtype=np.float64) for a in out)
    loops.carry_binary(op, *ins, b_no_pole, *(o.reshape(-1, shape[-1] if shape else 1)
                                              for o in outs))
    return outs


def elementary_radii(v: Any, value: Any, lip: Any, radii: tuple[Any, Any, Any], scale: Any,
                     zero: Any, spec: Any, u: float, tiny: float, ref_unit: float,
                     acc_max: float) -> tuple[np.ndarray, ...]:
    """:func:`~numoracle.oracle.elementwise.elementary`'s radii in one loop: ``radii``
    the argument's det, prob and ref_err (prob the same array as det where shared,
    ref_err None where 0 everywhere), ``scale`` None for ``|value|``, ``zero`` None or
    where the formula may return 0, ``spec`` the claimed :class:`Ulps`; returns det,
    prob, ref_err and ``|value|`` (fresh arrays of the value's shape)."""
    td, tp, tr = radii
    shape = np.shape(value)
    outs, rows = _out_rows(shape, 4)
    none = np.zeros((1, 1))
    _loops().elementary_radii(
        _rows(v, shape), _rows(value, shape), _rows(lip, shape), _rows(td, shape),
        _rows(tp, shape), none if tr is None else _rows(tr, shape),
        none if scale is None else _rows(scale, shape),
        np.zeros((1, 1), dtype=bool) if zero is None else np.broadcast_to(
            zero, shape).reshape(-1, shape[-1] if shape else 1),
        tp is td, tr is not None, scale is not None, zero is not None, float(spec.ulps),
        float(spec.per_x), float(spec.of_one), u, tiny, ref_unit, acc_max, *rows)
    return outs


def read_only(a: np.ndarray) -> np.ndarray:
    """``a`` as a read-only view (no copy). The whole-rule loops take every operand
    they read so: numba types a writable array and a read-only one (a broadcast, a
    view of one) apart and compiles a loop once for each mix of them in its
    operands, where one signature serves all."""
    view = a.view()
    view.flags.writeable = False
    return view


def as_rows(a: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``a`` (float64) broadcast to ``shape`` as C-contiguous rows of its last axis
    (:func:`dense_rows`: the whole-rule loops vectorise over them)."""
    return dense_rows(a, shape, shape[-1] if shape else 1)


def dense_rows(a: Any, shape: tuple[int, ...], n: int) -> np.ndarray:
    """``a`` (float64) broadcast to ``shape`` as C-contiguous rows of ``n`` (a loop over
    them vectorises, over a broadcast not), read-only (:func:`read_only`): a broadcast
    0 (an exact operand's radius) as fresh zeros, which the system maps without
    writing them."""
    a = np.asarray(a, dtype=np.float64)
    if a.size > 1 and not any(a.strides) and not a.flat[0]:
        return read_only(np.zeros((int(np.prod(shape)) // n, n)))
    return read_only(np.ascontiguousarray(np.broadcast_to(a, shape)).reshape(-1, n))


def radius_rows(a: Any, shape: tuple[int, ...], n: int) -> np.ndarray:
    """:func:`dense_rows` for the loops that read row ``min(i, rows - 1)`` of a radius
    (layer norm's, softmax's backward): a broadcast 0 (an exact operand's radius) as
    one row of zeros, read from cache (no array of the input's size, no pass over
    one)."""
    a = np.asarray(a, dtype=np.float64)
    if a.size > 1 and not any(a.strides) and not a.flat[0]:
        return read_only(np.zeros((1, n)))
    return dense_rows(a, shape, n)


def row_max(x: np.ndarray, xd: np.ndarray, xp_: np.ndarray, xr: np.ndarray
            ) -> np.ndarray | None:
    """Per row of ``x`` (2-D) with its radii: the largest value, det, prob, ref_err,
    ``x + det + ref_err`` and the count of masked entries (exact ``-inf``) (columns 0
    to 5); None where some other value or some radius is not finite."""
    out = np.empty((x.shape[0], 6))
    return out if _row_loops().row_max(x, xd, xp_, xr, out) else None


#: the longest row :func:`shifted_exp_rows` takes (its count of larger entries holds
#: offsets in int32)
LONGEST_ROW = 1 << 29


def shifted_exp_rows(x: np.ndarray, radii: tuple[np.ndarray, ...], mx: np.ndarray,
                     test_exact: bool, unshifted: bool, shared: bool, params: tuple[float, ...],
                     ints: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """The first whole-rule loop (``_numba_rows.shifted_exp_rows``): ``e``'s value,
    det, prob (det itself where ``shared``: the input's det and prob are one array),
    ref_err, per row the sum of the online bound's terms, with ``unshifted``
    ``exp(x)``'s four arrays (else empty), and the per-row flags."""
    shape = x.shape
    ev, ed, er = (np.empty(shape) for _ in range(3))
    ep = np.empty((1, 1) if shared else shape)
    xs = [np.empty(shape if unshifted else (1, 1)) for _ in range(4)]
    if shared and unshifted:
        xs[2] = np.empty((1, 1))
    extra = np.empty(shape[0])
    flags = np.zeros((shape[0], 7), dtype=np.bool_)
    _row_loops().shifted_exp_rows(x, *radii, mx, test_exact, unshifted, shared,
                                  np.asarray(params, dtype=np.float64),
                                  np.asarray(ints, dtype=np.int64), ev, ed, ep, er, extra, *xs,
                                  flags)
    if shared:
        ep = ed
        xs[2] = xs[1]
    return (ev, ed, ep, er, extra, *xs, flags)


def softmax_rows(e: tuple[np.ndarray, ...], tot: np.ndarray, rec: np.ndarray, carry: bool,
                 params: tuple[float, ...]) -> tuple[np.ndarray, ...]:
    """The second whole-rule loop of softmax (with ``carry`` the special values ieee
    decides): value, det, prob, ref_err, magnitude."""
    outs = tuple(np.empty(e[0].shape) for _ in range(5))
    _row_loops().softmax_rows(*e, tot, rec, carry, np.asarray(params, dtype=np.float64),
                              *outs)
    return outs


def log_softmax_rows(x: np.ndarray, radii: tuple[np.ndarray, ...], mx: np.ndarray,
                     per_row: tuple[np.ndarray, ...], ok: np.ndarray, exact: tuple[bool, ...],
                     params: tuple[float, ...], ints: tuple[int, int]
                     ) -> tuple[np.ndarray, ...]:
    """The second whole-rule loop of log-softmax: value, det, prob, ref_err, magnitude."""
    outs = tuple(np.empty(x.shape) for _ in range(5))
    _row_loops().log_softmax_rows(x, *radii, mx, *per_row, ok,
                                  np.asarray(exact, dtype=np.bool_),
                                  np.asarray(params, dtype=np.float64),
                                  np.asarray(ints, dtype=np.int64), *outs)
    return outs


def hot_rows(g: np.ndarray, gd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of a gradient: how many entries may be nonzero, and the first of them."""
    count, first = (np.empty(g.shape[0], dtype=np.int64) for _ in range(2))
    softmax_grad_loops().hot_rows(g, gd, count, first)
    return count, first


def log_softmax_backward_rows(y: tuple[np.ndarray, ...], g: tuple[np.ndarray, ...],
                              s: np.ndarray, c: np.ndarray, single: np.ndarray,
                              scalars: np.ndarray, params: tuple[float, ...]
                              ) -> tuple[np.ndarray, ...]:
    """The whole-rule loop of log-softmax's backward: value, det, prob, ref_err,
    magnitude."""
    outs = tuple(np.empty(y[0].shape) for _ in range(5))
    ones = bool(np.array_equal(scalars, [[1.0, 0.0, 0.0, 0.0]] * 2))  # (exact ones)
    softmax_grad_loops().log_softmax_backward_rows(*y, *g, s, c, single, scalars,
                                                   np.asarray(params, dtype=np.float64), ones,
                                                   *outs)
    return outs


def _floats(params: tuple[float, ...]) -> np.ndarray:
    return np.asarray(params, dtype=np.float64)


def row_top(x: np.ndarray, xd: np.ndarray, xr: np.ndarray) -> np.ndarray:
    """Per row of ``x`` (2-D) with its radii: the largest ``|x| + det + ref_err``."""
    out = np.empty(x.shape[0])
    _norm_loops().row_top(x, xd, xr, out)
    return out


def deviation_squares(x: tuple[np.ndarray, ...], mean: np.ndarray, test: bool,
                      params: tuple[float, ...], ints: tuple[int, int]
                      ) -> tuple[np.ndarray, ...]:
    """Layer norm's first loop (``_numba_norm.deviation_squares``; its arrays
    C-contiguous): ``(x - mean)^2``'s value, det, prob, ref_err."""
    outs = tuple(np.empty(x[0].shape) for _ in range(4))
    _norm_loops().deviation_squares(*x, mean, test, _floats(params),
                                    np.asarray(ints, dtype=np.int64), *outs)
    return outs


def deviation_square_sums(x: tuple[np.ndarray, ...], mean: np.ndarray, test: bool,
                          params: tuple[float, ...], ints: tuple[int, int]) -> np.ndarray:
    """Layer norm's first loop with its sum (``_numba_norm.deviation_square_sums``):
    per row the float64 sums of ``(x - mean)^2``'s value, magnitude, det, prob and
    ref_err (columns 0 to 4), its terms never an array of the input's size."""
    n = x[0].shape[1]
    row = tuple(np.empty((1, n)) for _ in range(4))
    sums = np.empty((x[0].shape[0], 5))
    _norm_loops().deviation_square_sums(*x, mean, test, _floats(params),
                                        np.asarray(ints, dtype=np.int64), *row, sums)
    return sums


def normalized_rows(x: tuple[np.ndarray, ...], mean: np.ndarray, rstd: np.ndarray,
                    w: np.ndarray | None, b: np.ndarray | None, test: bool,
                    params: tuple[float, ...], ints: tuple[int, int]
                    ) -> tuple[np.ndarray, ...]:
    """Layer norm's loop after its sums (``_numba_norm.normalized_rows``; ``w``, ``b``
    None where absent): value, det, prob, ref_err, magnitude."""
    outs = tuple(np.empty(x[0].shape) for _ in range(5))
    none = np.zeros((4, 1))
    _norm_loops().normalized_rows(*x, mean, rstd, none if w is None else w,
                                  none if b is None else b, w is not None, b is not None, test,
                                  _floats(params), np.asarray(ints, dtype=np.int64), *outs)
    return outs


def norm_backward_products(x: tuple[np.ndarray, ...], g: tuple[np.ndarray, ...],
                           mean: np.ndarray, rstd: np.ndarray, w: np.ndarray | None,
                           want: tuple[bool, bool], tests: tuple[bool, bool],
                           params: tuple[float, ...], ints: tuple[int, int]
                           ) -> tuple[tuple[np.ndarray, ...] | None, ...]:
    """Layer norm backward's loop before its sums (``_numba_norm.backward_products``;
    ``tests``: its ``test_gx`` and ``test``): ``g w`` (None without ``w``), and where
    ``want`` says so ``g w xhat`` and ``g xhat`` (else None), each as value, det,
    prob, ref_err."""
    shape = x[0].shape

    def outs(on: bool) -> tuple[np.ndarray, ...]:
        return tuple(np.empty(shape if on else (1, 1)) for _ in range(4))
    gx, gxh, gh = outs(w is not None), outs(want[0]), outs(want[1])
    _norm_loops().backward_products(*x, *g, mean, rstd, np.zeros((4, 1)) if w is None else w,
                                    w is not None, want[0], want[1], *tests, _floats(params),
                                    np.asarray(ints, dtype=np.int64), *gx, *gxh, *gh)
    return (gx if w is not None else None, gxh if want[0] else None,
            gh if want[1] else None)


def norm_backward_sums(x: tuple[np.ndarray, ...], g: tuple[np.ndarray, ...],
                       mean: np.ndarray, rstd: np.ndarray, w: np.ndarray | None,
                       want: tuple[bool, bool], tests: tuple[bool, bool],
                       params: tuple[float, ...], ints: tuple[int, int]
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Layer norm backward's loop before its sums, with its sums
    (``_numba_norm.backward_sums``): with ``want[0]`` the float64 sums of each row of
    ``g w`` (``g`` without ``w``) and of ``g w xhat`` (``(rows, 5)`` each: value,
    magnitude, det, prob, ref_err), with ``want[1]`` those of each column of ``g
    xhat`` (``(n, 5)``); arrays not wanted empty. No product is kept: ``g w`` is formed
    again where the input gradient needs it (:func:`input_grad_rows`)."""
    rows, n = x[0].shape
    scratch = tuple(np.empty((1, n) if on else (1, 1))
                    for on in (w is not None,) * 4 + (want[0],) * 4 + (want[1],) * 4)
    rows_a, rows_b = (np.empty((rows, 5) if want[0] else (0, 5)) for _ in range(2))
    cols = np.zeros((5, n) if want[1] else (5, 0))
    _norm_loops().backward_sums(*x, *g, mean, rstd, np.zeros((4, 1)) if w is None else w,
                                w is not None, want[0], want[1], *tests, _floats(params),
                                np.asarray(ints, dtype=np.int64), *scratch, rows_a, rows_b,
                                cols)
    return rows_a, rows_b, np.ascontiguousarray(cols.T)


def norm_backward_merged(x: tuple[np.ndarray, ...], g: tuple[np.ndarray, ...],
                         mean: np.ndarray, rstd: np.ndarray, w: np.ndarray | None,
                         want_gh: bool, tests: tuple[bool, bool], params: tuple[float, ...],
                         ints: tuple[int, int], fin: tuple[float, ...]
                         ) -> tuple[tuple[np.ndarray, ...], np.ndarray] | None:
    """Layer norm backward in one pass (``_numba_norm.backward_merged``: the sums
    and the input gradient, each row's means finished between them by ``fin``'s
    coefficients): the input gradient's value, det, prob, ref_err and magnitude,
    and with ``want_gh`` the column sums of ``g xhat`` (``(n, 5)``; else empty);
    None where a row's mean is decided otherwise (see the loop)."""
    rows, n = x[0].shape
    scratch = tuple(np.empty((1, n) if on else (1, 1))
                    for on in (w is not None,) * 4 + (True,) * 4 + (want_gh,) * 4)
    rows_a, rows_b = np.empty((rows, 5)), np.empty((rows, 5))
    cols = np.zeros((5, n) if want_gh else (5, 0))
    means = np.empty((2, rows, 4))
    outs = tuple(np.empty((rows, n)) for _ in range(5))
    flags = np.zeros(3, dtype=np.int64)
    _norm_loops().backward_merged(*x, *g, mean, rstd, np.zeros((4, 1)) if w is None else w,
                                  w is not None, want_gh, *tests, _floats(params),
                                  np.asarray(ints, dtype=np.int64), _floats(fin), *scratch,
                                  rows_a, rows_b, cols, means, *outs, flags)
    if flags[0] or not flags[1] or not flags[2]:
        return None
    return outs, np.ascontiguousarray(cols.T)


def input_grad_rows(x: tuple[np.ndarray, ...], g: tuple[np.ndarray, ...], mean: np.ndarray,
                    rstd: np.ndarray, a: np.ndarray, b: np.ndarray, test: bool,
                    params: tuple[float, ...], ints: tuple[int, int],
                    w: np.ndarray | None = None, test_gx: bool = False
                    ) -> tuple[np.ndarray, ...]:
    """Layer norm backward's loop after its sums (``_numba_norm.input_grad_rows``):
    value, det, prob, ref_err, magnitude; with ``w`` (``(4, n)``) ``g`` is the
    gradient, the weighted one formed per row in the loop (with its exact test where
    ``test_gx``)."""
    n = x[0].shape[1]
    outs = tuple(np.empty(x[0].shape) for _ in range(5))
    row = tuple(np.empty((1, n) if w is not None else (1, 1)) for _ in range(4))
    _norm_loops().input_grad_rows(*x, *g, mean, rstd, a, b, test, _floats(params),
                                  np.asarray(ints, dtype=np.int64), *outs,
                                  np.zeros((4, 1)) if w is None else w, w is not None,
                                  test_gx, *row)
    return outs
