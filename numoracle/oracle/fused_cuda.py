"""The whole-rule forms of the softmax family on CuPy: a few kernels per rule.

On CuPy each primitive of a softmax or log-softmax rule is several kernels and a
host dispatch each (hundreds per rule). Here the rule's elementwise part is one
``ElementwiseKernel`` before its sums and one after (:mod:`~numoracle.oracle._rows_cuda`,
the operations of :mod:`~numoracle.oracle._numba_rows` in their order), the rows'
maxima one kernel of a block per row, the online bound's counts one sort per row
(of order-preserving integer keys: a radix sort) and a binary search in the
first kernel; the sums are ``tracked.sum_``'s (on CuPy the row sum's two kernels,
:func:`row_sums`). The functions have
the signatures of :mod:`~numoracle.oracle.fused_cpu`'s row functions, so that the
rules (:mod:`~numoracle.oracle.traced.library._softmax_rows`) call either; the
rows' maxima come back to the host (a few numbers a row: the rules decide on them
there) and every other result stays on the device.

Where the kernels run is :func:`~numoracle.oracle.fused.whole_rules`' decision (on
CuPy, unless ``NUMORACLE_DEVICE_ROWS=0`` in the environment). The kernels are built
by :func:`build` (CuPy's, compiled on first use and cached by CuPy); the tests
swap in the same sources compiled on the host.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._rows_cuda import (
    BLOCK,
    FLAG_BITS,
    HOT_ROWS,
    LOG_SOFTMAX,
    LOG_SOFTMAX_BACKWARD,
    PREAMBLE,
    ROW_HI,
    ROW_MAX,
    ROW_MAX_COLUMNS,
    ROW_SUM,
    ROW_SUM_RADII,
    SHIFTED_EXP,
    SHIFTED_EXP_BOTH,
    SOFTMAX,
    SUM_COLUMNS,
    Elementwise,
    PerRow,
)
from .fused import _NO_FMA
from .xp import array_module

__all__ = ["build", "cupy_kernel", "as_rows", "row_max", "shifted_exp_rows", "softmax_rows",
           "log_softmax_rows", "hot_rows", "log_softmax_backward_rows", "row_sums",
           "row_sums_fit"]

_BUILT: dict[str, Any] = {}


def cupy_kernel(spec: Elementwise | PerRow, preamble: str = PREAMBLE) -> Any:
    """CuPy's kernel of ``spec`` after the C text ``preamble`` (the softmax family's by
    default), compiled without fused multiply-add."""
    import cupy  # noqa: PLC0415 - only for device arrays

    if isinstance(spec, Elementwise):
        return cupy.ElementwiseKernel(spec.in_params(), spec.out_params(), spec.body,
                                      spec.name, preamble=preamble, options=_NO_FMA)
    return cupy.RawKernel(preamble + spec.source(), spec.name, options=_NO_FMA)


#: what makes a kernel of a spec (CuPy's; the tests' host compilation in its place)
build = cupy_kernel


def _kernel(spec: Elementwise | PerRow) -> Any:
    key = f"{spec.name}:{id(build)}"
    if key not in _BUILT:
        _BUILT[key] = build(spec)
    return _BUILT[key]


def as_rows(a: Any, shape: tuple[int, ...]) -> Any:
    """``a`` (float64) broadcast to ``shape`` as rows of its last axis (a view where
    the layout allows: a broadcast radius stays unwritten)."""
    xp = array_module(a)
    a = xp.broadcast_to(xp.asarray(a, dtype=xp.float64), shape)
    return a.reshape(-1, shape[-1] if shape else 1)


def _strides(a: Any) -> tuple[np.int64, np.int64]:
    """The element strides of a 2-D float64 array (0 along a broadcast axis)."""
    return np.int64(a.strides[0] // 8), np.int64(a.strides[1] // 8)


def _device(xp: Any, a: Any, dtype: Any = np.float64) -> Any:
    """A host array (or a device one) as a flat contiguous device array."""
    return xp.ascontiguousarray(xp.asarray(a, dtype=dtype)).reshape(-1)


def row_max(x: Any, xd: Any, xp_: Any, xr: Any) -> np.ndarray | None:
    """Per row of ``x`` (2-D, C-contiguous) with its radii: the largest value, det,
    prob, ref_err, ``x + det + ref_err`` and the count of masked entries (exact
    ``-inf``) (columns 0 to 5), brought to the host; None where some other value or
    some radius is not finite (column 6 counts them)."""
    xp = array_module(x)
    rows, cols = x.shape
    out = xp.empty((rows, ROW_MAX_COLUMNS))
    args = [x]
    for r in (xd, xp_, xr):
        args += [r, *_strides(r)]
    _kernel(ROW_MAX)((rows,), (BLOCK,), (*args, np.int64(cols), out))
    host = out.get() if hasattr(out, "get") else out
    return None if bool(host[:, 6].any()) else host


def shifted_exp_rows(x: Any, radii: tuple[Any, ...], mx: np.ndarray, test_exact: bool,
                     unshifted: bool, shared: bool, params: tuple[float, ...],
                     ints: tuple[int, int]) -> tuple[Any, ...]:
    """The first whole-rule kernel: ``e``'s value, det, prob, ref_err, per row the sum
    of the online bound's terms (``shared``, whether the input's det and prob are one
    array, changes nothing here), with ``unshifted`` ``exp(x)``'s four arrays (else None), and the
    flags (``fused_cpu.shifted_exp_rows``'s columns, or'ed over the rows: one row, on
    the host)."""
    xp = array_module(x)
    xd, xp_, xr = radii
    shape = x.shape
    hs = xp.sort(_kernel(ROW_HI)(x, xd, xr, xp.empty(shape, dtype=xp.uint64)), axis=-1)
    outs = [xp.empty(shape) for _ in range(9 if unshifted else 5)]
    flags = xp.zeros(1, dtype=xp.int32)
    scalars = (*(np.float64(p) for p in params), np.int32(ints[0]), np.int32(ints[1]),
               np.bool_(test_exact), np.int64(shape[1]))
    _kernel(SHIFTED_EXP_BOTH if unshifted else SHIFTED_EXP)(
        x, xd, xp_, xr, _device(xp, mx), hs.reshape(-1), *scalars, *outs, flags)
    bits = int(flags.get()[0] if hasattr(flags, "get") else flags[0])
    host = np.array([[bool(bits >> k & 1) for k in range(FLAG_BITS)]])
    rest = outs[5:] if unshifted else [None] * 4
    return (*outs[:4], outs[4].sum(-1), *rest, host)


def softmax_rows(e: tuple[Any, ...], tot: Any, rec: Any, carry: bool,
                 params: tuple[float, ...]) -> tuple[Any, ...]:
    """The second whole-rule kernel of softmax (with ``carry`` the special values ieee
    decides): value, det, prob, ref_err, magnitude."""
    xp = array_module(e[0])
    shape = e[0].shape
    outs = tuple(xp.empty(shape) for _ in range(5))
    _kernel(SOFTMAX)(*e, _device(xp, tot), _device(xp, rec), *(np.float64(p) for p in params),
                     np.bool_(carry), np.int64(shape[1]), *outs)
    return outs


def log_softmax_rows(x: Any, radii: tuple[Any, ...], mx: np.ndarray,
                     per_row: tuple[Any, ...], ok: Any, exact: tuple[bool, ...],
                     params: tuple[float, ...], ints: tuple[int, int]) -> tuple[Any, ...]:
    """The second whole-rule kernel of log-softmax: value, det, prob, ref_err,
    magnitude."""
    xp = array_module(x)
    outs = tuple(xp.empty(x.shape) for _ in range(5))
    _kernel(LOG_SOFTMAX)(x, *radii, _device(xp, mx), *(_device(xp, t) for t in per_row),
                         _device(xp, ok, np.bool_), *(np.float64(p) for p in params),
                         np.int32(ints[0]), np.int32(ints[1]), *(np.bool_(f) for f in exact),
                         np.int64(x.shape[1]), *outs)
    return outs


def hot_rows(g: Any, gd: Any) -> tuple[Any, Any]:
    """Per row of a gradient: how many entries may be nonzero, and the first of them
    (device arrays)."""
    xp = array_module(g)
    rows, cols = g.shape
    count, first = (xp.empty(rows, dtype=xp.int64) for _ in range(2))
    _kernel(HOT_ROWS)((rows,), (BLOCK,), (g, gd, *_strides(gd), np.int64(cols), count, first))
    return count, first


def log_softmax_backward_rows(y: tuple[Any, ...], g: tuple[Any, ...], s: Any, c: Any,
                              single: Any, scalars: np.ndarray, params: tuple[float, ...]
                              ) -> tuple[Any, ...]:
    """The whole-rule kernel of log-softmax's backward: value, det, prob, ref_err,
    magnitude."""
    xp = array_module(y[0])
    shape = y[0].shape
    outs = tuple(xp.empty(shape) for _ in range(5))
    _kernel(LOG_SOFTMAX_BACKWARD)(*y, *g, _device(xp, s), _device(xp, c),
                                  _device(xp, single, np.bool_), _device(xp, scalars),
                                  *(np.float64(p) for p in params), np.int64(shape[1]), *outs)
    return outs


#: rows longer than this, fewer than :data:`ROW_SUM_FEW` of them, take the contraction: a
#: block per row would leave most of the device idle (a whole tensor's sum is one row)
ROW_SUM_LONGEST = 1 << 16
ROW_SUM_FEW = 128


def row_sums_fit(rows: int, cols: int) -> bool:
    """Whether :func:`row_sums` suits ``rows`` rows of ``cols`` entries: short rows, or
    enough of them to fill the device with blocks."""
    return rows > 0 and 0 < cols and (cols <= ROW_SUM_LONGEST or rows >= ROW_SUM_FEW)


def row_sums(x: Any, radii: tuple[Any, Any, Any], flush: float, none: int,
             params: tuple[float, ...], ints: tuple[int, ...]) -> tuple[Any, ...] | None:
    """The tracked sums of the rows of ``x`` (2-D, C-contiguous or a view of rows) and
    its radii (det, prob, ref_err: rows as :func:`as_rows` makes them), two kernels and
    one read of three flags: value, det, prob, ref_err and magnitude per row (device
    arrays). ``params`` and ``ints`` are :data:`ROW_SUM_RADII`'s scalars (the
    contraction's coefficients). None where a value or radius is not finite, or where
    the float64 reference is not precise enough somewhere (the contraction's general
    path then decides)."""
    xp = array_module(x)
    rows, cols = x.shape
    sums = xp.empty((rows, SUM_COLUMNS))
    flags = xp.asarray(np.array([0, none, 0], dtype=np.int32))
    args = []
    for a in (x, *radii):
        args += [a, *_strides(a)]
    _kernel(ROW_SUM)((rows,), (BLOCK,), (*args, np.int64(cols), np.float64(flush),
                                         np.int32(none), sums, flags))
    outs = tuple(xp.empty(rows) for _ in range(5))
    _kernel(ROW_SUM_RADII)(sums.reshape(-1), *(np.float64(p) for p in params),
                           *(np.int32(k) for k in ints), *outs, flags)
    bits = flags.get() if hasattr(flags, "get") else flags
    return None if bits[0] & 1 or bits[2] else outs
