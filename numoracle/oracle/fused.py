"""The bound arithmetic after a contraction's GEMMs, one pass where the device allows.

A contraction's radii are affine in its magnitude sum ``S`` and its rounding to
the output format is affine in ``|value|``: each is a handful of elementwise
steps over output-sized arrays. On NumPy they stay separate in-place passes;
on CuPy each group is one kernel (memory traffic, not arithmetic, sets the pace
there). The kernels perform the same float64 operations in the same order as
the NumPy passes, compiled without fused multiply-add contraction, so both
give the same bits. The exact regime's grid (the lowest set bit of an array) is
one kernel on CuPy too, and several device scalars come to the host in one
transfer.

A contraction of exact operands is one pass over each operand, which writes its
magnitude and reduces what the host must decide on (:func:`operand_facts`), the
GEMMs (:func:`exact_products`), and one pass after them
(:func:`exact_contraction_radii`); the rounding to an output format is one pass
too (:func:`store_rounding`). On CuPy these are kernels and the contraction's
one synchronisation waits for no GEMM (the facts are copied to the host while
the GEMMs are queued behind them), so the device is not left waiting for the
host; on NumPy they are the loops of :mod:`~numoracle.oracle.fused_cpu` where
numba is installed (:func:`fused_exact`), else the general NumPy passes.
"""

from __future__ import annotations

import operator
import os
import threading
import warnings
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np

from . import fused_cpu, fused_torch
from .formats import BF16, FP32, FP64, TF32
from .fused_cpu import (
    NOT_FINITE,
    OFF_SINGLE,
    SINGLE_UP,
    SUBNORMAL,
    UNREPRESENTABLE,
    rounding_params,
)
from .precision import gamma
from .tensor_sums import in_tf32_range, tensor_sum, tf32_growth, tf32_up, value_product
from .xp import array_module, is_torch

__all__ = ["fused", "fused_exact", "whole_rules", "device_rows", "device_row_sums", "DEVICE_ROWS_VARIABLE",
           "ROW_SUMS_VARIABLE", "contraction_radii", "add_rounding", "lowest_set_bit",
           "device_scalars", "own_array", "rounded", "operand_facts", "OperandFacts",
           "PendingFacts", "exact_products", "exact_contraction_radii", "store_rounding",
           "magnitude_sum", "fused_single_sum", "fused_single_parts", "scratch", "single_sum", "single_growth", "SINGLE_CHUNK", "NOT_FINITE",
           "SUBNORMAL", "UNREPRESENTABLE", "OFF_SINGLE", "larger_counts", "any_special", "carried",
           "radius_product", "special_mask"]

#: separate roundings, as NumPy's passes (no a*b+c contracted into one fma)
_NO_FMA = ("--fmad=false",)
_KERNELS: dict[str, Any] = {}
_INF = "__longlong_as_double(0x7ff0000000000000LL)"
#: the lowest set bit's exponent of a nonzero finite float64 ``b`` (its bits), exponent field E
_LSB = ("(E == 0 ? -1075 + __ffsll(b & 0xfffffffffffffLL)"
        " : E - 1076 + __ffsll((b & 0xfffffffffffffLL) | 0x10000000000000LL))")
#: formats.representable for one float64: a multiple of its quantum, within range
_REPRESENTABLE = """
__device__ bool numoracle_representable(double x, int t, int emin, double fmax) {
  long long b = __double_as_longlong(x);
  int E = (int)((b >> 52) & 0x7ff);
  if (E == 0x7ff || x == 0.0) return true;  /* NaN, an infinity, a zero */
  if (!(fabs(x) <= fmax)) return false;
  int ex = E == 0 ? -1075 : E - 1023;  /* floor(log2|x|), below -1022 when subnormal */
  return LSB >= max(ex, emin) - t;
}
""".replace("LSB", _LSB)
#: one pass over an operand: its magnitude, and (reduced over the grid by atomics)
#: ``none`` minus the lowest set bit of its nonzero finite elements (0 where there are
#: none) and the flags of :data:`NOT_FINITE`, :data:`SUBNORMAL`, :data:`UNREPRESENTABLE`
_FACTS = """
extern "C" __global__ void NAME(
    const double* x, MAG* ax, long long n, int t, int emin, double fmax, double tiny,
    int none, int* out) {
  int far = 0, flags = 0;
  long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    double v = x[i];
    ax[i] = MAGNITUDE;
    long long b = __double_as_longlong(v);
    int E = (int)((b >> 52) & 0x7ff);
    if (E == 0x7ff) { flags |= NOT_FINITE; continue; }
    if (v == 0.0) continue;
    RANGE
    far = max(far, none - LSB);
    if (fabs(v) < tiny) flags |= SUBNORMAL;
    if (!numoracle_representable(v, t, emin, fmax)) flags |= UNREPRESENTABLE;
  }
  /* the block's warps, then the block's one atomic per value (atomics of every warp
     to one address serialise, and would cost more than the pass itself) */
  __shared__ int warp_far[32], warp_flags[32];
  for (int off = 16; off > 0; off >>= 1) {
    far = max(far, __shfl_down_sync(0xffffffffu, far, off));
    flags |= __shfl_down_sync(0xffffffffu, flags, off);
  }
  if ((threadIdx.x & 31) == 0) {
    warp_far[threadIdx.x >> 5] = far;
    warp_flags[threadIdx.x >> 5] = flags;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < (blockDim.x >> 5); ++w) {
      far = max(far, warp_far[w]);
      flags |= warp_flags[w];
    }
    atomicMax(out, far);
    atomicOr(out + 1, flags);
  }
}
""".replace("LSB", _LSB).replace("NOT_FINITE", str(NOT_FINITE)).replace(
    "SUBNORMAL", str(SUBNORMAL)).replace("UNREPRESENTABLE", str(UNREPRESENTABLE))
#: the same pass over up to four operands in one launch: the grid's second axis picks the
#: operand (its values, magnitudes, length and row of ``found``)
_FACTS_MANY = """
extern "C" __global__ void NAME_many(
    const double* x0, const double* x1, const double* x2, const double* x3,
    MAG* ax0, MAG* ax1, MAG* ax2, MAG* ax3, long long n0, long long n1, long long n2,
    long long n3, int t, int emin, double fmax, double tiny, int none, int* found) {
  unsigned int k = blockIdx.y;
  const double* x = k == 0 ? x0 : k == 1 ? x1 : k == 2 ? x2 : x3;
  MAG* ax = k == 0 ? ax0 : k == 1 ? ax1 : k == 2 ? ax2 : ax3;
  long long n = k == 0 ? n0 : k == 1 ? n1 : k == 2 ? n2 : n3;
  int* out = found + 2 * k;
""" + _FACTS[_FACTS.index("  int far = 0, flags = 0;"):]


def _facts_source(template: str, tf32: bool) -> str:
    """The pass of ``template`` writing float64 magnitudes, or with ``tf32`` magnitudes
    rounded up to TF32 (as float32, tensor_sums.tf32_up: the float64's low 42 bits
    cleared, rounding up) and OFF_SINGLE where a nonzero one lies outside float32's
    normal range or above TF32's largest."""
    if not tf32:
        return template.replace("NAME", "numoracle_operand_facts").replace(
            "MAGNITUDE", "fabs(v)").replace("MAG", "double").replace("RANGE", "")
    return template.replace("NAME", "numoracle_operand_facts_tf32").replace(
        "MAGNITUDE", "(float)__longlong_as_double((long long)(((unsigned long long)"
                     "__double_as_longlong(fabs(v)) + LOW) & ~LOW))").replace(
        "MAG", "float").replace(
        "LOW", f"{(1 << 42) - 1}ULL").replace(
        "RANGE", f"if (!(fabs(v) >= {FP32.tiny!r} && fabs(v) <= {TF32.max!r})) "
                 f"flags |= {OFF_SINGLE};")


