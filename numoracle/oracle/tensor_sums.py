"""A contraction's magnitude sum ``S = |a| @ |b|`` on a GPU's tensor cores (TF32),
made an upper bound of the exact sum.

``S`` only bounds: it need not be accurate, only never below the exact sum once
grown. On a GPU (CuPy's arrays; torch's tensors stay float64, see
:func:`available`) the magnitudes are rounded up to TF32 (10 explicit significand bits,
:func:`tf32_up`), so that every product of two of them is exact in float32 (22
significand bits), and summed by cuBLAS with ``CUBLAS_COMPUTE_32F_FAST_TF32``
(float32 in and out, the tensor cores), in GEMMs of at most :data:`TENSOR_CHUNK`
terms whose results are summed in float64. The compute type is the call's own:
no global switch of CuPy or torch changes, and a kernel under test in another
thread computes as it asked.

How the tensor cores align, add and round is not documented (Fasi, Higham,
Mikaitis and Pranesh, 2021, found truncation in their accumulation), so the growth
assumes only this: each addition the device performs, however many terms it joins
at once, loses less than one float32 ulp (``2^-23`` of the result) per term it
joins, and nothing where a term is exact. Every term being non-negative, ``c``
products summed lose at most ``2 (c - 1) 2^-23`` of the exact sum (a tree with
``c`` leaves has at most ``2c - 2`` edges), and :func:`tf32_growth`'s ``S (1 +
gamma_{2c+2}(2^-23)) + (k + 1) 2^-125`` bounds it: ``gamma`` for the losses of
the terms already short, ``4 2^-23`` beyond them for the float64 sum of the
chunks, and ``2^-125`` per product or partial sum flushed to zero below
float32's range. Magnitudes outside float32's normal range (below ``2^-126``,
above TF32's largest) are summed in float64 instead (the caller's flag
``OFF_SINGLE``).

Against the float64 sum this loosens ``S`` by less than ``2^-8`` of itself: each
magnitude rounded up by less than ``2^-10``, the growth at ``c = 2048`` about
``2^-11``, and the float32 sum's own rounding.

The GEMM's operands are 2-D float32 arrays in C or Fortran order, as the
operand-facts pass writes them; :func:`gemm_plan` lays them out for cuBLAS's
column-major call (tested on the host against a column-major reading of the
same memory). Each device is probed once before its first sum: where the exact
products of small integer matrices do not come back, its sums stay float64 (and a
warning says so).

The same binding computes a contraction's float64 value on CuPy (:func:`value_product`:
one cuBLAS call with ``CUBLAS_COMPUTE_64F``, without the checks and dispatch of CuPy's
``matmul``), probed alike; where its probe fails the value is CuPy's ``matmul``.
"""

from __future__ import annotations

import warnings
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np

from .formats import FP32, TF32
from .precision import gamma
from .xp import array_module

__all__ = ["TENSOR_CHUNK", "TF32_UNIT", "tf32_growth", "tf32_up", "in_tf32_range",
           "available", "tensor_sum", "gemm_plan", "GemmPlan", "chunks", "chunked_sum",
           "value_product"]

#: the longest TF32 GEMM of a magnitude sum (as the CPU's float32 ones): a longer
#: contraction sums such chunks in float64, and ``S`` is grown by about ``2^-11``
TENSOR_CHUNK = 2048
#: the most bytes the chunks' float32 results take at once (beyond, they are summed group
#: by group)
CHUNK_BYTES = 1 << 30
#: what one term joined in an addition may lose, relative to the sum formed: a float32 ulp
TF32_UNIT = 2.0**-23
#: the low bits of a float64 that TF32 does not keep (52 - 10)
_LOW = (1 << 42) - 1

