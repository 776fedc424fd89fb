"""Layer norm's whole-rule forms on CuPy: one kernel per stretch between its sums.

On CuPy each primitive of layer norm's rule (:mod:`~numoracle.oracle.traced.library.normalization`)
is several kernels and a host dispatch each. Here each stretch of the rule between two
sums is one kernel (:mod:`~numoracle.oracle._norm_cuda`, the loops of
:mod:`~numoracle.oracle._numba_norm` in C): before the statistics' sums each row's
largest ``|x| + det + ref_err`` (a block per row) and the two-pass variance's terms;
after them the normalised output with its weight and bias; backward, the products
before its sums and the input gradient after them. The sums stay CuPy's. Every result
stays on the device. The functions have the signatures of
:mod:`~numoracle.oracle.fused_cpu`'s layer norm functions, so that the rule's forms
(:mod:`~numoracle.oracle.traced.library._norm_rows`) call either; their row arrays are
views (an exact operand's broadcast zero radius stays unwritten: the kernels read it
through strides).

Where the kernels run is :func:`~numoracle.oracle.fused.whole_rules`' decision, the
softmax family's switch, and :data:`DEVICE_NORM_VARIABLE`'s: off unless it is ``1``
(they are not yet run on a GPU). The kernels are built by :func:`build` (CuPy's, compiled on
first use and cached by CuPy); the tests swap in the same sources compiled on the host.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ._norm_cuda import (
    DEVIATION_SQUARES,
    INPUT_GRAD,
    NORMALIZED,
    PREAMBLE,
    ROW_TOP,
    backward_products,
)
from ._rows_cuda import BLOCK, Elementwise, PerRow
from .fused_cuda import cupy_kernel
from .xp import array_module

__all__ = ["DEVICE_NORM_VARIABLE", "switched_on", "build", "dense_rows", "row_top",
           "deviation_squares", "normalized_rows",
           "norm_backward_products", "input_grad_rows"]

_BUILT: dict[str, Any] = {}

#: the environment variable that switches layer norm's kernels off (``0``: each
#: primitive's kernels; on otherwise, the default)
DEVICE_NORM_VARIABLE = "NUMORACLE_DEVICE_NORM"


def switched_on() -> bool:
    """Whether the kernels are on: unless :data:`DEVICE_NORM_VARIABLE` is ``0``."""
    return os.environ.get(DEVICE_NORM_VARIABLE, "1") != "0"


def _cupy_kernel(spec: Elementwise | PerRow) -> Any:
    """CuPy's kernel of ``spec`` after layer norm's preamble, without fused multiply-add."""
    return cupy_kernel(spec, PREAMBLE)


#: what makes a kernel of a spec (CuPy's; the tests' host compilation in its place)
build = _cupy_kernel


def _kernel(spec: Elementwise | PerRow) -> Any:
    key = f"{spec.name}:{id(build)}"
    if key not in _BUILT:
        _BUILT[key] = build(spec)
    return _BUILT[key]


def dense_rows(a: Any, shape: tuple[int, ...], n: int) -> Any:
    """``a`` (float64) broadcast to ``shape`` as rows of ``n``: a view where the layout
    allows (a broadcast radius stays unwritten; the kernels take any strides)."""
    xp = array_module(a)
    return xp.broadcast_to(xp.asarray(a, dtype=xp.float64), shape).reshape(-1, n)


def _strides(a: Any) -> tuple[np.int64, np.int64]:
    """The element strides of a 2-D float64 array (0 along a broadcast axis)."""
    return np.int64(a.strides[0] // 8), np.int64(a.strides[1] // 8)


def _flat(xp: Any, a: Any) -> Any:
    """A device array of per-row or per-column numbers as a flat contiguous one."""
    return xp.ascontiguousarray(a).reshape(-1)


def _scalars(params: tuple[float, ...], ints: tuple[int, int]) -> tuple[Any, ...]:
    """u, tiny, u64, the accumulation's largest number; t, emin: as the kernels take them."""
    return (*(np.float64(p) for p in params), np.int32(ints[0]), np.int32(ints[1]))