_FACTS_64, _FACTS_TF32 = _facts_source(_FACTS, False), _facts_source(_FACTS, True)
_FACTS_64_MANY, _FACTS_TF32_MANY = (_facts_source(_FACTS_MANY, tf32) for tf32 in (False, True))
_RADII_PARAMS = ("float64 grow, float64 tiny_mag, float64 tiny_sum, float64 det_coef, "
                 "float64 prob_coef, float64 eta, float64 g64")
#: contraction_radii's arithmetic: S made an upper bound, the radii d, p, r affine in it
_RADII = ("double s = S * grow; s = s + tiny_mag; S = s;"
          "double d = s * det_coef + eta; double p = s * prob_coef + eta;"
          "double r = s * g64 + tiny_sum;")
_EXACT_PARAMS = _RADII_PARAMS + ", float64 fits_acc, float64 fits_64, float64 acc_max"
#: then the exact regime's zeros and the overflow's infinities
_EXACT_BODY = (_RADII + "if (s <= fits_acc) { d = 0.0; p = 0.0; }"
               "if (s > acc_max) { d = " + _INF + "; p = " + _INF + "; }"
               "det = d; prob = p; ref = s <= fits_64 ? 0.0 : r;")
#: store_rounding's arithmetic for one element: add_rounding's (the radii after one more
#: rounding), 0 where the value is exact and the format holds it, infinite where the
#: output may overflow
_STORE = _REPRESENTABLE + """
__device__ void numoracle_store(double v, double ref, double *det, double *prob, double u,
                                double grow, double tiny, double fmax, int t, int emin) {
  double m = fabs(v) + ref; double mu = m * u; mu = mu + tiny;
  double d = *det * grow + mu; double p = *prob * grow + mu;
  bool over = m + *det >= fmax;
  bool exact = *det == 0.0 && ref == 0.0 && numoracle_representable(v, t, emin, fmax);
  if (exact) { d = 0.0; p = 0.0; }
  if (over) { d = INF; p = INF; }
  *det = d; *prob = p;
}
""".replace("INF", _INF)
_STORE_PARAMS = "float64 u, float64 grow_u, float64 tiny, float64 fmax, int32 t, int32 emin"
_STORE_CALL = ("double dd = det, pp = prob;"
               "numoracle_store(value, ref, &dd, &pp, u, grow_u, tiny, fmax, t, emin);"
               "det = dd; prob = pp;")
_RADII_OUT = "float64 S, float64 det, float64 prob, float64 ref"
#: the exact contraction's pass as a raw kernel over C-ordered arrays of one shape (a bias
#: along their last axis): the arithmetic of the elementwise kernels above in their order,
#: its launch passing the arguments as they are (an elementwise kernel resolves their
#: types and shapes on the host at every call). NAME, SIN (S's type), BIAS and STORE are
#: filled in per variant
_EXACT_RAW = """
extern "C" __global__ void NAME(
    const SIN* S_in, double* value_p, const double* bias_p, long long cols, long long n,
    double* S_out, double* det_out, double* prob_out, double* ref_out,
    double grow, double tiny_mag, double tiny_sum, double det_coef, double prob_coef,
    double eta, double g64, double fits_acc, double fits_64, double acc_max,
    double u, double grow_u, double tiny, double fmax, int t, int emin) {
  long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    double S = S_in[i];
    double value = value_p[i];
    double det, prob, ref;
    BIAS
    BODY
    STORE
    S_out[i] = S; det_out[i] = det; prob_out[i] = prob; ref_out[i] = ref;
  }
}
""".replace("BODY", _EXACT_BODY)
#: threads a block of the raw kernels; their blocks (a grid-stride loop) at most
_RAW_BLOCK, _RAW_GRID = 256, 1 << 20


def exact_raw_source(name: str) -> str:
    """The C text of the raw exact-contraction kernel ``name`` (``exact_raw`` with
    ``_bias``, ``_stored``, ``_single`` in that order where they hold), with its
    preamble: the kernel the tests compile on the host."""
    return _STORE + _EXACT_RAW.replace("NAME", f"numoracle_{name}").replace(
        "SIN", "float" if name.endswith("_single") else "double").replace(
        "BIAS", "double bias = bias_p[i % cols]; value = value + bias; value_p[i] = value;"
                "S = S + fabs(bias);" if "_bias" in name else "").replace(
        "STORE", _STORE_CALL if "_stored" in name else "")


def _kernel(name: str) -> Any:
    """The CuPy kernel ``name`` (built on first use; CuPy caches its compilation)."""
    if name not in _KERNELS:
        import cupy  # noqa: PLC0415 - only for device arrays

        if name == "contraction":
            _KERNELS[name] = cupy.ElementwiseKernel(
                _RADII_PARAMS, _RADII_OUT, _RADII + "det = d; prob = p; ref = r;",
                "numoracle_contraction_radii", options=_NO_FMA)
        elif name.startswith("exact_raw"):
            _KERNELS[name] = cupy.RawKernel(exact_raw_source(name), f"numoracle_{name}",
                                            options=_NO_FMA)
        elif name.startswith("exact"):  # (stored: then rounded to a format; single: S
            stored = "stored" in name      # comes in float32, and goes out grown in float64)
            single = ("float32 S32, ", "S = S32;") if name.endswith("single") else ("", "")
            if "bias" in name:
                _KERNELS[name] = cupy.ElementwiseKernel(
                    single[0] + "float64 bias, " + _EXACT_PARAMS
                    + (", " + _STORE_PARAMS if stored else ""), "float64 value, " + _RADII_OUT,
                    single[1] + "value = value + bias; S = S + fabs(bias);" + _EXACT_BODY
                    + (_STORE_CALL if stored else ""),
                    f"numoracle_{name}_contraction", preamble=_STORE, options=_NO_FMA)
            else:
                _KERNELS[name] = cupy.ElementwiseKernel(
                    single[0] + ("float64 value, " + _EXACT_PARAMS + ", " + _STORE_PARAMS
                                 if stored else _EXACT_PARAMS), _RADII_OUT,
                    single[1] + _EXACT_BODY + (_STORE_CALL if stored else ""),
                    f"numoracle_{name}_contraction", preamble=_STORE, options=_NO_FMA)
        elif name == "store":
            _KERNELS[name] = cupy.ElementwiseKernel(
                "float64 value, float64 ref, " + _STORE_PARAMS, "float64 det, float64 prob",
                _STORE_CALL, "numoracle_store_rounding", preamble=_STORE, options=_NO_FMA)
        elif name == "radius_product":
            _KERNELS[name] = cupy.ElementwiseKernel(
                "float64 x, float64 y", "float64 p", "p = (x == 0.0 || y == 0.0) ? 0.0 : x * y;",
                "numoracle_radius_product", options=_NO_FMA)
        elif name == "special_points":
            _KERNELS[name] = cupy.ElementwiseKernel(
                "float64 v, float64 det, float64 ref", "bool s",
                "double r = det + ref;"
                "s = (r == 0.0 && (v == 0.0 || isinf(v))) || (isnan(v) && isfinite(r));",
                "numoracle_special_points", options=_NO_FMA)
        elif name == "facts":
            _KERNELS[name] = cupy.RawKernel(_REPRESENTABLE + _FACTS_64,
                                            "numoracle_operand_facts", options=_NO_FMA)
        elif name == "facts_tf32":
            _KERNELS[name] = cupy.RawKernel(_REPRESENTABLE + _FACTS_TF32,
                                            "numoracle_operand_facts_tf32", options=_NO_FMA)
        elif name in ("facts_many", "facts_tf32_many"):
            _KERNELS[name] = cupy.RawKernel(
                _REPRESENTABLE + (_FACTS_TF32_MANY if "tf32" in name else _FACTS_64_MANY),
                f"numoracle_operand_{name}", options=_NO_FMA)
        else:  # "lsb": the exponent of each element's lowest set bit, from its bits
            _KERNELS[name] = cupy.ElementwiseKernel(
                "float64 x, int32 none", "int32 e",
                "long long b = __double_as_longlong(x); int E = (int)((b >> 52) & 0x7ff);"
                "e = x == 0.0 || E == 0x7ff ? none : " + _LSB + ";",
                "numoracle_lsb_exponent")
    return _KERNELS[name]