# cuBLAS's constants (cublas_api.h, library_types.h)
_OP_N, _OP_T = 0, 1
_R_32F, _R_64F = 0, 1
_COMPUTE_32F_FAST_TF32, _COMPUTE_64F = 77, 70
_GEMM_DEFAULT = -1
_ONE = np.ones(1, dtype=np.float32)
_ZERO = np.zeros(1, dtype=np.float32)
_ONE_64 = np.ones(1, dtype=np.float64)
_ZERO_64 = np.zeros(1, dtype=np.float64)
#: their addresses: cuBLAS's alpha and beta (host pointers)
_ONE_AT, _ZERO_AT = _ONE.ctypes.data, _ZERO.ctypes.data
_ONE_64_AT, _ZERO_64_AT = _ONE_64.ctypes.data, _ZERO_64.ctypes.data


def tf32_growth(k: int) -> tuple[float, float]:
    """What makes :func:`tensor_sum` of ``k`` terms (and a bias's one, added in
    float64) an upper bound of the exact sum: ``S grow + tiny_mag`` with ``grow =
    1 + gamma_{2c+2}(2^-23)`` (``c`` terms a TF32 GEMM) and ``tiny_mag = (k + 1)
    2^-125`` (each product and each partial sum possibly flushed to zero).

    Examples
    --------
    >>> grow, tiny = tf32_growth(4096)
    >>> 2.0**-12 < grow - 1 < 2.0**-10
    True
    """
    return _tf32_growth(k, TENSOR_CHUNK)


@lru_cache(maxsize=1024)
def _tf32_growth(k: int, chunk: int) -> tuple[float, float]:
    c = min(k, chunk)
    return 1.0 + float(gamma(np.asarray(2 * c + 2), TF32_UNIT)), (k + 1) * 2.0**-125


def tf32_up(m: Any) -> Any:
    """Non-negative float64 magnitudes ``m`` rounded up to TF32 (11 significant
    bits), as float32 (which holds them exactly): a NumPy or CuPy array, or a
    torch tensor. Meaningful where every nonzero element lies in
    :func:`in_tf32_range`; elsewhere its elements are not used."""
    if type(m).__module__.startswith("torch"):
        torch = _torch()
        bits = m.view(torch.int64)
        return ((bits + _LOW) & ~_LOW).view(torch.float64).to(torch.float32)
    bits = m.view(np.int64)
    return ((bits + _LOW) & ~_LOW).view(np.float64).astype(np.float32)


def in_tf32_range(*ms: Any) -> bool:
    """Whether every nonzero magnitude of the arrays ``ms`` (of one namespace) lies in
    float32's normal range and at most TF32's largest (where :func:`tf32_up` holds
    it): one value brought from the device for all."""
    xp = array_module(ms[0])
    ok = [xp.all((m == 0.0) | ((m >= FP32.tiny) & (m <= TF32.max))) for m in ms]
    for more in ok[1:]:
        ok[0] = ok[0] & more
    return bool(ok[0])


def available(x: Any) -> bool:
    """Whether the magnitude sums of contractions of the array ``x`` may run on the
    tensor cores: ``x`` is CuPy's and its device passed :func:`_probe` (once per
    device). torch's tensors sum in float64: :func:`tensor_sum` takes them (on torch's
    stream), but the torch namespace's references on a CUDA device do not pass their
    tests yet (arrays made on the host beside the device's), so it is not taken."""
    xp = array_module(x)
    if xp.__name__ == "cupy":
        return _probe("cupy", int(x.device.id))
    return False


@lru_cache(maxsize=None)
def _probe(kind: str, device: int) -> bool:
    """Whether :func:`tensor_sum` of small integer matrices on ``device`` (CuPy's
    arrays, or torch's tensors), in C and Fortran order, in one GEMM and in chunks,
    gives their exact products: else (a cuBLAS this module does not know, a call
    that fails) the sums stay float64 there, and a warning says so."""
    rng = np.random.default_rng(0)
    k = TENSOR_CHUNK + 3
    a = rng.integers(0, 8, (3, k)).astype(np.float32)
    b = rng.integers(0, 8, (k, 4)).astype(np.float32)
    try:
        with _cupy().cuda.Device(device):
            for kk in (5, k):
                want = a[:, :kk].astype(np.float64) @ b[:kk].astype(np.float64)
                for x in (a, np.asfortranarray(a)):
                    for y in (b, np.asfortranarray(b)):
                        got = tensor_sum(*(_onto(v, kind, device) for v in (x[:, :kk], y[:kk])))
                        host = got.cpu().numpy() if kind == "torch" else got.get()
                        if not np.array_equal(host, want):
                            raise ArithmeticError(f"{kind} TF32 sums of {kk} terms differ "
                                                  "from the exact ones")
    except Exception as exc:  # noqa: BLE001 - any failure leaves the float64 sums
        warnings.warn(f"magnitude sums stay float64 on {kind} device {device}: the TF32 "
                      f"path failed its probe ({exc!r}); NUMORACLE_SINGLE_SUMS=0 silences "
                      "this", RuntimeWarning, stacklevel=2)
        return False
    return True