def row_top(x: Any, xd: Any, xr: Any) -> Any:
    """Per row of ``x`` (2-D, C-contiguous) with its radii (rows, any strides): the
    largest ``|x| + det + ref_err`` (NaN where one is NaN)."""
    xp = array_module(x)
    rows, cols = x.shape
    out = xp.empty(rows)
    if rows:
        _kernel(ROW_TOP)((rows,), (BLOCK,), (x, xd, *_strides(xd), xr, *_strides(xr),
                                              np.int64(cols), out))
    return out


def deviation_squares(x: tuple[Any, ...], mean: Any, test: bool, params: tuple[float, ...],
                      ints: tuple[int, int]) -> tuple[Any, ...]:
    """Layer norm's first kernel: ``(x - mean)^2``'s value, det, prob, ref_err
    (``fused_cpu.deviation_squares``)."""
    xp = array_module(x[0])
    shape = x[0].shape
    outs = tuple(xp.empty(shape) for _ in range(4))
    _kernel(DEVIATION_SQUARES)(*x, _flat(xp, mean), *_scalars(params, ints), np.bool_(test),
                               np.int64(shape[1]), *outs)
    return outs


def normalized_rows(x: tuple[Any, ...], mean: Any, rstd: Any, w: Any | None, b: Any | None,
                    test: bool, params: tuple[float, ...], ints: tuple[int, int]
                    ) -> tuple[Any, ...]:
    """Layer norm's kernel after its sums (``fused_cpu.normalized_rows``; ``w``, ``b``
    ``(4, n)`` arrays or None): value, det, prob, ref_err, magnitude."""
    xp = array_module(x[0])
    shape = x[0].shape
    outs = tuple(xp.empty(shape) for _ in range(5))
    none = xp.zeros(4)
    _kernel(NORMALIZED)(*x, _flat(xp, mean), _flat(xp, rstd),
                        none if w is None else _flat(xp, w), none if b is None else _flat(xp, b),
                        *_scalars(params, ints), np.bool_(w is not None), np.bool_(b is not None),
                        np.bool_(test), np.int64(shape[1]), *outs)
    return outs


def norm_backward_products(x: tuple[Any, ...], g: tuple[Any, ...], mean: Any, rstd: Any,
                           w: Any | None, want: tuple[bool, bool], tests: tuple[bool, bool],
                           params: tuple[float, ...], ints: tuple[int, int]
                           ) -> tuple[tuple[Any, ...] | None, ...]:
    """Layer norm backward's kernel before its sums (``fused_cpu.norm_backward_products``):
    ``g w`` (None without ``w``), and where ``want`` says so ``g w xhat`` and ``g xhat``
    (else None), each as value, det, prob, ref_err."""
    xp = array_module(x[0])
    shape = x[0].shape
    has_w = w is not None
    gx, gxh, gh = (tuple(xp.empty(shape) for _ in range(4)) if on else None
                   for on in (has_w, want[0], want[1]))
    outs = [o for o in (gx, gh, gxh) if o is not None]  # (the kernel's order)
    if outs:
        _kernel(backward_products(has_w, want[0], want[1]))(
            *x, *g, _flat(xp, mean), _flat(xp, rstd), _flat(xp, w) if has_w else xp.zeros(4),
            *_scalars(params, ints), np.bool_(tests[0]), np.bool_(tests[1]),
            np.int64(shape[1]), *(a for o in outs for a in o))
    return gx, gxh, gh


def input_grad_rows(x: tuple[Any, ...], g: tuple[Any, ...], mean: Any, rstd: Any, a: Any,
                    b: Any, test: bool, params: tuple[float, ...], ints: tuple[int, int]
                    ) -> tuple[Any, ...]:
    """Layer norm backward's kernel after its sums (``fused_cpu.input_grad_rows``):
    value, det, prob, ref_err, magnitude."""
    xp = array_module(x[0])
    shape = x[0].shape
    outs = tuple(xp.empty(shape) for _ in range(5))
    _kernel(INPUT_GRAD)(*x, *g, *(_flat(xp, t) for t in (mean, rstd, a, b)),
                        *_scalars(params, ints), np.bool_(test), np.int64(shape[1]), *outs)
    return outs