def fused(xp: Any) -> bool:
    """Whether the arrays of ``xp`` get the one-kernel forms (CuPy's do)."""
    return bool(xp.__name__ == "cupy")


def radius_product(x: Any, y: Any) -> Any:
    """``x * y`` of magnitudes or radii with ``0 * inf = 0`` (a zero wins, a NaN
    stays), one kernel on CuPy; None elsewhere (the caller's passes)."""
    xp = array_module(x)
    if xp is np:  # (a number or NumPy scalar beside a device array)
        xp = array_module(y)
    return _kernel("radius_product")(x, y) if fused(xp) else None


def special_mask(value: Any, det: Any, ref_err: Any) -> Any:
    """Where an element is a special value known exactly (reach ``det + ref_err`` 0
    and the value 0 or infinite, or a NaN value with a finite reach), one kernel on
    CuPy; None elsewhere (ieee's passes)."""
    return _kernel("special_points")(value, det, ref_err) if fused(array_module(value)) \
        else None


def fused_exact(xp: Any) -> bool:
    """Whether a contraction of exact operands and the rounding to an output format
    run as one pass each on the arrays of ``xp``: CuPy's kernels, or on NumPy the
    loops of :mod:`~numoracle.oracle.fused_cpu` where numba is installed, or in torch's
    namespace the tensor operations of :mod:`~numoracle.oracle.fused_torch`."""
    return fused(xp) or (xp is np and fused_cpu.available()) or fused_torch.available(xp)


#: the environment variable that switches the softmax family's and layer norm's whole-rule
#: kernels on CuPy off (``0``: each primitive's kernels); on otherwise (the default)
DEVICE_ROWS_VARIABLE = "NUMORACLE_DEVICE_ROWS"


def whole_rules(xp: Any, size: int) -> bool:
    """Whether a rule of the softmax family over ``size`` elements of ``xp`` runs as
    whole-rule loops: on NumPy :mod:`~numoracle.oracle.fused_cpu`'s where numba is
    installed, from LOOP_MIN elements (the same bits as its primitives' passes); on
    CuPy :mod:`~numoracle.oracle.fused_cuda`'s kernels unless
    :data:`DEVICE_ROWS_VARIABLE` is ``0`` (the same bits but for the device's
    exponentials, within the reference's own error of the host's; layer norm's rule
    takes :mod:`~numoracle.oracle.fused_norm_cuda`'s kernels where this holds and their
    own switch is on)."""
    if xp is np:
        return size >= fused_cpu.LOOP_MIN and fused_cpu.rows_available()
    return size > 0 and device_rows(xp)


def device_rows(xp: Any) -> bool:
    """Whether the whole-rule and row kernels of :mod:`~numoracle.oracle.fused_cuda` run
    on the arrays of ``xp``: CuPy's, unless :data:`DEVICE_ROWS_VARIABLE` is ``0``."""
    return fused(xp) and os.environ.get(DEVICE_ROWS_VARIABLE, "1") != "0"


#: the environment variable that switches the tracked row sums' kernels on CuPy off
#: (``0``; on by default, otherwise the contraction with a vector of ones)
ROW_SUMS_VARIABLE = "NUMORACLE_DEVICE_ROW_SUMS"


def device_row_sums(xp: Any) -> bool:
    """Whether ``tracked.sum_`` over the last axis of ``xp``'s arrays takes the row sum's
    kernels (:func:`~numoracle.oracle.fused_cuda.row_sums`): CuPy's, where
    :data:`ROW_SUMS_VARIABLE` is ``0``."""
    return fused(xp) and os.environ.get(ROW_SUMS_VARIABLE, "1") != "0"


def contraction_radii(S: Any, grow: Any, tiny_mag: Any, tiny_sum: Any, det_coef: Any,
                      prob_coef: Any, eta: Any, g64: Any) -> tuple[Any, Any, Any]:
    """Make ``S`` (a float64 magnitude sum, in place) an upper bound,
    ``S grow + tiny_mag`` (its own rounding and underflow: for a float64 sum of
    ``n`` terms ``1 + 2 gamma_n(u64)`` and ``n 2^-1074``), and return the radii
    affine in it: ``det_coef S + eta``, ``prob_coef S + eta`` and the reference's
    own ``g64 S + tiny_sum`` (``n 2^-1074``; the coefficients floats, or arrays
    broadcastable to ``S`` where the accumulation length varies). On NumPy with
    numba and float coefficients one loop (:func:`~numoracle.oracle.fused_cpu.contraction_radii`,
    the same bits)."""
    xp = array_module(S)
    if fused(xp):
        det, prob, ref = (xp.ndarray(S.shape, dtype=xp.float64) for _ in range(3))
        _kernel("contraction")(grow, tiny_mag, tiny_sum, det_coef, prob_coef, eta, g64, S,
                               det, prob, ref)
        return det, prob, ref
    coefs = (grow, tiny_mag, tiny_sum, det_coef, prob_coef, eta, g64)
    if (xp is np and S.dtype == np.float64 and S.flags.c_contiguous and S.flags.writeable
            and fused_cpu.elementwise(S) and all(np.ndim(c) == 0 for c in coefs)):
        return fused_cpu.contraction_radii(S, tuple(float(c) for c in coefs))
    S *= grow
    S += tiny_mag
    return _affine(S, det_coef, eta), _affine(S, prob_coef, eta), _affine(S, g64, tiny_sum)


def _affine(S: Any, coef: Any, const: Any) -> Any:
    """``coef * S + const`` in a fresh array, with no temporary."""
    out = S * coef
    out += const
    return out