def _onto(x: np.ndarray, kind: str, device: int) -> Any:
    """Host ``x`` on ``device``, its layout kept."""
    if kind == "torch":
        return _torch().as_tensor(x).to(f"cuda:{device}")
    return _cupy().asarray(x, order="K")


class GemmPlan(NamedTuple):
    """A row-major ``C = A @ B`` (``A`` m x k, ``B`` k x n, each in C or Fortran
    order) as cuBLAS's column-major ``C^T = B^T A^T``: the operations and leading
    dimensions of its first (``B``) and second (``A``) operands, and how many
    elements on an operand's start moves per step along ``k`` (for a chunk)."""

    op_b: int
    op_a: int
    m: int
    n: int
    ld_b: int
    ld_a: int
    step_b: int
    step_a: int


@lru_cache(maxsize=1024)
def gemm_plan(m: int, k: int, n: int, a_fortran: bool, b_fortran: bool) -> GemmPlan:
    """The :class:`GemmPlan` of ``A @ B`` (``A`` m x k, ``B`` k x n; each C order
    unless its flag says Fortran order). Column-major memory of a C-ordered ``A``
    is ``A^T`` (``k x m``, leading dimension ``k``), taken as it is; of a
    Fortran-ordered one it is ``A`` (``m x k``, leading dimension ``m``),
    transposed; the same for ``B``."""
    if b_fortran:
        op_b, ld_b, step_b = _OP_T, max(k, 1), 1
    else:
        op_b, ld_b, step_b = _OP_N, max(n, 1), n
    if a_fortran:
        op_a, ld_a, step_a = _OP_T, max(m, 1), m
    else:
        op_a, ld_a, step_a = _OP_N, max(k, 1), 1
    return GemmPlan(op_b, op_a, m, n, ld_b, ld_a, step_b, step_a)


def chunks(k: int) -> list[tuple[int, int]]:
    """The ``(start, length)`` of each GEMM of a contraction of length ``k``."""
    return [(c0, min(TENSOR_CHUNK, k - c0)) for c0 in range(0, k, TENSOR_CHUNK)]


def tensor_sum(ma: Any, mb: Any) -> Any:
    """``ma @ mb`` of float32 magnitudes (TF32 values, :func:`tf32_up`; matrices, or
    stacks of them broadcast as ``matmul`` does) on the tensor cores: float32 where
    ``k <= TENSOR_CHUNK`` (one GEMM a matrix), else the float64 sum of the chunks'
    GEMMs. CuPy arrays, or torch tensors on a CUDA device (computed by CuPy on
    torch's current stream, without a copy); the result is of the operands' kind."""
    if ma.ndim == 2 and mb.ndim == 2:
        return _matrix_sum(ma, mb)
    lib = _torch() if type(ma).__module__.startswith("torch") else _cupy()
    batch = tuple(np.broadcast_shapes(tuple(ma.shape[:-2]), tuple(mb.shape[:-2])))
    ma = lib.broadcast_to(ma, batch + tuple(ma.shape[-2:]))
    mb = lib.broadcast_to(mb, batch + tuple(mb.shape[-2:]))
    parts = [_matrix_sum(ma[i], mb[i]) for i in np.ndindex(*batch)]
    shape = batch + (ma.shape[-2], mb.shape[-1])
    return parts[0].reshape(shape) if len(parts) == 1 else lib.stack(parts).reshape(shape)