def lowest_set_bit(x: Any, none: int, sync: bool = True) -> Any:
    """The exponent of the lowest set bit over the nonzero finite elements of
    float64 ``x`` (``none`` where there are none), in one pass: on CuPy with one
    synchronisation (with ``sync=False`` a 0-d device array, for
    :func:`device_scalars`); on NumPy by :mod:`~numoracle.oracle.fused_cpu`.
    ``None`` where neither runs (the caller's vectorised NumPy path)."""
    xp = array_module(x)
    if xp is np and fused_cpu.available():
        return fused_cpu.grid(x, FP64, none)[0] if x.size else none
    if not fused(xp):
        return None
    low = xp.min(_kernel("lsb")(x, none)) if x.size else xp.asarray(none, dtype=xp.int32)
    return int(low) if sync else low


def device_scalars(scalars: list[Any]) -> list[float]:
    """Several 0-d device arrays brought to the host in one transfer (one
    synchronisation); integers up to 2^53 come back exact."""
    xp = array_module(scalars[0])
    return [float(v) for v in xp.stack([xp.asarray(v, dtype=xp.float64)
                                          for v in scalars]).get()]


def add_rounding(value: Any, ref_err: Any, det: Any, prob: Any, u: float, tiny: float,
                 mag: Any = None) -> tuple[Any, Any]:
    """The radii after one more rounding to a format of unit roundoff ``u`` and
    smallest normal ``tiny``: ``r (1 + u) + u (|value| + ref_err) + tiny`` for
    ``r`` in ``det``, ``prob``; in place where a radius is an array of its own.
    ``mag``: ``|value| + ref_err`` where the caller has it (used up here). The
    separate passes; :func:`store_rounding` is the one-pass form."""
    xp = array_module(value)
    if mag is None:
        mag = xp.abs(value)
        mag += ref_err
    mag *= u
    mag += tiny
    return rounded(det, mag, u), rounded(prob, mag, u)


def rounded(radius: Any, scaled_mag: Any, u: float) -> Any:
    """``radius (1 + u) + scaled_mag``, where ``scaled_mag = u |value| + 2^emin``:
    one more rounding; in place when ``radius`` is an array of its own."""
    shape = np.broadcast_shapes(getattr(radius, "shape", ()), getattr(scaled_mag, "shape", ()))
    xp = array_module(scaled_mag)
    if is_torch(xp) and _dense(scaled_mag, shape) and (
            isinstance(radius, float) or _dense(radius, shape)):
        # (a fresh tensor, contiguous as the copy it replaces, the same roundings)
        return radius * (1.0 + u) + scaled_mag
    out = own_array(radius, shape, xp)
    out *= 1.0 + u
    out += scaled_mag
    return out


def _dense(a: Any, shape: tuple[int, ...]) -> bool:
    """Whether ``a`` is a contiguous float64 array of torch's namespace of ``shape``."""
    t = getattr(a, "tensor", None)
    return (t is not None and tuple(t.shape) == shape and t.is_floating_point()
            and t.element_size() == 8 and t.is_contiguous())


def owned(r: Any, shape: tuple[int, ...]) -> bool:
    """Whether ``r`` is a writeable array of ``shape`` that views no other array (an
    array of torch's NumPy API never is: it keeps no ``base``)."""
    return (getattr(r, "base", 0) is None and getattr(r, "shape", None) == shape
            and bool(getattr(getattr(r, "flags", None), "writeable", True)))


def own_array(r: Any, shape: tuple[int, ...], xp: Any) -> Any:
    """``r`` itself where it is a writeable array of ``shape`` that no other array
    views (:func:`owned`); else a copy of it at that shape."""
    return r if owned(r, shape) else xp.array(xp.broadcast_to(r, shape), dtype=xp.float64)


@dataclass(frozen=True)
class OperandFacts:
    """What the host decides a contraction by, from one pass over an operand."""

    #: ``|x|``, laid out as ``x`` is
    magnitude: Any
    #: the exponent of the lowest set bit of its nonzero finite elements (``none``
    #: where there are none); None where it is left on the device (``low``)
    lsb: int | None
    #: :data:`NOT_FINITE` (an infinity or NaN), :data:`SUBNORMAL` (a nonzero element
    #: below the format's smallest normal), :data:`UNREPRESENTABLE` (an element the
    #: format does not hold exactly), or'ed
    flags: int
    #: in torch's namespace, the least magnitude of the lowest set bits (a 0-d tensor,
    #: :func:`~numoracle.oracle.fused_torch.operand_facts`), read only where needed
    low: Any = None
    #: whether the lowest set bit may lie below ``2^fused_torch.DEEP_EXPONENT``
    deep: bool = True

    def exponent(self, none: int) -> int:
        """:attr:`lsb`, read from :attr:`low` where it was left on the device."""
        if self.lsb is not None:
            return self.lsb
        return fused_torch.lowest_exponent(self.low, none)


class PendingFacts:
    """:func:`operand_facts` under way: the magnitudes are there to queue GEMMs on;
    :meth:`result` waits for the facts alone (not for what was queued after them).
    ``host`` holds each operand's ``(none - lsb, flags)``; ``rows``, where given,
    the operands whose rows are still being copied from the device and the
    page-locked array they arrive in; ``done``, where every operand's facts were
    known, those facts."""

    def __init__(self, magnitudes: list[Any], host: np.ndarray | None, ready: Any, none: int,
                 rows: tuple[list[int], np.ndarray] | None = None,
                 done: list[OperandFacts] | None = None) -> None:
        self.magnitudes = magnitudes
        self._host, self._ready, self._none, self._rows = host, ready, none, rows
        self._done = done

    def result(self) -> list[OperandFacts]:
        if self._done is not None:
            return list(self._done)
        assert self._host is not None
        if self._ready is not None:  # a device event
            self._ready.synchronize()
        if self._rows is not None:
            todo, copied = self._rows
            self._host[todo] = copied
        return [OperandFacts(m, self._none - int(far), int(flags))
                for m, (far, flags) in zip(self.magnitudes, self._host, strict=True)]