def _matrix_sum(ma: Any, mb: Any) -> Any:
    """:func:`tensor_sum` of two matrices."""
    if type(ma).__module__.startswith("torch"):
        torch, cupy = _torch(), _cupy()
        stream = torch.cuda.current_stream(ma.device)
        with cupy.cuda.Device(ma.device.index), _stream_of(stream):
            out = _cupy_sum(cupy.asarray(ma), cupy.asarray(mb))
            return torch.as_tensor(out, device=ma.device)
    return _cupy_sum(ma, mb)


_STREAMS: dict[tuple[int, int], Any] = {}


def _stream_of(stream: Any) -> Any:
    """CuPy's view of torch's CUDA ``stream`` (kept per stream)."""
    key = (int(stream.cuda_stream), int(stream.device.index or 0))
    found = _STREAMS.get(key)
    if found is None:
        cupy = _cupy()
        with warnings.catch_warnings():  # (CuPy 14 deprecates ExternalStream for from_external)
            warnings.simplefilter("ignore")
            try:
                found = cupy.cuda.Stream.from_external(stream)
            except Exception:  # noqa: BLE001 - a CuPy or torch without the stream protocol
                found = cupy.cuda.ExternalStream(*key)
        _STREAMS[key] = found
    return found


def _cupy_sum(ma: Any, mb: Any) -> Any:
    cupy = _cupy()
    if not (ma.flags.c_contiguous or ma.flags.f_contiguous):
        ma = cupy.ascontiguousarray(ma)
    if not (mb.flags.c_contiguous or mb.flags.f_contiguous):
        mb = cupy.ascontiguousarray(mb)
    a_ptr, b_ptr = ma.data.ptr, mb.data.ptr

    def gemm(plan: GemmPlan, c: int, a_at: int, b_at: int, out: Any) -> None:
        _gemm(plan, c, a_ptr + 4 * a_at, b_ptr + 4 * b_at, out.data.ptr)
    return chunked_sum(ma, mb, cupy, gemm)