def operand_facts(arrays: list[Any], fmt: Any, none: int, *, grid: bool = True,
                  single: bool = False, known: list[OperandFacts | None] | None = None,
                  keep: list[bool] | None = None) -> PendingFacts | None:
    """Each array's :class:`OperandFacts` (subnormal and representable as to
    ``fmt``), one pass each, none where ``known`` has an operand's facts already:
    on CuPy (magnitudes in arrays of their own; with ``single`` float32, rounded up
    to TF32, and the flag OFF_SINGLE: :mod:`~numoracle.oracle.tensor_sums`) all
    copied to the host in one asynchronous transfer, and nothing to wait for where
    every operand is known; on NumPy by :mod:`~numoracle.oracle.fused_cpu`, the magnitudes in this
    thread's scratch arrays (valid until its next call; arrays of their own
    where ``keep`` says so; with ``single`` float32, rounded up, and the flag
    OFF_SINGLE), the lowest set bit (and representability) only with ``grid``
    (else ``none``, representable). ``None`` where neither runs (:func:`fused_exact`)."""
    xp = array_module(arrays[0])
    if known is not None and all(f is not None for f in known) and fused_exact(xp):
        # every operand's facts kept from an earlier contraction: no pass, nothing to wait for
        facts: list[OperandFacts] = known  # type: ignore[assignment]
        return PendingFacts([f.magnitude for f in facts], None, None, none, done=facts)
    if xp is np and fused_cpu.available():
        dtype = np.float32 if single else np.float64
        known = known or [None] * len(arrays)
        keep = keep or [False] * len(arrays)
        todo = [i for i, f in enumerate(known) if f is None]
        mags = [f.magnitude if f is not None else
                _owned(x, dtype) if keep[i] else scratch(i, x, dtype)
                for i, (x, f) in enumerate(zip(arrays, known, strict=True))]
        host = np.array([(0, 0) if f is None else (none - f.exponent(none), f.flags) for f in known],
                        dtype=np.int64).reshape(len(arrays), 2)
        if todo:
            host[todo] = fused_cpu.operand_facts([arrays[i] for i in todo],
                                                 [mags[i] for i in todo], fmt, none, grid)
        return PendingFacts(mags, host, None, none)
    if not fused(xp):  # (torch's passes: float64 magnitudes only)
        return _torch_facts(xp, arrays, fmt, none, known) if (
            not single and fused_torch.available(xp)) else None
    known = known or [None] * len(arrays)
    todo = [i for i, f in enumerate(known) if f is None]
    mags: list[Any] = [None if f is None else f.magnitude for f in known]
    host = np.array([(0, 0) if f is None else (none - f.exponent(none), f.flags) for f in known],
                    dtype=np.int64).reshape(len(arrays), 2)
    found = xp.zeros((len(todo), 2), dtype=xp.int32)
    passes = []
    mag_type = xp.float32 if single else xp.float64
    for i in todo:
        x = arrays[i]
        flags = x.flags
        if not (flags.c_contiguous or flags.f_contiguous):
            x = xp.ascontiguousarray(x)
            flags = x.flags
        fortran = flags.f_contiguous and not flags.c_contiguous
        # the same layout: both walked in memory order
        ax = xp.ndarray(x.shape, dtype=mag_type, order="F" if fortran else "C")
        if ax.strides != tuple(s // 8 * ax.itemsize for s in x.strides):
            x = xp.ascontiguousarray(x)
            ax = xp.ndarray(x.shape, dtype=mag_type)
        passes.append((x, ax))
        mags[i] = ax
    _facts_passes(passes, found, fmt, none, single,
                  _many_facts_probe(int(found.device.id), single))
    pinned = xp.cuda.alloc_pinned_memory(found.nbytes)  # (CuPy's pool of page-locked memory)
    copied = np.frombuffer(pinned, dtype=np.int32, count=found.size).reshape(found.shape)
    stream = xp.cuda.get_current_stream()
    xp.cuda.runtime.memcpyAsync(copied.ctypes.data, found.data.ptr, found.nbytes,
                                xp.cuda.runtime.memcpyDeviceToHost, stream.ptr)
    return PendingFacts(mags, host, stream.record(), none, rows=(todo, copied))


def _torch_facts(xp: Any, arrays: list[Any], fmt: Any, none: int,
                 known: list[OperandFacts | None] | None) -> PendingFacts:
    """:func:`operand_facts` in torch's namespace (:func:`~numoracle.oracle.fused_torch.
    operand_facts`: one read for all), nothing left to wait for."""
    known = known or [None] * len(arrays)
    todo = [i for i, f in enumerate(known) if f is None]
    done: list[Any] = list(known)
    for i, (mag, low, flags, deep) in zip(todo, fused_torch.operand_facts(
            [xp.tensor(arrays[i]) for i in todo], fmt, none), strict=True):
        done[i] = OperandFacts(xp.from_tensor(mag), None, flags, low, deep)
    return PendingFacts([f.magnitude for f in done], None, None, none, done=done)


def _facts_passes(passes: list[tuple[Any, Any]], found: Any, fmt: Any, none: int,
                  single: bool, many: bool) -> None:
    """Launch the facts pass over each ``(values, magnitudes)`` of ``passes``, row ``i``
    of ``found`` its facts: with ``many`` up to four operands a launch (the grid's
    second axis), else one launch each."""
    params = (np.int32(fmt.t), np.int32(fmt.emin), np.float64(fmt.max), np.float64(fmt.tiny),
              np.int32(none))
    if not many:
        kernel = _kernel("facts_tf32" if single else "facts")
        for row, (x, ax) in enumerate(passes):
            if x.size:
                kernel((min(-(-x.size // 256), 1024),), (256,), (
                    x, ax, np.int64(x.size), *params, found[row]))
        return
    kernel = _kernel("facts_tf32_many" if single else "facts_many")
    for g0 in range(0, len(passes), 4):
        group = passes[g0:g0 + 4]
        blocks = max(min(-(-x.size // 256), 1024) for x, _ in group)
        if blocks:
            slots = group + [group[0]] * (4 - len(group))  # (the unused ones never read)
            kernel((blocks, len(group)), (256,), (
                *(x for x, _ in slots), *(ax for _, ax in slots),
                *(np.int64(x.size) for x, _ in slots), *params,
                found[g0:] if g0 else found))


@lru_cache(maxsize=None)
def _many_facts_probe(device: int, single: bool) -> bool:
    """Whether the facts pass over several operands in one launch gives, on CuPy's
    ``device``, the magnitudes and facts of the pass over each (five small operands:
    normal, special and subnormal values, an empty one); else (a kernel that does not
    compile, or differs) each operand gets a launch of its own, and a warning says so."""
    import cupy  # noqa: PLC0415 - only for device arrays

    rng = np.random.default_rng(4)
    host = [rng.standard_normal(300) * 2.0 ** rng.integers(-140, 140, 300),
            np.array([1.5, 0.0, np.inf, 2.0**-1070, -3.0]), np.zeros(0),
            rng.integers(-99, 99, (7, 9)) * 2.0**-7, np.array([np.nan, 2.0**100])]
    mag = np.float32 if single else np.float64
    try:
        with cupy.cuda.Device(device):
            runs = []
            for many in (True, False):
                passes = [(cupy.asarray(x), cupy.ndarray(x.shape, dtype=mag)) for x in host]
                found = cupy.zeros((len(passes), 2), dtype=cupy.int32)
                _facts_passes(passes, found, FP32, 1 << 20, single, many)
                runs.append([cupy.asnumpy(found)] + [cupy.asnumpy(ax) for _, ax in passes])
            for got, want in zip(*runs, strict=True):
                if not np.array_equal(got, want, equal_nan=True):
                    raise ArithmeticError("the passes over several operands and over each differ")
    except Exception as exc:  # noqa: BLE001 - any failure leaves a launch per operand
        warnings.warn(f"the operands' facts pass launches once per operand on device {device}: "
                      f"its launch over several failed its probe ({exc!r})", RuntimeWarning,
                      stacklevel=2)
        return False
    return True


def exact_products(av: Any, bv: Any, operands: list[Any], fmt: Any, none: int, *,
                   grid: bool, single: bool = False,
                   known: list[OperandFacts | None] | None = None,
                   keep: list[bool] | None = None) -> tuple[Any, Any, PendingFacts]:
    """``av @ bv`` (on CuPy one float64 cuBLAS call,
    :func:`~numoracle.oracle.tensor_sums.value_product`), the :func:`operand_facts` of
    ``operands`` (``av``, ``bv`` and a bias) and ``S = |av| @ |bv|``, in that order: on
    CuPy the device works on the value's GEMM while the host queues the rest, and
    ``S``'s GEMM runs while the host waits for the facts (``known``, ``keep``: see
    :func:`operand_facts`).
    With ``single`` ``S`` is :func:`single_sum` of the magnitudes rounded up to
    float32 (NumPy; float32 in a scratch array) or the TF32 sum of them rounded up
    to TF32 (CuPy, :func:`~numoracle.oracle.tensor_sums.tensor_sum`): float64 where
    the contraction is longer than one GEMM's chunk (see :func:`magnitude_sum`)."""
    xp = array_module(av)
    if fused(xp):
        value = value_product(av, bv)
    elif fused_torch.available(xp):  # (torch's matmul on the tensors: no NumPy API between)
        value = xp.from_tensor(xp._torch.matmul(xp.tensor(av), xp.tensor(bv)))
    else:
        value = av @ bv
    pending = operand_facts(operands, fmt, none, grid=grid, single=single, known=known,
                            keep=keep)
    assert pending is not None
    ma, mb = pending.magnitudes[:2]
    if not single and fused_torch.available(xp):
        return value, xp.from_tensor(xp._torch.matmul(xp.tensor(ma), xp.tensor(mb))), pending
    if not single:
        return value, ma @ mb, pending
    if fused(array_module(ma)):
        return value, tensor_sum(ma, mb), pending
    out = scratch(len(operands), value, np.float32) if ma.shape[-1] <= SINGLE_CHUNK else None
    return value, single_sum(ma, mb, out), pending


#: the longest float32 GEMM of a magnitude sum: a longer contraction sums such chunks in
#: float64, so that, whatever the length, ``S`` is grown by ``2 gamma_2049(2^-24)`` (about
#: 2^-12) and exceeds a float64 sum's bound by at most ``3 gamma_2049(2^-24) + 2^-21 < 2^-11``
#: of itself (the growth, float32's own rounding, the magnitudes rounded up)
SINGLE_CHUNK = 2048


def single_sum(ma: np.ndarray, mb: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``ma @ mb`` of float32 magnitudes: one float32 GEMM (into ``out``) of up to
    SINGLE_CHUNK terms; else float32 GEMMs of SINGLE_CHUNK terms, summed in float64
    in order (a float64 array)."""
    k = ma.shape[-1]
    if k <= SINGLE_CHUNK:
        return np.matmul(ma, mb, out=out)
    total: np.ndarray | None = None
    for c0 in range(0, k, SINGLE_CHUNK):
        c1 = c0 + SINGLE_CHUNK
        part = np.matmul(ma[..., c0:c1], mb[c0:c1] if mb.ndim == 1 else mb[..., c0:c1, :])
        if total is None:
            total = part.astype(np.float64)
        else:
            total += part
    assert total is not None
    return total


def single_growth(k: int, tensor: bool = False) -> tuple[float, float]:
    """What makes :func:`single_sum` of ``k`` terms (and a bias's one, added in
    float64) an upper bound of the exact sum: ``S grow + tiny_mag`` with ``grow =
    1 + 2 gamma_{c+1}(2^-24)`` (``c`` terms a float32 GEMM; the chunks' float64
    additions lie within the margin) and ``tiny_mag = (k + 1) 2^-125`` (each
    product possibly flushed to zero); with ``tensor``, of the GPU's TF32 sum
    (:func:`~numoracle.oracle.tensor_sums.tf32_growth`)."""
    return tf32_growth(k) if tensor else _single_growth(k, SINGLE_CHUNK)


@lru_cache(maxsize=1024)
def _single_growth(k: int, chunk: int) -> tuple[float, float]:
    c = min(k, chunk)
    return 1.0 + 2.0 * float(gamma(np.asarray(c + 1), FP32.u)), (k + 1) * 2.0**-125


def magnitude_sum(abs_a: Any, abs_b: Any, single: bool) -> Any:
    """``|a| @ |b|`` (float64) from the magnitudes: their float64 GEMM, or with
    ``single`` (every nonzero magnitude within :func:`in_single_range`) on NumPy
    the float32 GEMMs of the magnitudes rounded up to float32 (:func:`single_sum`),
    which err below the exact sum by at most ``gamma_c(2^-24)`` of it (``c`` terms a
    GEMM at most) plus ``k 2^-126`` (products flushed to zero), on a GPU the TF32
    GEMMs of the magnitudes rounded up to TF32
    (:func:`~numoracle.oracle.tensor_sums.tensor_sum`, matrices or stacks): the caller
    grows it into an upper bound (:func:`single_growth`)."""
    if not single:
        return abs_a @ abs_b
    xp = array_module(abs_a)
    if xp is not np:
        if is_torch(xp):
            S = tensor_sum(tf32_up(xp.tensor(abs_a)), tf32_up(xp.tensor(abs_b)))
            return xp.from_tensor(S.to(xp._torch.float64))
        return tensor_sum(tf32_up(abs_a), tf32_up(abs_b)).astype(xp.float64, copy=False)
    return single_sum(single_magnitude(abs_a), single_magnitude(abs_b)).astype(np.float64,
                                                                               copy=False)


def fused_single_sum(av: Any, bv: Any) -> np.ndarray | None:
    """:func:`magnitude_sum` of the values ``av``, ``bv`` with ``single`` on NumPy
    (the same bits), each operand's float32 magnitudes in one pass of numba's
    (:func:`~numoracle.oracle.fused_cpu.single_magnitudes`) instead of ``|a|``,
    the range test and the rounding up as NumPy passes. None where the loops do not
    run (another namespace, small operands) or a nonzero magnitude lies outside
    float32's normal range (:func:`in_single_range` false: the sum stays float64)."""
    parts = fused_single_parts(av, bv)
    return None if parts is None else parts[0]


def fused_single_parts(av: Any, bv: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`fused_single_sum`, and the float32 magnitudes of ``av`` and ``bv`` it
    summed (rounded up; for the products of radii,
    :mod:`~numoracle.oracle.single_products`)."""
    if array_module(av) is not np or not fused_cpu.elementwise(av, bv):
        return None
    ma = fused_cpu.single_magnitudes(av)
    mb = None if ma is None else fused_cpu.single_magnitudes(bv)
    if mb is None:
        return None
    out = None  # (the float32 sum in a scratch array: it is widened at once)
    if ma.shape[-1] <= SINGLE_CHUNK and ma.ndim == mb.ndim == 2:
        out = scratch(_SUM_SLOT, np.broadcast_to(np.float32(0), (ma.shape[0], mb.shape[1])),
                      np.float32)
    return single_sum(ma, mb, out).astype(np.float64, copy=False), ma, mb


def single_magnitude(m: np.ndarray) -> np.ndarray:
    """Float64 magnitudes ``m`` rounded up to float32: the nearest float32 where it
    holds ``m``, else one or two ulps above (as numba's loop of
    :mod:`~numoracle.oracle.fused_cpu`, the same bits)."""
    with np.errstate(over="ignore"):
        m32 = m.astype(np.float32)
    return np.where(m32.astype(np.float64) >= m, m32, m32 * SINGLE_UP)


def in_single_range(*ms: Any) -> bool:
    """Whether every nonzero magnitude of the arrays ``ms`` lies in float32's normal
    range (on a GPU at most TF32's largest, in one synchronisation,
    :func:`~numoracle.oracle.tensor_sums.in_tf32_range`): where :func:`magnitude_sum`
    may sum in float32 (TF32)."""
    if array_module(ms[0]) is not np:
        return in_tf32_range(*ms)
    return all(bool(np.all((m == 0.0) | ((m >= FP32.tiny) & (m <= FP32.max)))) for m in ms)


_SCRATCH = threading.local()
#: the scratch slots of the float32 sums of :func:`fused_single_parts` (the slots below
#: are the operands' magnitudes and :func:`exact_products`' sums)
_SUM_SLOT = 8
#: elements above which a magnitude gets an array of its own (its GEMM outweighs the
#: fresh pages; a scratch array that large would stay held)
_SCRATCH_MAX = 1 << 22


def _owned(like: np.ndarray, dtype: Any) -> np.ndarray:
    """A fresh array of ``dtype`` laid out as ``like`` (C or Fortran order)."""
    fortran = like.flags.f_contiguous and not like.flags.c_contiguous
    return np.empty(like.shape, dtype=dtype, order="F" if fortran else "C")


def scratch(slot: int, like: np.ndarray, dtype: Any = np.float64) -> np.ndarray:
    """This thread's scratch array ``slot`` of ``dtype``, shaped and laid out as
    ``like`` (C or Fortran order; any other layout gets C order): kept from call
    to call, so that the magnitudes of operands do not take fresh pages every time."""
    if like.size > _SCRATCH_MAX:
        return _owned(like, dtype)
    fortran = like.flags.f_contiguous and not like.flags.c_contiguous
    bufs = getattr(_SCRATCH, "bufs", None)
    if bufs is None:
        bufs = _SCRATCH.bufs = {}
    key = (slot, np.dtype(dtype).str)
    buf = bufs.get(key)
    if buf is None or buf.size < like.size:
        buf = bufs[key] = np.empty(like.size, dtype=dtype)
    return buf[:like.size].reshape(like.shape, order="F" if fortran else "C")


def exact_contraction_radii(value: Any, S: Any, bias: Any, grow: Any, tiny_mag: Any,
                            tiny_sum: Any, det_coef: Any, prob_coef: Any, eta: Any, g64: Any,
                            fits_acc: float, fits_64: float, acc_max: float,
                            fmt: Any = None) -> tuple[Any, Any, Any, Any]:
    """One CuPy kernel after a contraction of exact operands: ``bias`` added to
    ``value`` and ``|bias|`` to ``S`` (where there is one), then
    :func:`contraction_radii`; the kernel's radii 0 where ``S <= fits_acc`` and the
    reference's where ``S <= fits_64`` (the exact regime; a negative threshold
    where there is none), both kernel radii infinite where ``S > acc_max`` (the
    accumulator may overflow); with ``fmt``, the rounding to it after
    (:func:`store_rounding`). Returns the grown ``S`` (float64) and the three
    radii; ``value`` changes in place, and ``S`` too where it is float64 (a float32
    ``S``, the GPU's TF32 sum, is grown into a float64 array of its own). On NumPy
    (:func:`fused_exact`) one loop of :mod:`~numoracle.oracle.fused_cpu` (the
    rounding in it), the coefficients floats, ``S`` float64 or float32
    (:func:`magnitude_sum`)."""
    xp = array_module(S)
    scalars = (grow, tiny_mag, tiny_sum, det_coef, prob_coef, eta, g64, fits_acc, fits_64,
               acc_max)
    if xp is np:
        return fused_cpu.exact_radii(value, S, bias, scalars, fmt)
    if is_torch(xp):  # (torch's tensor passes)
        out = fused_torch.exact_radii(*_tensors(xp, value, S, bias), _tensors(xp, *scalars),
                                      fmt)
        return tuple(xp.from_tensor(a) for a in out)  # type: ignore[return-value]
    raw = _raw_takes(value, S, bias, scalars) and _raw_probe(
        int(value.device.id), _raw_name(bias is not None, fmt is not None, S.dtype == np.float32))
    return _device_exact_radii(xp, value, S, bias, scalars, fmt, raw)


def _tensors(xp: Any, *arrays: Any) -> tuple[Any, ...]:
    """The tensors that arrays of torch's namespace hold (numbers and None as they are)."""
    return tuple(xp.tensor(a) if isinstance(a, xp.ndarray) else a for a in arrays)


def _raw_name(bias: bool, stored: bool, single: bool) -> str:
    """The raw exact-contraction kernel's name (see :func:`exact_raw_source`)."""
    return ("exact_raw" + ("_bias" if bias else "") + ("_stored" if stored else "")
            + ("_single" if single else ""))


def _device_exact_radii(xp: Any, value: Any, S: Any, bias: Any, scalars: tuple[Any, ...],
                        fmt: Any, raw: bool) -> tuple[Any, Any, Any, Any]:
    """:func:`exact_contraction_radii` on CuPy: with ``raw`` the raw kernel (see
    :func:`_raw_takes`), else the elementwise kernels."""
    single = S.dtype == xp.float32  # (TF32's sum: grown into a float64 array of its own)
    S_in = S
    if single:
        S = xp.ndarray(S.shape, dtype=xp.float64)
    # (CuPy's constructor: its empty_like costs several times the host time)
    det, prob, ref = (xp.ndarray(S.shape, dtype=xp.float64) for _ in range(3))
    stored = () if fmt is None else rounding_params(fmt)
    tail = "_single" if single else ""
    if raw:
        blocks = max(1, min(-(-value.size // _RAW_BLOCK), _RAW_GRID))
        _kernel(_raw_name(bias is not None, bool(stored), single))((blocks,), (_RAW_BLOCK,), (
            S_in, value, value if bias is None else bias,
            np.int64(value.shape[-1] if value.ndim else 1), np.int64(value.size),
            S, det, prob, ref, *map(np.float64, scalars + (stored or _NO_ROUNDING)[:4]),
            *(stored or _NO_ROUNDING)[4:]))
        return S, det, prob, ref
    S32 = (S_in,) if single else ()
    if bias is None:
        _kernel(("exact_stored" if stored else "exact") + tail)(
            *S32, *((value,) if stored else ()), *scalars, *stored, S, det, prob, ref)
    else:
        _kernel(("exact_bias_stored" if stored else "exact_bias") + tail)(
            *S32, bias, *scalars, *stored, value, S, det, prob, ref)
    return S, det, prob, ref


#: the raw kernel's rounding parameters where it rounds to no format (unread)
_NO_ROUNDING = (0.0, 0.0, 0.0, 0.0, np.int32(0), np.int32(0))
#: the types of a coefficient that is one number
_SCALARS = frozenset((float, int, np.float64, np.float32, np.int64, np.int32))


def _raw_takes(value: Any, S: Any, bias: Any, scalars: tuple[Any, ...]) -> bool:
    """Whether the raw exact-contraction kernel takes these operands: C-ordered
    float64 values, ``S`` of their shape (float64 or float32), not empty, the bias
    (where there is one) a C-ordered float64 vector along their last axis, every
    coefficient one number (not one per element); else the elementwise kernels do."""
    if not (value.size and value.dtype == np.float64 and value.flags.c_contiguous
            and S.shape == value.shape and S.flags.c_contiguous
            and _SCALARS.issuperset(map(type, scalars))):
        return False
    return bias is None or bool(bias.ndim == 1 and value.ndim >= 1
                                and bias.dtype == np.float64
                                and bias.shape[0] == value.shape[-1]
                                and bias.flags.c_contiguous)


@lru_cache(maxsize=None)
def _raw_probe(device: int, name: str) -> bool:
    """Whether the raw exact-contraction kernel ``name`` gives the bits of the
    elementwise kernel of its variant on CuPy's ``device`` (small arrays through every
    branch: the exact regime, overflow, the bias, the rounding to float32 and
    bfloat16); else (a kernel that does not compile, or differs) the elementwise kernel
    runs there, and a warning says so. (Each variant is probed where first used: two
    compilations, not sixteen.)"""
    import cupy  # noqa: PLC0415 - only for device arrays

    rng = np.random.default_rng(3)
    shape = (7, 33)
    S64 = np.abs(rng.standard_normal(shape)) * 2.0 ** rng.integers(-30, 30, shape)
    S64.flat[::5] = 2.0 ** rng.integers(-20, 20, S64.flat[::5].shape)  # (in the exact regime)
    S64.flat[1::11] = 1e300  # (past the accumulator's range)
    value = rng.standard_normal(shape) * S64
    value.flat[2::9] = 2.0 ** rng.integers(-20, 20, value.flat[2::9].shape)
    bias = rng.standard_normal(shape[1])
    with np.errstate(over="ignore"):
        S32 = S64.astype(np.float32)  # (an infinite TF32 sum where float32 overflows)
    scalars = (1.0 + 2.0**-40, 2.0**-140, 33 * 2.0**-1074, 2.0**-20, 2.0**-23, 2.0**-120,
               2.0**-48, 2.0**12, 2.0**30, 1e200)
    try:
        with cupy.cuda.Device(device):
            for fmt in ((FP32, BF16) if "_stored" in name else (None,)):
                runs = []
                for raw in (True, False):
                    v = cupy.asarray(value)
                    S = cupy.asarray(S32 if name.endswith("_single") else S64)
                    b = cupy.asarray(bias) if "_bias" in name else None
                    out = _device_exact_radii(cupy, v, S, b, scalars, fmt, raw)
                    runs.append([cupy.asnumpy(a) for a in (v, *out)])
                for got, want in zip(*runs, strict=True):
                    if not np.array_equal(got, want, equal_nan=True):
                        raise ArithmeticError("the raw and elementwise kernels differ")
    except Exception as exc:  # noqa: BLE001 - any failure leaves the elementwise kernels
        warnings.warn(f"the exact contraction's pass {name} stays CuPy's elementwise kernel "
                      f"on device {device}: its raw kernel failed its probe ({exc!r})",
                      RuntimeWarning, stacklevel=2)
        return False
    return True


def store_rounding(value: Any, ref_err: Any, det: Any, prob: Any,
                   fmt: Any) -> tuple[Any, Any] | None:
    """On CuPy, one kernel: the radii after rounding to ``fmt``, as
    :func:`add_rounding`, 0 where the value is exact (``det`` and ``ref_err`` 0)
    and ``fmt`` holds it, infinite where ``|value| + ref_err + det`` reaches
    ``fmt.max`` (the output may overflow); in place where a radius is an array of
    its own. On NumPy one loop of :mod:`~numoracle.oracle.fused_cpu`; ``None``
    where neither runs (:func:`fused_exact`)."""
    xp = array_module(value)
    if not fused_exact(xp):
        return None
    if is_torch(xp):  # (torch's tensor passes)
        return tuple(xp.from_tensor(a) for a in fused_torch.store_round(  # type: ignore
            *_tensors(xp, value, ref_err, det, prob), fmt))
    det, prob = own_array(det, value.shape, xp), own_array(prob, value.shape, xp)
    if xp is np:
        v, ref = (np.ascontiguousarray(np.broadcast_to(a, value.shape), dtype=np.float64)
                  for a in (value, ref_err))
        det, prob = (a if a.flags.c_contiguous else np.ascontiguousarray(a) for a in (det, prob))
        fused_cpu.store_round(v, ref, det, prob, fmt)
        return det, prob
    _kernel("store")(value, ref_err, *rounding_params(fmt), det, prob)
    return det, prob


def larger_counts(lo: Any, hi: Any) -> Any:
    """Per entry of each lane (last axis) of ``lo``: how many entries of the same lane
    of ``hi`` exceed it (``hi_j > lo_i``; a tie does not; no NaN in either), as an
    int64 array of ``lo``'s shape. One sort of ``hi`` and a search or merge of ``lo``
    in it: torch's batched ``searchsorted``; on NumPy a merge per lane compiled by
    numba (:mod:`~numoracle.oracle.fused_cpu`); elsewhere (and without numba) one
    stable sort of both ends, ``hi`` first so that a tie counts as not larger."""
    xp = array_module(lo)
    n = lo.shape[-1]
    if xp is np and fused_cpu.available() and lo.size:
        flat = (-1, n)
        return fused_cpu.larger_counts(lo.reshape(flat), hi.reshape(flat)).reshape(lo.shape)
    if is_torch(xp) and lo.size:
        torch = xp._torch
        t_lo, t_hi = xp.tensor(lo).contiguous(), xp.tensor(hi).contiguous()
        below = torch.searchsorted(torch.sort(t_hi, dim=-1).values, t_lo, right=True)
        return xp.from_tensor(n - below)
    both = xp.concatenate([hi, lo], axis=-1)
    order = xp.argsort(both, axis=-1, kind="stable")
    not_larger = xp.cumsum(order < n, axis=-1)  # his sorted so far
    counts = xp.empty_like(not_larger)
    xp.put_along_axis(counts, order, not_larger, axis=-1)
    return n - counts[..., n:]


def any_special(value: Any, det: Any, ref_err: Any) -> bool | None:
    """Whether some element is a special value known exactly: reach (``det +
    ref_err``) 0 and the value 0 or infinite, or a NaN value with a finite reach
    (:func:`~numoracle.oracle.traced.library.ieee.special_points`), in one pass
    without masks on NumPy (numba); ``None`` where that does not run."""
    if array_module(value) is np and fused_cpu.elementwise(value, det, ref_err):
        return fused_cpu.any_special(value, det, ref_err)
    return None


#: the binary operations :func:`carried` runs in one loop
_CARRIED = {operator.add: 0, operator.sub: 1, operator.mul: 2, operator.truediv: 3}


def carried(f: Any, operands: list[Any], out: Any, no_pole: int | None) -> Any:
    """ieee's ``carry`` of ``out = f(a, b)`` (``f`` an addition, subtraction,
    multiplication or division of two tracked ``operands``, low parts folded) in
    one loop on NumPy (numba): ``out`` with every element the operands decide
    exactly set to that value with radius 0 (``out`` itself where none is), the
    same elements and values as ieee's vectorised passes; ``NotImplemented`` where
    the loop does not run (another function, another namespace, no numba)."""
    op = _CARRIED.get(f)
    if (op is None or len(operands) != 2 or no_pole not in (None, 1)
            or array_module(out.value) is not np or not fused_cpu.elementwise(out.value)):
        return NotImplemented
    a, b = operands
    arrays = fused_cpu.carry_binary(
        op, (a.value, a.det + a.ref_err, b.value, b.det + b.ref_err),
        (out.value, out.det, out.prob, out.ref_err, out.mag), no_pole == 1)
    if arrays is None:
        return out
    value, det, prob, ref_err, mag = arrays
    return replace(out, value=value, det=det, prob=prob, ref_err=ref_err, mag=mag, lo=None)