def chunked_sum(ma: Any, mb: Any, xp: Any, gemm: Any) -> Any:
    """``ma @ mb`` (2-D float32, each in C or Fortran order, of namespace ``xp``) by
    ``gemm(plan, c, a_at, b_at, out)``, a column-major GEMM of ``c`` terms (its
    :class:`GemmPlan`; the operands' first elements ``a_at``, ``b_at`` elements into
    their memory) into the C-ordered float32 matrix ``out``: one GEMM up to
    TENSOR_CHUNK terms (float32), else one per chunk, summed in float64 (as many
    chunks' results held at once as CHUNK_BYTES allows)."""
    m, k = ma.shape
    n = mb.shape[1]
    if not (m and n and k):
        return xp.zeros((m, n), dtype=xp.float32)
    plan = gemm_plan(m, k, n, bool(ma.flags.f_contiguous and not ma.flags.c_contiguous),
                     bool(mb.flags.f_contiguous and not mb.flags.c_contiguous))
    if k <= TENSOR_CHUNK:  # one GEMM (the host's work kept small: small contractions)
        out = xp.ndarray((m, n), dtype=xp.float32)
        gemm(plan, k, 0, 0, out)
        return out
    parts = chunks(k)
    held = max(1, min(len(parts), CHUNK_BYTES // (4 * m * n)))  # chunks' results at once
    out = xp.ndarray((held, m, n), dtype=xp.float32)
    total = None
    for g0 in range(0, len(parts), held):
        group = parts[g0:g0 + held]
        for j, (c0, c) in enumerate(group):
            gemm(plan, c, c0 * plan.step_a, c0 * plan.step_b, out[j])
        part = out[:len(group)].sum(axis=0, dtype=xp.float64)
        total = part if total is None else total + part
    return total


def _gemm(plan: GemmPlan, c: int, a_ptr: int, b_ptr: int, out_ptr: int) -> None:
    """One TF32 GEMM of ``c`` terms on CuPy's current stream."""
    gemm_ex, handle = _blas()
    gemm_ex(handle(), plan.op_b, plan.op_a, plan.n, plan.m, c, _ONE_AT, b_ptr, _R_32F,
            plan.ld_b, a_ptr, _R_32F, plan.ld_a, _ZERO_AT, out_ptr, _R_32F, plan.n,
            _COMPUTE_32F_FAST_TF32, _GEMM_DEFAULT)


def value_product(av: Any, bv: Any) -> Any:
    """``av @ bv`` of two float64 CuPy matrices (each in C or Fortran order), a
    C-ordered float64 matrix: one cuBLAS GEMM in float64 (``CUBLAS_COMPUTE_64F``) on
    CuPy's current stream, through the binding of :func:`tensor_sum`, where the device
    passed :func:`_probe_values`; else CuPy's ``matmul`` (any other operands too). A
    float64 GEMM in any order of its additions: the reference's own error bound
    (``gamma_k(2^-53)`` of the magnitude sum) holds for it as for ``matmul``."""
    if not (av.ndim == bv.ndim == 2 and av.dtype == bv.dtype == np.float64
            and _contiguous(av) and _contiguous(bv) and _probe_values(int(av.device.id))):
        return av @ bv
    return _value_gemm(av, bv)


def _contiguous(x: Any) -> bool:
    flags = x.flags
    return bool(flags.c_contiguous or flags.f_contiguous)


def _value_gemm(av: Any, bv: Any) -> Any:
    """:func:`value_product` of contiguous float64 CuPy matrices, without the probe."""
    m, k = av.shape
    n = bv.shape[1]
    out = _cupy().ndarray((m, n), dtype=np.float64)
    if not (m and n):
        return out
    if not k:
        out.fill(0.0)
        return out
    a_flags, b_flags = av.flags, bv.flags
    plan = gemm_plan(m, k, n, bool(a_flags.f_contiguous and not a_flags.c_contiguous),
                     bool(b_flags.f_contiguous and not b_flags.c_contiguous))
    gemm_ex, handle = _blas()
    gemm_ex(handle(), plan.op_b, plan.op_a, plan.n, plan.m, k, _ONE_64_AT, bv.data.ptr,
            _R_64F, plan.ld_b, av.data.ptr, _R_64F, plan.ld_a, _ZERO_64_AT, out.data.ptr,
            _R_64F, plan.n, _COMPUTE_64F, _GEMM_DEFAULT)
    return out


@lru_cache(maxsize=None)
def _probe_values(device: int) -> bool:
    """Whether :func:`_value_gemm` of small integer matrices on CuPy's ``device``, in C
    and Fortran order, gives their exact products: else (a binding this module does
    not know, a call that fails) contractions' values stay CuPy's ``matmul`` there."""
    rng = np.random.default_rng(1)
    a = rng.integers(-8, 8, (3, 7)).astype(np.float64)
    b = rng.integers(-8, 8, (7, 5)).astype(np.float64)
    want = a @ b
    try:
        with _cupy().cuda.Device(device):
            for x in (a, np.asfortranarray(a)):
                for y in (b, np.asfortranarray(b)):
                    got = _value_gemm(*(_onto(v, "cupy", device) for v in (x, y))).get()
                    if not np.array_equal(got, want):
                        raise ArithmeticError("float64 GEMMs differ from the exact products")
    except Exception as exc:  # noqa: BLE001 - any failure leaves CuPy's matmul
        warnings.warn(f"contraction values use CuPy's matmul on device {device}: the direct "
                      f"float64 GEMM failed its probe ({exc!r})", RuntimeWarning, stacklevel=2)
        return False
    return True


@lru_cache(maxsize=1)
def _blas() -> tuple[Any, Any]:
    """CuPy's binding of cublasGemmEx and its cuBLAS handle of the current device."""
    from cupy.cuda import device  # noqa: PLC0415 - only on a GPU
    from cupy_backends.cuda.libs import cublas  # noqa: PLC0415

    return cublas.gemmEx, device.get_cublas_handle


@lru_cache(maxsize=1)
def _cupy() -> Any:
    try:
        import cupy  # noqa: PLC0415 - optional, only on a GPU
    except ImportError:
        return None
    return cupy


def _torch() -> Any:
    import torch  # noqa: PLC0415 - only for torch's arrays

    return torch
